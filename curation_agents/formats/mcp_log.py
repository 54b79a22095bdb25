"""MCP JSON-RPC logs: one message per line, bare, wrapped as {"direction"|"type", "message"}, or as
Claude Desktop writes them (`mcp.log`, `mcp-server-NAME.log`):

    2025-06-13T14:44:29.945Z [info] [db-timetable] Message from client: {"method":"initialize",...}
    2026-03-01T09:44:53.643Z [filesystem] [info] Message from server: {"jsonrpc":"2.0",...} { metadata: undefined }

`tools/call` requests pair with their responses by id (a new `initialize` starts a new session, whose
ids start again); `tools/list` results declare the action space (the latest list of a session wins).
Observations follow schemas.mcp_observation, the same convention as collected MCP trajectories.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import as_dict, as_str, open_binary, tool_call_json, turn
from curation_agents.model import ParsedRecord, RawTurn, StageFailure
from schemas import mcp_observation
from schemas.reasons import ReasonCode
from schemas.turn_facts import TRUNCATED, record

# Claude Desktop: timestamp, then `[level] [server]` or `[server] [level]`, then the direction and the
# message; newer versions append ` { metadata: undefined }` after the JSON.
DESKTOP_LINE = re.compile(
    rb"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) \[(?P<a>[^\]]*)\] \[(?P<b>[^\]]*)\] "
    rb"Message from (?P<who>client|server): ?(?P<body>.*)$"
)
_LEVELS = {b"info", b"debug", b"warn", b"warning", b"error", b"notice"}
# Claude Desktop cuts long messages in the middle: `...[14696 chars truncated]...`.
DESKTOP_CUT = re.compile(r"\.\.\.\[(\d+) chars truncated\]\.\.\.")
_RESPONSE_ID = re.compile(r'^\{"jsonrpc":"2\.0","id":(-?\d+|"[^"]*"),"(result|error)":')


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


def looks_like_desktop_log(head: bytes) -> bool:
    """Whether a file's first bytes are a Claude Desktop MCP log (a message line among its first lines)."""
    return any(DESKTOP_LINE.match(line.rstrip(b"\r")) for line in head.split(b"\n")[:200])


def _desktop_message(line: bytes) -> dict[str, Any] | None:
    """A Claude Desktop message line as {"message", "_logged_at", "_server"} (and `_cut`, the
    characters the log left out of a long message), or None for any other line. A response the log
    cut so that it is no longer JSON keeps its id, so its call still gets a turn."""
    m = DESKTOP_LINE.match(line.rstrip(b"\r\n"))
    if m is None:
        return None
    if m["a"].lower() in _LEVELS:
        server = m["b"]
    elif m["b"].lower() in _LEVELS:
        server = m["a"]
    else:
        return None
    body = m["body"].strip().decode("utf-8", "replace")
    entry: dict[str, Any] = {"_logged_at": m["ts"].decode(), "_server": server.decode("utf-8", "replace")}
    cut = DESKTOP_CUT.search(body)
    if cut is not None:
        entry["_cut"] = {"bytes_total": len(body.encode()) + int(cut[1]), "bytes_kept": len(body.encode())}
    try:
        # raw_decode: the JSON ends where the message ends; ` { metadata: undefined }` may follow
        obj, _ = json.JSONDecoder().raw_decode(body)
    except (ValueError, RecursionError):
        salvaged = _RESPONSE_ID.match(body) if cut is not None else None
        if salvaged is None:
            return None
        obj = {"jsonrpc": "2.0", "id": json.loads(salvaged[1]), salvaged[2]: None}
    if not isinstance(obj, dict):
        return None
    entry["message"] = obj
    return entry


def read_messages(path: str, limit: int) -> list[Any]:
    """The messages of a log file, in order (Claude Desktop lines carry their timestamp as `_logged_at`).
    Lines that are no message (server output, start-up notes, torn lines) are skipped."""
    messages: list[Any] = []
    total = 0
    with open_binary(path) as fh:
        for line in fh:
            total += len(line)
            if total > limit:
                raise StageFailure(ReasonCode.TOO_LARGE, f"log exceeds {limit} bytes")
            stripped = line.strip()
            if not stripped:
                continue
            if stripped[:1] == b"{":
                try:
                    messages.append(json.loads(stripped))
                except (ValueError, RecursionError):
                    pass  # a torn or foreign line in a log is skipped, the session still counts
                continue
            found = _desktop_message(stripped)
            if found is not None:
                messages.append(found)
    return messages


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        a = datetime.fromisoformat(start.replace("Z", "+00:00"))
        b = datetime.fromisoformat(end.replace("Z", "+00:00"))
    except ValueError:
        return None
    return round(max((b - a).total_seconds(), 0.0), 6)


def parse(messages: list[Any]) -> ParsedRecord:
    # Claude Desktop's mcp.log holds every server's traffic: ids, sessions and tool lists are per server.
    tools: dict[str, dict[str, dict[str, Any]]] = {}
    pending: dict[str, RawTurn] = {}
    list_ids: dict[str, bool] = {}  # tools/list request -> whether it asked for a further page
    turns: list[RawTurn] = []
    servers: list[str] = []
    for raw in messages:
        msg = unwrap(raw)
        if msg is None:
            continue
        extra = raw if isinstance(raw, dict) and raw is not msg else {}
        logged_at = extra.get("_logged_at")
        origin = str(extra.get("_server") or "")
        key = json.dumps([origin, msg.get("id")])
        method = msg.get("method")
        if method == "initialize":
            # a new session: its ids start again
            for stale in [k for k in pending if json.loads(k)[0] == origin]:
                del pending[stale]
        if method == "tools/call":
            params = as_dict(msg.get("params"))
            name = str(params.get("name") or "")
            arguments = params.get("arguments")
            # The call as the client sent it, keys in their order: the text the MCP collector records.
            action = (
                json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
                if isinstance(arguments, dict)
                else tool_call_json(name, arguments)
            )
            t = turn(
                action,
                "tool_call",
                "",
                tool_name=name,
                observation_format="json",
            )
            if logged_at:
                t["started_at"] = logged_at
            turns.append(t)
            pending[key] = t
        elif method == "tools/list":
            list_ids[key] = bool(as_dict(msg.get("params")).get("cursor"))
        elif method is None and ("result" in msg or "error" in msg):
            result = msg.get("result")
            if key in list_ids and isinstance(result, dict) and isinstance(result.get("tools"), list):
                listed = _tools_of(result)
                tools[origin] = {**tools.get(origin, {}), **listed} if list_ids.pop(key) else listed
                continue
            if isinstance(result, dict) and isinstance(result.get("serverInfo"), dict):
                server_name = as_str(result["serverInfo"].get("name"))
                if server_name and server_name not in servers:
                    servers.append(server_name)
            target = pending.pop(key, None)
            if target is None:
                continue
            duration = _seconds_between(target.get("started_at"), logged_at)
            if duration is not None:
                target["duration_s"] = duration
            if isinstance(extra.get("_cut"), dict):
                # The log left part of this reply out: it is not what the server sent.
                record(target.setdefault("metadata", {}), TRUNCATED, {**extra["_cut"], "by": "log"})
            if "error" in msg:
                target["observation"] = (
                    "" if msg["error"] is None else mcp_observation.render_error(msg["error"])
                )
                target["is_error"] = True
            elif isinstance(result, dict):
                text, is_error, structured = mcp_observation.render_result(result)
                target["observation"] = text
                target["is_error"] = is_error
                if structured is not None:
                    target.setdefault("metadata", {})[mcp_observation.STRUCTURED_CONTENT] = structured
    declared: dict[str, dict[str, Any]] = {}
    for listed in tools.values():
        declared.update(listed)
    metadata: dict[str, Any] = {}
    if servers:
        metadata["server"] = servers[0] if len(servers) == 1 else servers
    return {
        "format": Format.MCP_JSONRPC,
        "domain": "mcp",
        "task": "",
        "system_prompt": None,
        "tools": list(declared.values()),
        "agent": None,
        "model": None,
        "status": "complete",
        "turns": turns,
        "metadata": metadata,
    }


def _tools_of(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for tool in result.get("tools") or []:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            schema = tool.get("inputSchema")
            out[tool["name"]] = {
                "name": tool["name"],
                "description": as_str(tool.get("description")),
                "parameters": schema if isinstance(schema, dict) else None,
            }
    return out
