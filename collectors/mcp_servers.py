"""The bundled MCP servers: where `make setup` installed them, how each is started, how its initial
state is seeded from a task, and how what it serves is snapshotted for the trajectory's initial state.

Each episode gets a private workspace folder; a server that serves files or state (a directory tree,
a git repository, a SQLite database, a knowledge-graph file) is seeded there before it starts, so every
trajectory begins from exactly the state its task describes. Installation: `infra/install-mcp-servers.sh`
(npm packages into `infra/.cache/mcp-node`, each PyPI server into its own `infra/.cache/mcp-python/<name>`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = Path(os.environ.get("WORLDLINE_MCP_CACHE", ROOT / "infra" / ".cache"))
NODE_MODULES = CACHE_DIR / "mcp-node" / "node_modules"
PYTHON_SERVERS = CACHE_DIR / "mcp-python"  # one --target folder per server: <name>/lib
INSTALL_FIX = "bash infra/install-mcp-servers.sh   (part of `make setup`)"

# A fixed identity and clock for seeded git history, so the same task always yields the same commits.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "worldline",
    "GIT_AUTHOR_EMAIL": "worldline@example.invalid",
    "GIT_COMMITTER_NAME": "worldline",
    "GIT_COMMITTER_EMAIL": "worldline@example.invalid",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}

DEFAULT_FILES = {
    "README.md": "# Project notes\n\nThis folder holds the team's planning files.\n",
    "notes/todo.txt": "- write the quarterly report\n- book the meeting room\n- review pull request 42\n",
    "data/cities.csv": "city,country,population\nLyon,France,522250\nPorto,Portugal,231962\nGhent,Belgium,265086\n",
}
DEFAULT_SQL = [
    "CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL NOT NULL, stock INTEGER)",
    "INSERT INTO products (name, price, stock) VALUES ('kettle', 24.5, 12), ('toaster', 31.0, 4), "
    "('blender', 58.9, 0)",
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, product_id INTEGER REFERENCES products(id), quantity INTEGER)",
    "INSERT INTO orders (product_id, quantity) VALUES (1, 2), (2, 1), (1, 5)",
]
DEFAULT_GRAPH: dict[str, list[dict[str, Any]]] = {
    "entities": [
        {"name": "Ada", "entityType": "person", "observations": ["works on the compiler team"]},
        {"name": "Compiler team", "entityType": "team", "observations": ["meets on Tuesdays"]},
    ],
    "relations": [{"from": "Ada", "to": "Compiler team", "relationType": "member_of"}],
}


@dataclass(frozen=True)
class Launch:
    """How to start one server process: command, arguments, extra environment, working directory."""

    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str | None = None


@dataclass(frozen=True)
class BundledServer:
    """A server we install and start ourselves, with the state it is seeded with."""

    name: str
    package: str  # the npm or PyPI package it comes from
    kind: str  # "node" or "python"
    entry: str  # node: script under node_modules; python: the module whose main() starts it
    touches_state: bool  # serves files or state, so it is seeded per episode
    seed_keys: tuple[str, ...]  # the task's `mcp` keys this server reads
    prepare: Callable[[Path, dict[str, Any]], list[str]]  # seeds the workspace, returns its CLI arguments
    snapshot: Callable[[Path], str]  # what it serves, as text for the initial state
    env: Callable[[Path], dict[str, str]] = lambda _ws: {}
    workdir: str = ""  # the server's working directory inside the workspace (git: the repository, so ".")
    hint: str = ""  # what the agent needs to know to address the seeded state, shown in the first observation

    def installed_path(self) -> Path:
        if self.kind == "node":
            return NODE_MODULES / self.entry
        return self.python_lib() / self.entry

    def python_lib(self) -> Path:
        return PYTHON_SERVERS / self.name / "lib"

    def is_installed(self) -> bool:
        return self.installed_path().exists()

    def launch(self, workspace: Path, config: dict[str, Any], layout: Layout | None = None) -> Launch:
        """Seed `workspace` (a host folder) from the task and return how to start the server, with the
        paths as the server sees them under `layout` (the host's, or a sandbox's)."""
        layout = layout or host_layout(workspace)
        seen = layout.visible
        args = [seen(workspace, a) for a in self.prepare(workspace, config)]
        env = {k: seen(workspace, v) for k, v in self.env(workspace).items()}
        cwd = str(layout.workspace / self.workdir) if self.workdir else str(layout.workspace)
        if self.kind == "node":
            return Launch(layout.node, [f"{layout.node_modules}/{self.entry}", *args], env, cwd)
        # The PyPI servers live in their own --target folders, run by a plain interpreter, so their pins
        # never meet this project's virtualenv nor each other's.
        start = f"import sys, {self.entry}; sys.argv[0] = {self.package!r}; sys.exit({self.entry}.main())"
        env = {**env, "PYTHONPATH": f"{layout.python_servers}/{self.name}/lib", "PYTHONNOUSERSITE": "1"}
        return Launch(layout.python, ["-c", start, *args], env, cwd)

    def snapshot_as_seen(self, workspace: Path, layout: Layout | None = None) -> str:
        """The served state, with paths as the server sees them."""
        layout = layout or host_layout(workspace)
        return layout.visible(workspace, self.snapshot(workspace))


@dataclass(frozen=True)
class Layout:
    """Where the programs and the seeded workspace are, as the server process sees them."""

    node: str
    node_modules: str
    python: str
    python_servers: str
    workspace: Path

    def visible(self, host_workspace: Path, text: str) -> str:
        """`text` with the host workspace path replaced by the server's view of it."""
        return text.replace(str(host_workspace), str(self.workspace))


def host_layout(workspace: Path) -> Layout:
    """Servers started on this machine: the installed folders and the workspace where it is."""
    return Layout(
        "node",
        str(NODE_MODULES),
        str(Path(sys.base_prefix) / "bin" / "python3"),
        str(PYTHON_SERVERS),
        workspace,
    )


# Servers started in a worldline/mcp sandbox (infra/build-mcp-image.sh lays the image out like this).
SANDBOX_IMAGE = "worldline/mcp"
SANDBOX_LAYOUT = Layout(
    "/opt/mcp/bin/node", "/opt/mcp/node/node_modules", "/usr/bin/python3", "/opt/mcp/python", Path("/work")
)


# -- seeding and snapshots -------------------------------------------------------------------------


def write_files(root: Path, files: dict[str, str]) -> None:
    """Create `files` (relative path -> text) under root, refusing paths that leave it."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        target = (root / rel).resolve()
        if not target.is_relative_to(root.resolve()):
            raise ValueError(f"file path {rel!r} leaves the seeded folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, "utf-8")


def tree_snapshot(root: Path, *, max_entries: int = 300, max_file_chars: int = 2000) -> str:
    """The directory tree under root (sizes) and the content of its small text files."""
    lines = [f"directory {root}"]
    contents: list[str] = []
    entries = sorted(p for p in root.rglob("*") if ".git" not in p.relative_to(root).parts)
    for path in entries[:max_entries]:
        rel = path.relative_to(root).as_posix()
        if path.is_dir():
            lines.append(f"  {rel}/")
            continue
        size = path.stat().st_size
        lines.append(f"  {rel} ({size} bytes)")
        if size <= max_file_chars:
            try:
                contents.append(f"--- {rel}\n{path.read_text('utf-8').rstrip()}")
            except UnicodeDecodeError:
                pass
    if len(entries) > max_entries:
        lines.append(f"  ... {len(entries) - max_entries} more entries")
    return "\n".join(lines + ([""] + contents if contents else []))


def _prepare_filesystem(ws: Path, config: dict[str, Any]) -> list[str]:
    root = ws / "files"
    write_files(root, config.get("files", DEFAULT_FILES))
    return [str(root)]


def _snapshot_filesystem(ws: Path) -> str:
    return tree_snapshot(ws / "files")


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    proc = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise OSError(f"git {' '.join(args)} failed: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def _prepare_git(ws: Path, config: dict[str, Any]) -> list[str]:
    repo = ws / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    _git(repo, "init", "-q", "-b", "main")
    commits = config.get("commits") or [
        {
            "files": config.get("files", DEFAULT_FILES),
            "message": config.get("commit_message", "Initial commit"),
        }
    ]
    for commit in commits:
        write_files(repo, commit.get("files", {}))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "--allow-empty", "-m", commit.get("message", "Update"))
    for rel, content in (config.get("uncommitted") or {}).items():
        write_files(repo, {rel: content})
    return ["--repository", str(repo)]


def _snapshot_git(ws: Path) -> str:
    repo = ws / "repo"
    log = _git(repo, "log", "--format=%h %ad %s", "--date=iso-strict").rstrip()
    status = _git(repo, "status", "--short", "--branch").rstrip()
    return f"git repository {repo}\n## log\n{log}\n## status\n{status}\n## files\n{tree_snapshot(repo)}"


def _prepare_sqlite(ws: Path, config: dict[str, Any]) -> list[str]:
    db = ws / "db.sqlite"
    with sqlite3.connect(db) as conn:
        for statement in config.get("sql", DEFAULT_SQL):
            conn.execute(statement)
    return ["--db-path", str(db)]


def _snapshot_sqlite(ws: Path, *, max_rows: int = 20) -> str:
    db = ws / "db.sqlite"
    lines = [f"sqlite database {db}"]
    with sqlite3.connect(db) as conn:
        tables = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type='table' ORDER BY name"
        ).fetchall()
        for name, sql in tables:
            count = conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0]
            lines.append(f"## {name} ({count} rows)\n{sql}")
            cursor = conn.execute(f'SELECT * FROM "{name}" LIMIT {max_rows}')
            lines.append(" | ".join(d[0] for d in cursor.description))
            lines.extend(" | ".join(map(str, row)) for row in cursor.fetchall())
    return "\n".join(lines)


def _prepare_memory(ws: Path, config: dict[str, Any]) -> list[str]:
    graph = config.get("graph", DEFAULT_GRAPH)
    lines = [json.dumps({"type": "entity", **e}) for e in graph.get("entities", [])]
    lines += [json.dumps({"type": "relation", **r}) for r in graph.get("relations", [])]
    (ws / "memory.jsonl").write_text("".join(line + "\n" for line in lines), "utf-8")
    return []


def _snapshot_memory(ws: Path) -> str:
    return f"knowledge graph {ws / 'memory.jsonl'}\n" + (ws / "memory.jsonl").read_text("utf-8").rstrip()


def _prepare_time(ws: Path, config: dict[str, Any]) -> list[str]:
    return ["--local-timezone", str(config.get("timezone", "UTC"))]


BUNDLED: dict[str, BundledServer] = {
    s.name: s
    for s in (
        BundledServer(
            "filesystem",
            "@modelcontextprotocol/server-filesystem",
            "node",
            "@modelcontextprotocol/server-filesystem/dist/index.js",
            True,
            ("files",),
            _prepare_filesystem,
            _snapshot_filesystem,
            workdir="files",
            hint="paths are relative to the served folder (see list_allowed_directories)",
        ),
        BundledServer(
            "memory",
            "@modelcontextprotocol/server-memory",
            "node",
            "@modelcontextprotocol/server-memory/dist/index.js",
            True,
            ("graph",),
            _prepare_memory,
            _snapshot_memory,
            env=lambda ws: {"MEMORY_FILE_PATH": str(ws / "memory.jsonl")},
        ),
        BundledServer(
            "everything",
            "@modelcontextprotocol/server-everything",
            "node",
            "@modelcontextprotocol/server-everything/dist/index.js",
            False,
            (),
            lambda _ws, _c: ["stdio"],
            lambda _ws: "the MCP reference test server (no seeded state)",
        ),
        BundledServer(
            "git",
            "mcp-server-git",
            "python",
            "mcp_server_git",
            True,
            ("files", "commits", "commit_message", "uncommitted"),
            _prepare_git,
            _snapshot_git,
            workdir="repo",
            hint='the repository is the server\'s working directory: use "repo_path": "."',
        ),
        BundledServer(
            "time",
            "mcp-server-time",
            "python",
            "mcp_server_time",
            False,
            ("timezone",),
            _prepare_time,
            lambda _ws: "no served state (time and time zones)",
        ),
        BundledServer(
            "sqlite",
            "mcp-server-sqlite",
            "python",
            "mcp_server_sqlite",
            True,
            ("sql",),
            _prepare_sqlite,
            _snapshot_sqlite,
        ),
    )
}
