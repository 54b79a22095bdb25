"""SWE-agent `.traj` files: before 1.0 (`history` without message types, demonstrations flagged
`is_demo`), 1.x (`message_type` on every history entry, `replay_config`), and files that hold only
`history` (function-calling demonstrations written by SWE-agent, `trajectories/demonstrations/*.traj`).

The task is the first user message that is not a demonstration; the system prompt (which defines the
special commands) is kept, its command docs (or the config's `command_docs`) become the action space,
and in-context demonstrations become the trajectory's demonstrations part.
"""

from __future__ import annotations

import re
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import as_dict, as_list, as_str, lenient_literal, require, turn
from curation_agents.model import ParsedRecord, RawTurn

_COMMAND_HEADER = re.compile(r"^(?P<name>[A-Za-z_][\w-]*):\n(?=  (?:docstring|signature):)", re.MULTILINE)
_ARGUMENT = re.compile(
    r"^    - (?P<name>[\w-]+) \((?P<type>[^)]*)\) \[(?P<need>required|optional)\](?:: (?P<doc>.*))?$"
)
_EXIT_STATUS_TRUNCATED = ("exit_cost", "exit_context", "exit_format", "exit_api", "exit_error", "early_exit")
_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object"}
_BASH_TOOL = {
    "name": "bash",
    "description": "any other shell command, run in the agent's bash session",
    "parameters": {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "the command line"}},
        "required": ["command"],
    },
}


def looks_like(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    if isinstance(obj.get("trajectory"), list) and (
        "history" in obj or "info" in obj or "replay_config" in obj
    ):
        return True
    return "trajectory" not in obj and is_history(obj.get("history"))


def is_history(value: Any) -> bool:
    """A SWE-agent model history: messages with a role and SWE-agent's `agent` / `message_type` keys."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(e, dict) and "role" in e and ("agent" in e or "message_type" in e) for e in value[:5]
        )
        and any(isinstance(e, dict) and e.get("role") == "assistant" for e in value)
    )


def parse_command_docs(text: str) -> list[dict[str, Any]]:
    """Tool specs from SWE-agent's command docs (the `COMMANDS:` part of its system prompt, or the
    config's `tools.command_docs`): name, docstring and signature, arguments as a JSON Schema."""
    tools: list[dict[str, Any]] = []
    headers = list(_COMMAND_HEADER.finditer(text))
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        doc, signature, in_signature, in_arguments = "", "", False, False
        properties: dict[str, Any] = {}
        required: list[str] = []
        for line in text[header.end() : end].split("\n"):
            if line.startswith("  docstring: "):
                doc, in_signature, in_arguments = line[len("  docstring: ") :], False, False
            elif line.startswith("  signature: "):
                signature, in_signature, in_arguments = line[len("  signature: ") :], True, False
            elif line == "  arguments:":
                in_signature, in_arguments = False, True
            elif in_arguments and (m := _ARGUMENT.match(line)):
                kind = m.group("type").strip()
                spec: dict[str, Any] = {"type": kind if kind in _JSON_TYPES else "string"}
                if m.group("doc"):
                    spec["description"] = m.group("doc")
                properties[m.group("name")] = spec
                if m.group("need") == "required":
                    required.append(m.group("name"))
            elif in_signature and line.strip() and not line.startswith("  "):
                signature += "\n" + line  # multi-line signatures (edit's replacement text)
            else:
                break  # the block ends: blank line, prose after the last command
        description = "\n".join(p for p in (doc, f"signature: {signature}" if signature else "") if p)
        tools.append(
            {
                "name": header.group("name"),
                "description": description or None,
                "parameters": {"type": "object", "properties": properties, "required": required},
            }
        )
    return tools


def _is_demo(entry: Any) -> bool:
    return isinstance(entry, dict) and (
        bool(entry.get("is_demo")) or entry.get("message_type") == "demonstration"
    )


def _call_name(entry: dict[str, Any]) -> str | None:
    calls = lenient_literal(entry.get("tool_calls")) if entry.get("tool_calls") else None
    if isinstance(calls, list) and calls and isinstance(calls[0], dict):
        fn = calls[0].get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        return name if isinstance(name, str) else None
    return None


def _reasoning(entry: dict[str, Any]) -> str:
    """Hidden reasoning of a history action (Anthropic thinking blocks), empty when there is none."""
    blocks = lenient_literal(entry.get("thinking_blocks")) if entry.get("thinking_blocks") else None
    texts = [b.get("thinking") for b in as_list(blocks) if isinstance(b, dict)]
    return "\n\n".join(t for t in texts if isinstance(t, str) and t)


def _demonstrations(history: list[Any]) -> str | None:
    """The in-context demonstrations, as the model saw them: one message per demonstration, or a
    demonstration put into the history step by step (joined as SWE-agent joins them)."""
    parts: list[str] = []
    steps: list[str] = []
    for entry in history:
        if not _is_demo(entry):
            if steps:
                parts.append("\n".join(steps))
                steps = []
            continue
        text = as_str(entry.get("content")) or ""
        if entry.get("message_type") == "demonstration":
            parts.append(text)
        else:
            steps.append(text)
    if steps:
        parts.append("\n".join(steps))
    return "\n\n".join(p for p in parts if p) or None


def _history_turns(history: list[dict[str, Any]], declared: set[str]) -> list[RawTurn]:
    """Turns from the history alone: each action, observed by the messages that follow it."""
    turns: list[RawTurn] = []
    for entry in history:
        if entry.get("role") == "assistant":
            action = as_str(entry.get("action"))
            if action is None:
                action = as_str(entry.get("content")) or ""
            name = _call_name(entry) or _tool_for(action, declared)
            meta: dict[str, Any] = {"thought": as_str(entry.get("thought")) or ""}
            if reasoning := _reasoning(entry):
                meta["reasoning"] = reasoning
            turns.append(
                turn(action, "command" if action.strip() else "empty", "", tool_name=name, metadata=meta)
            )
        elif entry.get("role") in ("user", "tool") and turns:
            text = as_str(entry.get("content")) or ""
            last = turns[-1]
            last["observation"] = f"{last['observation']}\n{text}" if last["observation"] else text
    return turns


def _tool_for(action: str, declared: set[str]) -> str | None:
    first_word = action.strip().split(maxsplit=1)[0] if action.strip() else ""
    return first_word if first_word in declared else ("bash" if action.strip() else None)


def parse(obj: dict[str, Any]) -> ParsedRecord:
    history = [e for e in as_list(obj.get("history")) if isinstance(e, dict)]
    config = obj.get("replay_config")
    if isinstance(config, str):
        config = lenient_literal(config)
    config = as_dict(config)
    agent_cfg = as_dict(config.get("agent"))
    tools_cfg = as_dict(agent_cfg.get("tools"))
    model_cfg = as_dict(agent_cfg.get("model"))

    system = next((as_str(e.get("content")) for e in history if e.get("role") == "system"), None)
    live = [e for e in history if e.get("role") != "system" and not _is_demo(e)]
    task = next((as_str(e.get("content")) or "" for e in live if e.get("role") == "user"), "")
    demonstrations = _demonstrations(history)
    tools = parse_command_docs(as_str(tools_cfg.get("command_docs")) or system or "")
    declared = {t["name"] for t in tools}

    if isinstance(obj.get("trajectory"), list):
        # The history entries of the steps (1.x marks them `action`; older files only by role).
        actions = [
            e for e in live if e.get("role") == "assistant" and e.get("message_type", "action") == "action"
        ]
        turns = []
        for i, step in enumerate(obj["trajectory"]):
            require(isinstance(step, dict), f"trajectory[{i}] is not an object")
            entry = actions[i] if i < len(actions) else {}
            action = as_str(step.get("action")) or ""
            duration = step.get("execution_time")
            meta: dict[str, Any] = {"thought": as_str(step.get("thought")) or ""}
            if reasoning := _reasoning(entry):
                meta["reasoning"] = reasoning
            turns.append(
                turn(
                    action,
                    "command" if action.strip() else "empty",
                    as_str(step.get("observation")) or "",
                    tool_name=_call_name(entry) or _tool_for(action, declared),
                    duration_s=float(duration) if isinstance(duration, int | float) else None,
                    metadata=meta,
                )
            )
        source = (
            "query" if any(isinstance(s, dict) and "query" in s for s in obj["trajectory"]) else "messages"
        )
    else:
        turns = _history_turns(live, declared)
        source = "history"
    # Plain shell commands are part of every SWE-agent interface; a function-calling history names
    # its tools only in its calls (their definitions went to the API, not into the file).
    for name in dict.fromkeys(t.get("tool_name") for t in turns):
        if name and name not in declared:
            tools.append(
                dict(_BASH_TOOL)
                if name == "bash"
                else {"name": name, "description": None, "parameters": None}
            )
            declared.add(name)
    info = as_dict(obj.get("info"))
    exit_status = as_str(info.get("exit_status")) or ""
    truncated = exit_status.startswith(_EXIT_STATUS_TRUNCATED)
    metadata: dict[str, Any] = {"exit_status": exit_status, "format_version": source}
    if demonstrations:
        metadata["demonstrations"] = demonstrations
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
        "metadata": metadata,
    }
