"""The bundled MCP servers: where `make setup` installed them, how each is started, what state a task
seeds it with, and what it says about itself when it serves no state.

A server that serves files or state (a directory tree, a git repository, a SQLite database, a
knowledge-graph file) runs in a sandbox, and its state is seeded there before it starts, by
collectors/mcp_seed.py run inside the container: the host only computes the seed (the task's fields,
defaults applied) and sends it as JSON. So every trajectory begins from exactly the state its task
describes, and no task content is written, read or run by a host process. Installation:
`infra/install-mcp-servers.sh` (npm packages into `infra/.cache/mcp-node`, each PyPI server into its own
`infra/.cache/mcp-python/<name>`).
"""

from __future__ import annotations

import os
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
    touches_state: bool  # serves files or state: seeded per episode, and only ever run in a sandbox
    seed_keys: tuple[str, ...]  # the task's `mcp` keys this server reads
    arguments: Callable[[dict[str, Any], Path], list[str]]  # CLI arguments, from the task and the workspace
    seed: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # the seed sent to collectors/mcp_seed.py
    state_note: str = ""  # the initial state's "served state" of a server that serves none
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
        """How to start the server for a task: under `layout` (a sandbox's), or on this machine in the
        host folder `workspace`, which only a server that serves no state may use. Nothing is seeded here."""
        if layout is None and self.touches_state:
            raise ValueError(f"the {self.name} server serves seeded state: it runs only in a sandbox")
        layout = layout or host_layout(workspace)
        args = self.arguments(config, layout.workspace)
        env = self.env(layout.workspace)
        cwd = str(layout.workspace / self.workdir) if self.workdir else str(layout.workspace)
        if self.kind == "node":
            return Launch(layout.node, [f"{layout.node_modules}/{self.entry}", *args], env, cwd)
        # The PyPI servers live in their own --target folders, run by a plain interpreter, so their pins
        # never meet this project's virtualenv nor each other's; -P keeps the working directory (a seeded
        # repository) off sys.path, so no seeded file can stand in for a module the server imports.
        start = f"import sys, {self.entry}; sys.argv[0] = {self.package!r}; sys.exit({self.entry}.main())"
        env = {**env, "PYTHONPATH": f"{layout.python_servers}/{self.name}/lib", "PYTHONNOUSERSITE": "1"}
        return Launch(layout.python, ["-P", "-c", start, *args], env, cwd)


@dataclass(frozen=True)
class Layout:
    """Where the programs and the seeded workspace are, as the server process sees them."""

    node: str
    node_modules: str
    python: str
    python_servers: str
    workspace: Path


def host_layout(workspace: Path) -> Layout:
    """Servers started on this machine (those that serve no state): the installed folders, and a host
    folder of the episode's own as their working directory."""
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


# -- what each server is seeded with (the seeding itself: collectors/mcp_seed.py, in the sandbox) ---


def _seed_filesystem(config: dict[str, Any]) -> dict[str, Any]:
    return {"files": config.get("files", DEFAULT_FILES)}


def _seed_git(config: dict[str, Any]) -> dict[str, Any]:
    commits = config.get("commits") or [
        {
            "files": config.get("files", DEFAULT_FILES),
            "message": config.get("commit_message", "Initial commit"),
        }
    ]
    return {"commits": commits, "uncommitted": config.get("uncommitted") or {}}


def _seed_sqlite(config: dict[str, Any]) -> dict[str, Any]:
    return {"sql": config.get("sql", DEFAULT_SQL)}


def _seed_memory(config: dict[str, Any]) -> dict[str, Any]:
    return {"graph": config.get("graph", DEFAULT_GRAPH)}


def _time_arguments(config: dict[str, Any], _ws: Path) -> list[str]:
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
            lambda _c, ws: [str(ws / "files")],
            _seed_filesystem,
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
            lambda _c, _ws: [],
            _seed_memory,
            env=lambda ws: {"MEMORY_FILE_PATH": str(ws / "memory.jsonl")},
        ),
        BundledServer(
            "everything",
            "@modelcontextprotocol/server-everything",
            "node",
            "@modelcontextprotocol/server-everything/dist/index.js",
            False,
            (),
            lambda _c, _ws: ["stdio"],
            state_note="the MCP reference test server (no seeded state)",
        ),
        BundledServer(
            "git",
            "mcp-server-git",
            "python",
            "mcp_server_git",
            True,
            ("files", "commits", "commit_message", "uncommitted"),
            lambda _c, ws: ["--repository", str(ws / "repo")],
            _seed_git,
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
            _time_arguments,
            state_note="no served state (time and time zones)",
        ),
        BundledServer(
            "sqlite",
            "mcp-server-sqlite",
            "python",
            "mcp_server_sqlite",
            True,
            ("sql",),
            lambda _c, ws: ["--db-path", str(ws / "db.sqlite")],
            _seed_sqlite,
        ),
    )
}
