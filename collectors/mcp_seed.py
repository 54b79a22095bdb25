"""Seeding of the bundled MCP servers' state, run inside the server's sandbox and never on the host.

The collector sends this file's source and the task's seed (JSON, defaults applied) into the sandbox and
runs it there with the image's interpreter, standard library only and in isolated mode:

    python3 -I -c SOURCE SERVER SEED_JSON WORKSPACE

It builds the state the server will serve under WORKSPACE (a directory tree, a git repository, a SQLite
database, a knowledge-graph file), reads the snapshot recorded as the trajectory's initial state, and
prints one JSON line: {"worldline_seed": 1, "snapshot": ...} or {"worldline_seed": 1, "refused": ...}.
Task content never runs: paths that leave the served folder, pass through a symbolic link or name a
`.git` folder are refused; git runs with hooks, fsmonitor and global/system configuration off, in a
repository it creates itself, so no filter, diff or merge driver can be configured; SQL runs under an
authorizer that refuses ATTACH (and so VACUUM INTO), DETACH and load_extension. Were any of it to run,
it would run in the sandbox.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

MAX_ENTRIES = 300  # entries listed in a directory snapshot
MAX_FILE_CHARS = 2000  # files up to this size have their text in the snapshot
MAX_ROWS = 20  # rows shown per table

# A fixed identity and clock for seeded history, so the same task always yields the same commits; and
# no configuration but the repository's own, which this seeder creates.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "worldline",
    "GIT_AUTHOR_EMAIL": "worldline@example.invalid",
    "GIT_COMMITTER_NAME": "worldline",
    "GIT_COMMITTER_EMAIL": "worldline@example.invalid",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "HOME": "/nonexistent",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
}
GIT_FLAGS = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "protocol.allow=never",
)
# Keys of a repository's own configuration that make git run a program or read another file.
GIT_CONFIG_REFUSED = ("filter.", "diff.", "merge.", "include.", "includeif.", "core.hooks", "core.fsmonitor")

SQLITE_REFUSED_ACTIONS = {sqlite3.SQLITE_ATTACH: "ATTACH (or VACUUM INTO)", sqlite3.SQLITE_DETACH: "DETACH"}
SQLITE_REFUSED_FUNCTIONS = {"load_extension"}


class SeedRefused(Exception):
    """The seed asks for something this seeder does not do; the message names the field and the fix."""


# -- files -----------------------------------------------------------------------------------------


def path_parts(rel: Any, field: str, *, forbid_git: bool = False) -> list[str]:
    """The components of a seeded file's path, refusing what could leave the served folder."""
    if not isinstance(rel, str) or not rel or "\0" in rel:
        raise SeedRefused(f"{field}: path {rel!r} is not a non-empty relative path")
    if rel.startswith("/"):
        raise SeedRefused(f"{field}: path {rel!r} is absolute; give it relative to the served folder")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SeedRefused(f"{field}: path {rel!r} has a '..' component; paths stay inside the served folder")
    if not parts:
        raise SeedRefused(f"{field}: path {rel!r} names the served folder itself, not a file in it")
    if forbid_git and any(p.lower() == ".git" for p in parts):
        raise SeedRefused(
            f"{field}: path {rel!r} writes into git's own '.git' (configuration, hooks, objects); "
            "the seeder creates the repository: give only work-tree files"
        )
    return parts


def open_folder(root: Path) -> int:
    """A descriptor of `root`, created when missing; a symbolic link there is refused."""
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        os.mkdir(root, 0o755)
        st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode):
        raise SeedRefused(f"the served folder {root} exists and is not a folder (a link or a file)")
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)


def write_file(root: Path, rel: str, content: str, field: str, *, forbid_git: bool = False) -> None:
    """Write one seeded file under root, folder by folder, never following a symbolic link."""
    parts = path_parts(rel, field, forbid_git=forbid_git)
    fd = open_folder(root)
    try:
        for i, part in enumerate(parts[:-1]):
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                where = "/".join(parts[: i + 1])
                raise SeedRefused(
                    f"{field}: path {rel!r} passes through {where!r}, which is a symbolic link or a file"
                ) from exc
            os.close(fd)
            fd = child
        try:
            out = os.open(
                parts[-1],
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK,
                0o644,
                dir_fd=fd,
            )
        except OSError as exc:
            raise SeedRefused(
                f"{field}: path {rel!r} is a symbolic link, a folder or a special file; it is not followed"
            ) from exc
        try:
            if not stat.S_ISREG(os.fstat(out).st_mode):
                raise SeedRefused(f"{field}: path {rel!r} is a special file (a FIFO or a device)")
            with os.fdopen(out, "w", encoding="utf-8", closefd=False) as handle:
                handle.write(content)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def write_files(root: Path, files: Any, field: str, *, forbid_git: bool = False) -> None:
    if not isinstance(files, dict):
        raise SeedRefused(f"{field}: must be an object of relative path -> file text")
    for rel, content in files.items():
        if not isinstance(content, str):
            raise SeedRefused(f"{field}: the content of {rel!r} must be text")
        write_file(root, rel, content, f"{field}[{rel!r}]", forbid_git=forbid_git)


def tree_snapshot(root: Path, *, skip_git: bool = False) -> str:
    """The tree under root (sizes; links shown with their target, never followed) and the text of its
    small regular files."""
    lines = [f"directory {root}"]
    contents: list[str] = []
    entries: list[str] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        rel_folder = os.path.relpath(folder, root)
        if skip_git:
            dirs[:] = [d for d in dirs if d != ".git"]
            files = [f for f in files if f != ".git"]
        for name in dirs + files:
            entries.append(name if rel_folder == "." else f"{rel_folder}/{name}")
    entries.sort(key=lambda rel: rel.split("/"))
    for rel in entries[:MAX_ENTRIES]:
        st = os.lstat(root / rel)
        if stat.S_ISLNK(st.st_mode):
            lines.append(f"  {rel} -> {os.readlink(root / rel)} (symbolic link, not followed)")
        elif stat.S_ISDIR(st.st_mode):
            lines.append(f"  {rel}/")
        elif not stat.S_ISREG(st.st_mode):
            lines.append(f"  {rel} (special file)")
        else:
            lines.append(f"  {rel} ({st.st_size} bytes)")
            if st.st_size <= MAX_FILE_CHARS:
                try:
                    with open(root / rel, encoding="utf-8", opener=_open_nofollow) as handle:
                        contents.append(f"--- {rel}\n{handle.read().rstrip()}")
                except (UnicodeDecodeError, OSError):
                    pass
    if len(entries) > MAX_ENTRIES:
        lines.append(f"  ... {len(entries) - MAX_ENTRIES} more entries")
    return "\n".join(lines + ([""] + contents if contents else []))


def _open_nofollow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)


# -- the servers -----------------------------------------------------------------------------------


def seed_filesystem(ws: Path, seed: dict[str, Any]) -> str:
    root = ws / "files"
    write_files(root, seed.get("files", {}), "mcp.files")
    return tree_snapshot(root)


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *GIT_FLAGS, *args],
        cwd=repo,
        env=GIT_ENV,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise OSError(f"git {' '.join(args)} failed: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def seed_git(ws: Path, seed: dict[str, Any]) -> str:
    repo = ws / "repo"
    if os.path.lexists(repo):
        raise SeedRefused(
            f"{repo} exists before the git seed (made by the task's files or setup); the seeder creates "
            "the repository itself: give its content in mcp.commits / mcp.files / mcp.uncommitted"
        )
    os.mkdir(repo, 0o755)
    # An empty template: no sample hooks, no info/exclude from the image.
    git(repo, "init", "-q", "-b", "main", "--template=")
    configured = [
        k
        for k in git(repo, "config", "--local", "--name-only", "--list").split()
        if k.startswith(GIT_CONFIG_REFUSED)
    ]
    if configured:  # only git init wrote this configuration; a driver here means something is wrong
        raise SeedRefused(
            f"the new repository's configuration sets {', '.join(configured)}; refusing to commit"
        )
    for i, commit in enumerate(seed.get("commits", [])):
        if not isinstance(commit, dict):
            raise SeedRefused(f"mcp.commits[{i}]: must be an object {{'files': {{...}}, 'message': ...}}")
        write_files(repo, commit.get("files", {}), f"mcp.commits[{i}].files", forbid_git=True)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--no-verify", "--allow-empty", "-m", str(commit.get("message", "Update")))
    write_files(repo, seed.get("uncommitted", {}), "mcp.uncommitted", forbid_git=True)
    log = git(repo, "log", "--format=%h %ad %s", "--date=iso-strict").rstrip()
    status = git(repo, "status", "--short", "--branch").rstrip()
    return f"git repository {repo}\n## log\n{log}\n## status\n{status}\n## files\n{tree_snapshot(repo, skip_git=True)}"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def seed_sqlite(ws: Path, seed: dict[str, Any]) -> str:
    db = ws / "db.sqlite"
    if os.path.lexists(db):
        raise SeedRefused(
            f"{db} exists before the sqlite seed (made by the task's files or setup); the seeder creates it"
        )
    refused: list[str] = []

    def authorize(
        action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None
    ) -> int:
        if action in SQLITE_REFUSED_ACTIONS:
            refused.append(f"{SQLITE_REFUSED_ACTIONS[action]} {arg1!r}")
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in SQLITE_REFUSED_FUNCTIONS:
            refused.append(f"the function {arg2}()")
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    statements = seed.get("sql", [])
    conn = sqlite3.connect(db)
    try:
        conn.set_authorizer(authorize)
        for i, statement in enumerate(statements):
            refused.clear()
            try:
                conn.execute(statement)
                conn.commit()
            except sqlite3.Error as exc:
                if refused:
                    raise SeedRefused(
                        f"mcp.sql[{i}]: {refused[0]} is refused: a seed builds only its own database "
                        "(no other database files, no extensions)"
                    ) from exc
                raise OSError(f"mcp.sql[{i}] failed: {exc}") from exc
        conn.set_authorizer(None)
        lines = [f"sqlite database {db}"]
        tables = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type='table' ORDER BY name"
        ).fetchall()
        for name, sql in tables:
            count = conn.execute(f"SELECT COUNT(*) FROM {_quoted(name)}").fetchone()[0]
            lines.append(f"## {name} ({count} rows)\n{sql}")
            cursor = conn.execute(f"SELECT * FROM {_quoted(name)} LIMIT {MAX_ROWS}")
            lines.append(" | ".join(d[0] for d in cursor.description))
            lines.extend(" | ".join(map(str, row)) for row in cursor.fetchall())
    finally:
        conn.close()
    return "\n".join(lines)


def seed_memory(ws: Path, seed: dict[str, Any]) -> str:
    graph = seed.get("graph", {})
    lines = [json.dumps({"type": "entity", **e}) for e in graph.get("entities", [])]
    lines += [json.dumps({"type": "relation", **r}) for r in graph.get("relations", [])]
    text = "".join(line + "\n" for line in lines)
    write_file(ws, "memory.jsonl", text, "mcp.graph")
    return f"knowledge graph {ws / 'memory.jsonl'}\n" + text.rstrip()


SEEDERS = {"filesystem": seed_filesystem, "git": seed_git, "sqlite": seed_sqlite, "memory": seed_memory}


def main(argv: list[str]) -> int:
    server, seed_path, workspace = argv
    try:
        with open(seed_path, encoding="utf-8") as handle:
            seed = json.load(handle)
        try:
            os.unlink(seed_path)
        except OSError:
            pass  # left in the sandbox's /tmp, removed with it
        answer = {"worldline_seed": 1, "snapshot": SEEDERS[server](Path(workspace), seed)}
        code = 0
    except SeedRefused as exc:
        answer, code = {"worldline_seed": 1, "refused": str(exc)}, 3
    except (OSError, ValueError, TypeError, sqlite3.Error) as exc:
        answer, code = {"worldline_seed": 1, "failed": f"{type(exc).__name__}: {exc}"}, 4
    sys.stdout.write("\n" + json.dumps(answer) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
