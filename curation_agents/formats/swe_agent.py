"""SWE-agent `.traj` files, before 1.1 (model input in `messages`) and after (`query`)."""

from __future__ import annotations

import re
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import as_dict, as_list, as_str, lenient_literal, require, turn
from curation_agents.model import ParsedRecord

_COMMAND_DOC = re.compile(r"^(?P<name>[A-Za-z_][\w-]*):\n(?:  docstring: (?P<doc>[^\n]*))?", re.MULTILINE)
_EXIT_STATUS_TRUNCATED = ("exit_cost", "exit_context", "exit_format", "exit_api", "exit_error", "early_exit")


def looks_like(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("trajectory"), list)
        and ("history" in obj or "info" in obj or "replay_config" in obj)
    )


def parse(obj: dict[str, Any]) -> ParsedRecord:
    steps = obj["trajectory"]
    history = as_list(obj.get("history"))
    config = obj.get("replay_config")
    if isinstance(config, str):
        config = lenient_literal(config)
    config = as_dict(config)
    agent_cfg = as_dict(config.get("agent"))
    tools_cfg = as_dict(agent_cfg.get("tools"))
    model_cfg = as_dict(agent_cfg.get("model"))

    tools = [
        {"name": m.group("name"), "description": m.group("doc"), "parameters": None}
        for m in _COMMAND_DOC.finditer(as_str(tools_cfg.get("command_docs")) or "")
    ]
    # Tool names per step come from the function-calling history when it is there.
    call_names: list[str | None] = []
    for entry in history:
        if isinstance(entry, dict) and entry.get("message_type") == "action":
            calls = lenient_literal(entry.get("tool_calls")) if entry.get("tool_calls") else None
            name = None
            if isinstance(calls, list) and calls and isinstance(calls[0], dict):
                fn = calls[0].get("function")
                name = fn.get("name") if isinstance(fn, dict) else None
            call_names.append(name if isinstance(name, str) else None)

    task, system = "", None
    for entry in history:
        if not isinstance(entry, dict):
            continue
        if entry.get("message_type") == "system_prompt" and system is None:
            system = as_str(entry.get("content"))
        elif entry.get("role") == "user" and not task:
            task = as_str(entry.get("content")) or ""
            break
    declared = {t["name"] for t in tools}
    turns = []
    for i, step in enumerate(steps):
        require(isinstance(step, dict), f"trajectory[{i}] is not an object")
        action = as_str(step.get("action")) or ""
        observation = as_str(step.get("observation")) or ""
        first_word = action.strip().split(maxsplit=1)[0] if action.strip() else ""
        name = call_names[i] if i < len(call_names) and call_names[i] else None
        if name is None:
            name = first_word if first_word in declared else ("bash" if action.strip() else None)
        duration = step.get("execution_time")
        turns.append(
            turn(
                action,
                "command" if action.strip() else "empty",
                observation,
                tool_name=name,
                duration_s=float(duration) if isinstance(duration, int | float) else None,
                metadata={"thought": as_str(step.get("thought")) or ""},
            )
        )
    info = as_dict(obj.get("info"))
    exit_status = as_str(info.get("exit_status")) or ""
    truncated = exit_status.startswith(_EXIT_STATUS_TRUNCATED)
    return {
        "format": Format.SWE_AGENT,
        "domain": "swe",
        "task": task,
        "system_prompt": system,
        "tools": tools,
        "agent": "swe-agent",
        "model": as_str(model_cfg.get("name")),
        "status": "truncated" if truncated else "complete",
        "status_reason": exit_status if truncated else None,
        "turns": turns,
        "metadata": {
            "exit_status": exit_status,
            "format_version": "query"
            if any(isinstance(s, dict) and "query" in s for s in steps)
            else "messages",
        },
    }
