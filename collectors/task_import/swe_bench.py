"""SWE-bench-style instance files as swe tasks.

An instance (SWE-bench's dataset row: `instance_id`, `repo`, `base_commit`, `problem_statement`,
`FAIL_TO_PASS`, `PASS_TO_PASS` as JSON-encoded lists, `version`, ...) from a JSON file (one object or
a list) or JSONL. The repository comes from `repo_source`: a local git repository (the files of
`base_commit`, read with `git archive`) or a tarball of the tree at that commit. The gold `patch`,
`test_patch` and `hints_text` stay out of the task (the agent must not see them); the tests to pass are
recorded in metadata.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collectors.task_import import Item, Skip, SuiteError, with_provenance

SUITE = "swe-bench"
MAX_REPO_BYTES = 32 * 1024 * 1024  # the text files one task may carry


def instances(path: Path) -> list[dict[str, Any]]:
    text = path.read_text("utf-8")
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            rows = json.loads(text)
        elif stripped.startswith("{") and "\n{" not in stripped.rstrip():
            rows = [json.loads(text)]
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise SuiteError(f"{path}: not SWE-bench instances (JSON, a JSON list or JSONL): {exc}") from exc
    if not all(isinstance(r, dict) and "instance_id" in r for r in rows):
        raise SuiteError(f"{path}: every instance needs an 'instance_id'")
    return [dict(r) for r in rows]


def _tests(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return [value] if value else []
    return [str(v) for v in value] if isinstance(value, list) else []


def _from_tar(data: bytes) -> tuple[dict[str, str], int]:
    files: dict[str, str] = {}
    skipped = 0
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        prefix = _common_top(m.name for m in members)
        for member in members:
            name = member.name[len(prefix) :] if prefix else member.name
            if not name or name.startswith("/") or ".." in name.split("/") or "/.git/" in f"/{name}":
                continue
            blob = tar.extractfile(member)
            raw = blob.read() if blob else b""
            try:
                files[name] = raw.decode("utf-8")
            except UnicodeDecodeError:
                skipped += 1
    return files, skipped


def _common_top(names: Iterator[str] | Any) -> str:
    """`top/` when every member is under one top folder (a GitHub tarball), else ''."""
    tops = {n.split("/", 1)[0] for n in names if "/" in n}
    return f"{tops.pop()}/" if len(tops) == 1 else ""


def repo_files(source: Path, commit: str) -> tuple[dict[str, str], int, str]:
    """The tree at `commit` (text files, count of binary ones left out), or ({}, 0, why not)."""
    if source.is_dir():
        run = subprocess.run(
            ["git", "-C", str(source), "archive", "--format=tar", commit],
            capture_output=True,
            check=False,
        )
        if run.returncode != 0:
            return (
                {},
                0,
                f"base_commit {commit} not in {source}: {run.stderr.decode(errors='replace').strip()[:200]}",
            )
        files, binary = _from_tar(run.stdout)
        return files, binary, ""
    if source.is_file():
        files, binary = _from_tar(source.read_bytes())
        return files, binary, ""
    return {}, 0, f"repository source {source} does not exist"


def read(path: str | Path, repo_source: str | Path | None = None, **_: Any) -> Iterator[Item]:
    if repo_source is None:
        raise SuiteError(
            "swe-bench needs --repo: a local git repository or a tarball of the tree at base_commit"
        )
    source = Path(repo_source)
    for row in instances(Path(path)):
        suite_id = str(row["instance_id"])
        statement = str(row.get("problem_statement") or "")
        if not statement.strip():
            yield Skip(suite_id, "no problem_statement")
            continue
        files, binary, why = repo_files(source, str(row.get("base_commit") or "HEAD"))
        if why:
            yield Skip(suite_id, why)
            continue
        if sum(len(v.encode()) for v in files.values()) > MAX_REPO_BYTES:
            yield Skip(suite_id, f"repository over {MAX_REPO_BYTES // (1024 * 1024)} MiB of text")
            continue
        task = {
            "id": f"swebench-{suite_id}",
            "instruction": statement.strip(),
            "repo": {
                "files": files,
                "commit_message": f"{row.get('repo', 'repository')} at {row.get('base_commit', 'HEAD')}",
            },
            "metadata": {
                "swebench_repo": row.get("repo"),
                "base_commit": row.get("base_commit"),
                "version": row.get("version"),
                "fail_to_pass": _tests(row.get("FAIL_TO_PASS")),
                "pass_to_pass": _tests(row.get("PASS_TO_PASS")),
                "binary_files_left_out": binary,
            },
        }
        yield with_provenance("swe", SUITE, suite_id, str(path), task)
