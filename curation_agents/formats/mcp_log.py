"""MCP JSON-RPC logs: one message per line (bare, or wrapped as {"direction"|"type", "message"}).

`tools/call` requests pair with their responses by id; `tools/list` results declare the action space.
"""

from __future__ import annotations

import json
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import as_dict, as_list, as_str, content_text, tool_call_json, turn
from curation_agents.model import ParsedRecord, RawTurn


def unwrap(obj: Any) -> dict[str, Any] | None:
    """The JSON-RPC message inside a log line, or None when the line is not one."""
    if isinstance(obj, dict) and obj.get("jsonrpc") == "2.0":
        return obj
    if isinstance(obj, dict):
        for key in ("message", "msg", "data", "payload"):
            inner = obj.get(key)
            if isinstance(inner, dict) and inner.get("jsonrpc") == "2.0":
                return inner
    return None


def parse(messages: list[Any]) -> ParsedRecord:
    tools: list[dict[str, Any]] = []
    pending: dict[str, RawTurn] = {}
    list_ids: set[str] = set()
    turns: list[RawTurn] = []
    server = None
    for raw in messages:
        msg = unwrap(raw)
        if msg is None:
            continue
        key = json.dumps(msg.get("id"))
        method = msg.get("method")
        if method == "tools/call":
            params = as_dict(msg.get("params"))
            name = str(params.get("name") or "")
            t = turn(
                tool_call_json(name, params.get("arguments")),
                "tool_call",
                "",
                tool_name=name,
                observation_format="json",
            )
            turns.append(t)
            pending[key] = t
        elif method == "tools/list":
            list_ids.add(key)
        elif method is None and ("result" in msg or "error" in msg):
            result = msg.get("result")
            if key in list_ids and isinstance(result, dict):
                for tool in result.get("tools") or []:
                    if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                        schema = tool.get("inputSchema")
                        tools.append(
                            {
                                "name": tool["name"],
                                "description": as_str(tool.get("description")),
                                "parameters": schema if isinstance(schema, dict) else None,
                            }
                        )
                continue
            if isinstance(result, dict) and isinstance(result.get("serverInfo"), dict):
                server = as_str(result["serverInfo"].get("name"))
            target = pending.pop(key, None)
            if target is None:
                continue
            if "error" in msg:
                err = as_dict(msg["error"])
                target["observation"] = json.dumps({"error": err}, ensure_ascii=False)
                target["is_error"] = True
            elif isinstance(result, dict):
                blocks = as_list(result.get("content"))
                texts = [content_text(b) for b in blocks if isinstance(b, dict)]
                target["observation"] = "\n".join(texts) if texts else json.dumps(result, ensure_ascii=False)
                target["observation_format"] = "text" if texts else "json"
                target["is_error"] = bool(result.get("isError"))
    return {
        "format": Format.MCP_JSONRPC,
        "domain": "mcp",
        "task": "",
        "system_prompt": None,
        "tools": tools,
        "agent": None,
        "model": None,
        "status": "complete",
        "turns": turns,
        "metadata": {"server": server} if server else {},
    }
