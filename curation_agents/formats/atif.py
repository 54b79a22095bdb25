"""ATIF (Harbor's Agent Trajectory Interchange Format): steps with tool calls and their results.

Tools come from `agent.tool_definitions` (or a top-level `tools`), the model's `reasoning_content`
goes to the turn's `reasoning` metadata, and a step of Terminus-style keystroke calls
(`{"keystrokes", "duration"}`: one batch the terminal answers once) is one keystrokes turn.
"""

from __future__ import annotations

import json
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.chat import tool_specs
from curation_agents.formats.common import as_dict, as_list, as_str, content_text, tool_call_json, turn
from curation_agents.model import ParsedRecord, RawTurn


def looks_like(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("steps"), list)
        and ("schema_version" in obj or "session_id" in obj)
        and str(obj.get("schema_version", "ATIF")).upper().startswith("ATIF")
    )


def _keystrokes(calls: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The calls as Terminus keystrokes (`[{"keystrokes", "duration"}]`) when every call is one."""
    keys = []
    for call in calls:
        args = call.get("arguments")
        if not isinstance(args, dict) or not isinstance(args.get("keystrokes"), str):
            return None
        if set(args) - {"keystrokes", "duration"}:
            return None
        duration = args.get("duration")
        keys.append(
            {
                "keystrokes": args["keystrokes"],
                "duration": duration if isinstance(duration, int | float) else 1.0,
            }
        )
    return keys


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
        if source == "system":
            system = message if system is None else system  # later system steps are harness notes
            continue
        if source == "user":
            if not task and not turns:
                task = message
            continue
        calls = [c for c in as_list(step.get("tool_calls")) if isinstance(c, dict)]
        observation = as_dict(step.get("observation"))
        results = as_list(observation.get("results"))
        by_call = {r.get("source_call_id"): r for r in results if isinstance(r, dict)}
        reasoning = as_str(step.get("reasoning_content")) or ""
        notes: dict[str, Any] = {"reasoning": reasoning} if reasoning else {}
        everything = "\n".join(content_text(r.get("content")) for r in results if isinstance(r, dict))
        if not calls:
            turns.append(
                turn(message, "empty", everything, started_at=as_str(step.get("timestamp")), metadata=notes)
            )
            continue
        keys = _keystrokes(calls)
        if keys is not None:
            turns.append(
                turn(
                    json.dumps(keys, ensure_ascii=False),
                    "keystrokes",
                    everything,
                    tool_name=str(calls[0].get("function_name") or ""),
                    started_at=as_str(step.get("timestamp")),
                    metadata={**({"thought": message} if message else {}), **notes},
                )
            )
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
                    metadata={**({"thought": message} if message else {}), **notes} if index == 0 else {},
                )
            )
    tools = as_list(obj.get("tools")) or as_list(agent.get("tool_definitions"))
    return {
        "format": Format.ATIF,
        "domain": None,
        "task": task,
        "system_prompt": system,
        "tools": tool_specs(tools),
        "agent": as_str(agent.get("name")),
        "model": as_str(agent.get("model_name")),
        "status": "complete",
        "turns": turns,
        "metadata": {
            "session_id": str(obj.get("session_id") or ""),
            "schema_version": str(obj.get("schema_version")),
        },
    }
