"""ATIF (Harbor's Agent Trajectory Interchange Format): steps with tool calls and their results."""

from __future__ import annotations

from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import as_dict, as_list, as_str, content_text, tool_call_json, turn
from curation_agents.model import ParsedRecord, RawTurn


def looks_like(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("steps"), list)
        and ("schema_version" in obj or "session_id" in obj)
        and str(obj.get("schema_version", "ATIF")).upper().startswith("ATIF")
    )


def parse(obj: dict[str, Any]) -> ParsedRecord:
    agent = as_dict(obj.get("agent"))
    task = ""
    system = None
    turns: list[RawTurn] = []
    for step in obj["steps"]:
        if not isinstance(step, dict):
            continue
        source = step.get("source")
        message = content_text(step.get("message"))
        if source == "system" and system is None:
            system = message
            continue
        if source == "user":
            if not task and not turns:
                task = message
            continue
        calls = as_list(step.get("tool_calls"))
        observation = as_dict(step.get("observation"))
        results = as_list(observation.get("results"))
        by_call = {r.get("source_call_id"): r for r in results if isinstance(r, dict)}
        if not calls:
            turns.append(turn(message, "empty", "", started_at=as_str(step.get("timestamp"))))
            continue
        for index, call in enumerate(calls):
            if not isinstance(call, dict):
                continue
            name = str(call.get("function_name") or "")
            result = by_call.get(call.get("tool_call_id"))
            if result is None and len(results) == len(calls):
                result = results[index]
            text = content_text(result.get("content")) if isinstance(result, dict) else ""
            turns.append(
                turn(
                    tool_call_json(name, call.get("arguments")),
                    "tool_call",
                    text,
                    tool_name=name,
                    started_at=as_str(step.get("timestamp")),
                    metadata={"thought": message} if message and index == 0 else {},
                )
            )
    tools = as_list(obj.get("tools"))
    return {
        "format": Format.ATIF,
        "domain": None,
        "task": task,
        "system_prompt": system,
        "tools": [
            {
                "name": t["name"],
                "description": as_str(t.get("description")),
                "parameters": t.get("parameters") if isinstance(t.get("parameters"), dict) else None,
            }
            for t in tools
            if isinstance(t, dict) and isinstance(t.get("name"), str)
        ],
        "agent": as_str(agent.get("name")),
        "model": as_str(agent.get("model_name")),
        "status": "complete",
        "turns": turns,
        "metadata": {
            "session_id": str(obj.get("session_id") or ""),
            "schema_version": str(obj.get("schema_version")),
        },
    }
