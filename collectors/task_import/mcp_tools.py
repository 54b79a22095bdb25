"""Any MCP server's `tools/list` as mcp tasks, one per tool, so a file exercises every tool.

PATH is a bundled server's name (`everything`, `time`, `filesystem`, ...) or a JSON file holding a
task's `mcp` object (`{"server": "filesystem", "files": {...}}`, `{"command": ...}`, `{"url": ...}`).
The server is started through the mcp domain's own environment (collectors/mcp.py, the project's
MCP client, in a sandbox where the server needs one) and asked for its tools; each tool becomes a task
whose instruction names the tool and its description and whose scripted plan calls it once with
arguments drawn from its input schema (collectors/explore.py's `SchemaValues`, seeded by the tool's
name, so the same server gives the same file). Tools listed by the server are recorded in metadata.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collectors.task_import import Item, SuiteError, with_provenance

SUITE = "mcp"


def server_config(path: str | Path) -> dict[str, Any]:
    from collectors.mcp_servers import BUNDLED

    text = str(path)
    if text in BUNDLED:
        return {"server": text}
    file = Path(path)
    if file.is_file():
        try:
            obj = json.loads(file.read_text("utf-8"))
        except ValueError as exc:
            raise SuiteError(f"{file}: not JSON ({exc})") from exc
        if isinstance(obj, dict) and isinstance(obj.get("mcp"), dict):
            obj = obj["mcp"]
        if not isinstance(obj, dict):
            raise SuiteError(f"{file}: needs a JSON object (a task's 'mcp' configuration)")
        return obj
    raise SuiteError(
        f"{path}: neither a bundled MCP server ({', '.join(sorted(BUNDLED))}) nor a JSON file with an 'mcp' object"
    )


def list_tools(config: dict[str, Any]) -> tuple[list[Any], str]:
    """The server's tools (ToolSpec) and its name, through the mcp environment's reset."""
    from collectors import engine
    from collectors.environment import EnvironmentOptions, Task
    from collectors.mcp import MCPEnvironment

    probe = Task(id="import-probe", instruction="list the tools", config={"mcp": dict(config)})
    MCPEnvironment.validate_task(probe, "mcp server")
    client = engine.connect(timeout_s=30) if MCPEnvironment.needs_engine(probe) else None
    env = MCPEnvironment(EnvironmentOptions(client=client, run_label="tasks-import"))
    try:
        reset = env.reset(probe)
        name = str(config.get("server") or config.get("command") or config.get("url"))
        return list(reset.action_space.tools), name
    finally:
        env.close()


def arguments(tool: Any) -> dict[str, Any]:
    from collectors.explore import OrderedSet, SchemaValues

    digest = hashlib.sha256(f"worldline-tasks-import/mcp/{tool.name}".encode()).digest()
    values = SchemaValues(random.Random(int.from_bytes(digest[:8], "big")), OrderedSet(50))
    return values.object(tool.parameters or {}, tool.name)


def read(path: str | Path, **_: Any) -> Iterator[Item]:
    config = server_config(path)
    tools, server = list_tools(config)
    names = [t.name for t in tools]
    for tool in tools:
        description = (tool.description or "").strip().splitlines()[0] if tool.description else ""
        task = {
            "id": f"mcp-{server.replace('/', '_')}-{tool.name}",
            "instruction": f"Use the {tool.name} tool of the {server} MCP server"
            + (f": {description}" if description else "."),
            "mcp": {**config, "tools": [tool.name]},
            "actions": [{"name": tool.name, "arguments": arguments(tool)}],
            "metadata": {"mcp_server": server, "mcp_server_tools": names},
        }
        yield with_provenance("mcp", SUITE, f"{server}/{tool.name}", str(path), task)
