"""MCP containment: hostile seeds and servers through the real collector, the real MCP servers and the
real engine, against the host canary.

Every seed is built inside the server's sandbox (collectors/mcp_seed.py), so the attacks below either
are refused there with a reason (the trajectory is an `env_failure` saying which field and why), or run
harmlessly inside the sandbox (the trajectory completes, the agent's attempts are error observations).
A task's own stdio server is sandboxed unless it opts out; fields that would point a bundled server at
a host path are refused before the run starts.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from collectors import engine
from collectors.collection import CollectConfig, CollectError, collect
from collectors.sandbox import LABEL, LABEL_OWNER_PID
from schemas import TrajectoryStatus, iter_trajectories
from schemas.shards import iter_record_batches
from tests.security.canary import HostCanary

pytestmark = pytest.mark.engine


def attack_tasks(canary: HostCanary) -> dict[str, tuple[dict[str, Any], TrajectoryStatus, str]]:
    """task id -> (the task, the status it must end with, text its status reason or turns must hold)."""
    here, file = str(canary.directory), str(canary.file)
    marker = f"{here}/ran-on-host"
    hostile_config = f'[filter "x"]\n\tclean = touch {marker}\n\tsmudge = touch {marker}\n'
    refused, complete = TrajectoryStatus.ENV_FAILURE, TrajectoryStatus.COMPLETE

    def sqlite(*sql: str, actions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return {"mcp": {"server": "sqlite", "sql": ["CREATE TABLE t (x)", *sql]}, "actions": actions or []}

    def git(files: dict[str, str], uncommitted: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
        cfg = {
            "server": "git",
            "commits": [{"files": files, "message": "seed"}],
            "uncommitted": uncommitted or {},
        }
        return {"mcp": cfg, **extra}

    rows: dict[str, tuple[dict[str, Any], TrajectoryStatus, str]] = {
        # sqlite: no statement of a seed reaches another database file or loads code
        "sqlite-attach-new-file": (
            sqlite(f"ATTACH DATABASE '{here}/evil.db' AS evil", "CREATE TABLE evil.stolen (x)"),
            refused,
            f"mcp.sql[1]: ATTACH (or VACUUM INTO) '{here}/evil.db' is refused",
        ),
        "sqlite-attach-canary": (
            sqlite(f"ATTACH '{file}' AS c", "INSERT INTO t SELECT sql FROM c.sqlite_master"),
            refused,
            f"ATTACH (or VACUUM INTO) '{file}' is refused",
        ),
        "sqlite-load-extension": (
            sqlite(f"SELECT load_extension('{here}/evil.so')"),
            refused,
            "the function load_extension() is refused",
        ),
        "sqlite-vacuum-into": (
            sqlite("INSERT INTO t VALUES (1)", f"VACUUM INTO '{here}/copy.db'"),
            refused,
            f"mcp.sql[2]: ATTACH (or VACUUM INTO) '{here}/copy.db' is refused",
        ),
        # the agent's own queries run in the sandbox, where host paths do not exist
        "sqlite-agent-attach": (
            sqlite(
                "INSERT INTO t VALUES ('kept')",
                actions=[
                    {"name": "write_query", "arguments": {"query": f"ATTACH DATABASE '{file}' AS c"}},
                    {"name": "read_query", "arguments": {"query": "SELECT * FROM c.sqlite_master"}},
                    {"name": "read_query", "arguments": {"query": "SELECT x FROM t"}},
                ],
            ),
            complete,
            "kept",
        ),
        # git: no configuration, hook or driver comes from the task
        "git-filter-in-config": (
            git(
                {
                    ".gitattributes": "* filter=x diff=x merge=x\n",
                    ".git/config": hostile_config,
                    "a.txt": "a\n",
                }
            ),
            refused,
            "mcp.commits[0].files['.git/config']: path '.git/config' writes into git's own '.git'",
        ),
        "git-attributes-alone": (
            git(
                {".gitattributes": "* filter=x diff=x merge=x\n", "a.txt": "a\n"},
                uncommitted={"a.txt": "changed\n"},
                actions=[
                    {"name": "git_status", "arguments": {"repo_path": "."}},
                    {"name": "git_diff_unstaged", "arguments": {"repo_path": "."}},
                    {"name": "git_add", "arguments": {"repo_path": ".", "files": ["a.txt"]}},
                ],
            ),
            complete,
            "changed",
        ),
        "git-hook": (
            git({".git/hooks/pre-commit": f"#!/bin/sh\ntouch {marker}\n", "a.txt": "a\n"}),
            refused,
            "path '.git/hooks/pre-commit' writes into git's own '.git'",
        ),
        "git-fsmonitor": (
            git({".GIT/config": f"[core]\n\tfsmonitor = touch {marker}\n", "a.txt": "a\n"}),
            refused,
            "path '.GIT/config' writes into git's own '.git'",
        ),
        "git-include-path": (
            git({"./.git/config": f"[include]\n\tpath = {file}\n"}),
            refused,
            "writes into git's own '.git'",
        ),
        "git-nested-gitfile": (
            git({"sub/.git": f"gitdir: {here}\n", "sub/a.txt": "a\n"}),
            refused,
            "path 'sub/.git' writes into git's own '.git'",
        ),
        "git-symlinks-from-setup": (
            {
                **git({"a.txt": "a\n"}),
                "setup": [
                    f"mkdir -p /work/repo && ln -s {file} /work/repo/link && ln -s {here} /work/repo/dir"
                ],
            },
            refused,
            "/work/repo exists before the git seed (made by the task's files or setup)",
        ),
        # filesystem: paths stay in the served folder and no link is followed
        "fs-dotdot": (
            {"mcp": {"server": "filesystem", "files": {"notes/../../escape.txt": "x"}}},
            refused,
            "mcp.files['notes/../../escape.txt']: path 'notes/../../escape.txt' has a '..' component",
        ),
        "fs-absolute": (
            {"mcp": {"server": "filesystem", "files": {f"{here}/absolute.txt": "x"}}},
            refused,
            f"path '{here}/absolute.txt' is absolute",
        ),
        "fs-write-through-link": (
            {
                "mcp": {"server": "filesystem", "files": {"dir/evil.txt": "x"}},
                "setup": [f"mkdir -p /work/files && ln -s {here} /work/files/dir"],
            },
            refused,
            "path 'dir/evil.txt' passes through 'dir', which is a symbolic link or a file",
        ),
        "fs-links-read": (
            {
                "mcp": {"server": "filesystem", "files": {"notes.txt": "plain notes"}},
                "setup": [
                    f"mkdir -p /work/files && ln -s {file} /work/files/link.txt && ln -s {here} /work/files/dir"
                ],
                "actions": [
                    {"name": "read_text_file", "arguments": {"path": "link.txt"}},
                    {"name": "read_text_file", "arguments": {"path": "dir/canary.txt"}},
                    {"name": "list_directory", "arguments": {"path": "dir"}},
                    {"name": "read_text_file", "arguments": {"path": file}},
                    {"name": "write_file", "arguments": {"path": f"{here}/written.txt", "content": "x"}},
                    {"name": "read_text_file", "arguments": {"path": "notes.txt"}},
                ],
            },
            complete,
            "plain notes",
        ),
        # memory: the graph file is written where the seeder says, never through a link
        "memory-file-through-link": (
            {
                "mcp": {"server": "memory"},
                "setup": [f"ln -s {here}/evil.jsonl /work/memory.jsonl"],
            },
            refused,
            "mcp.graph: path 'memory.jsonl' is a symbolic link, a folder or a special file",
        ),
        # a task's own stdio server runs in a sandbox unless it opts out
        "custom-command-sandboxed": (
            {
                "mcp": {
                    "command": "/bin/sh",
                    "args": ["-c", f"touch {marker}; cat {file}"],
                    "start_timeout_s": 10,
                }
            },
            refused,
            "failed to start",
        ),
    }
    return {
        task_id: ({"id": task_id, "instruction": "attack", **row}, status, expected)
        for task_id, (row, status, expected) in rows.items()
    }


def own_sandboxes() -> list[Any]:
    client = engine.connect()
    return [
        c
        for c in client.containers.list(all=True, filters={"label": LABEL})
        if (c.labels or {}).get(LABEL_OWNER_PID) == str(os.getpid())
    ]


def host_workspaces() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("worldline-mcp-*")}


def produced_texts(out: Path) -> list[str]:
    """Every record the run wrote, as JSON text, and every text file beside the shards."""
    texts = [
        json.dumps(rec, default=str) for _, batch in iter_record_batches(out) for rec in batch.to_pylist()
    ]
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".txt", ".log", ".cast"):
            texts.append(path.read_text("utf-8", errors="replace"))
    return texts


@pytest.mark.timeout(420)
def test_hostile_seeds_are_built_in_the_sandbox_and_refused_there(
    host_canary: HostCanary, tmp_path: Path
) -> None:
    tasks = attack_tasks(host_canary)
    path = tmp_path / "attacks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row, _, _ in tasks.values()))
    before = host_workspaces()
    out = tmp_path / "out"
    summary = collect(CollectConfig(env="mcp", tasks_path=path, policy="scripted", out=out, concurrency=2))
    assert summary.written == len(tasks)

    by_id = {t.metadata["task_id"]: t for t in iter_trajectories(out)}
    assert set(by_id) == set(tasks)
    for task_id, (_row, status, expected) in tasks.items():
        trajectory = by_id[task_id]
        told = (trajectory.status_reason or "") + "".join(t.observation.text for t in trajectory.turns)
        assert trajectory.status == status, (task_id, trajectory.status, trajectory.status_reason)
        assert expected in told, (task_id, told[:800])

    # The agent's attempts on host paths are the environment's answers, as errors.
    links = by_id["fs-links-read"].turns
    assert [t.observation.is_error for t in links] == [True, True, True, True, True, False]
    assert "(symbolic link, not followed)" in (by_id["fs-links-read"].initial_state or "")
    agent_sql = by_id["sqlite-agent-attach"].turns
    assert "no such table: c.sqlite_master" in agent_sql[1].observation.text
    # A task's own command ran in the sandbox, where the host's files are not; the reason says so.
    custom = by_id["custom-command-sandboxed"].status_reason or ""
    assert "runs in a worldline/mcp sandbox" in custom
    # The inert attributes changed nothing: the diff is git's plain one.
    assert "+changed" in by_id["git-attributes-alone"].turns[1].observation.text

    assert sorted(p.name for p in host_canary.directory.iterdir()) == ["canary.txt"]
    host_canary.assert_untouched(produced_texts(out))
    assert own_sandboxes() == []
    assert host_workspaces() <= before


@pytest.mark.parametrize(
    ("mcp", "message"),
    [
        ({"server": "memory", "env": {"MEMORY_FILE_PATH": "{here}/evil.jsonl"}}, "mcp.env do not apply"),
        ({"server": "git", "cwd": "{here}"}, "mcp.cwd do not apply to the bundled git server"),
        ({"server": "sqlite", "args": ["--db-path", "{file}"]}, "mcp.args do not apply"),
        ({"server": "filesystem", "sandbox": False}, "always runs in a sandbox"),
        (
            {"server": "time", "timezone": "../../../../{file}"},
            "'mcp.timezone' must be an IANA time-zone name",
        ),
    ],
    ids=["memory-file-env", "git-cwd", "sqlite-db-path", "filesystem-on-host", "time-zone-path"],
)
def test_fields_that_point_a_bundled_server_at_the_host_stop_the_run(
    host_canary: HostCanary, tmp_path: Path, mcp: dict[str, Any], message: str
) -> None:
    text = (
        json.dumps(mcp).replace("{here}", str(host_canary.directory)).replace("{file}", str(host_canary.file))
    )
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "host-path", "instruction": "x", "mcp": json.loads(text)}) + "\n")
    with pytest.raises(CollectError, match=rf"id host-path\).*{message}"):
        collect(CollectConfig(env="mcp", tasks_path=path, policy="scripted", out=tmp_path / "out"))
    assert sorted(p.name for p in host_canary.directory.iterdir()) == ["canary.txt"]
    host_canary.assert_untouched()
