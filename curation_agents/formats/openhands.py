"""OpenHands (V0) event streams, and the rows of OpenHands' `output.jsonl` (evaluation and resolver
output: `instance_id` / `issue`, `instruction`, `history`, `metadata`, `error`, ...).

Actions pair with their observations through `cause`; histories without event ids (older resolver
output, where each event is one flat object) pair each action with the observation that follows it.
"""

from __future__ import annotations

import json
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.chat import tool_specs
from curation_agents.formats.common import (
    as_dict,
    as_int,
    as_list,
    as_str,
    content_text,
    tool_call_json,
    turn,
)
from curation_agents.model import ParsedRecord, RawTurn

_NARRATION = frozenset(
    {"message", "finish", "think", "recall", "system", "condensation", "change_agent_state"}
)
# Keys of a flat (args-inlined) action that describe the event rather than the call.
_EVENT_KEYS = frozenset(
    {"action", "thought", "is_confirmed", "action_risk", "security_risk", "confirmation_state", "impl_source"}
)
_ROW_KEYS = ("instance_id", "instruction", "issue", "test_result", "git_patch")
_TRUNCATED_ERRORS = ("maximum iteration", "budget")


def _is_event(e: Any) -> bool:
    return isinstance(e, dict) and ("action" in e or "observation" in e)


def looks_like(obj: Any) -> bool:
    """An event stream (a list of events with a source), or one row of `output.jsonl`."""
    if isinstance(obj, list):
        return bool(obj) and all(_is_event(e) and "source" in e for e in obj[:5])
    if not isinstance(obj, dict) or not any(k in obj for k in _ROW_KEYS):
        return False
    history = _flat_history(obj.get("history"))
    return bool(history) and all(_is_event(e) for e in history[:5])


def _flat_history(value: Any) -> list[Any]:
    """A row's history as one event list (the oldest output stores [action, observation] pairs)."""
    events: list[Any] = []
    for entry in value if isinstance(value, list) else []:
        if isinstance(entry, list):
            events.extend(e for e in entry if isinstance(e, dict))
        else:
            events.append(entry)
    return events


def _args(event: dict[str, Any]) -> dict[str, Any]:
    """An action's arguments: `args`, or the event itself in flat events."""
    args = event.get("args")
    if isinstance(args, dict):
        return args
    return {k: v for k, v in event.items() if k not in _EVENT_KEYS}


def _action_text(event: dict[str, Any]) -> tuple[str, str, str | None]:
    action = str(event.get("action"))
    args = _args(event)
    meta = as_dict(event.get("tool_call_metadata"))
    fn = as_str(meta.get("function_name"))
    if action == "run":
        return as_str(args.get("command")) or "", "command", fn or "execute_bash"
    if action in _NARRATION and not (action == "think" and fn == "think"):
        # A `think` the model called as a tool is answered ("Your thought has been logged."): a turn.
        text = as_str(args.get("content")) or as_str(args.get("thought")) or as_str(event.get("thought"))
        return text or "", "empty", None
    keep = ("thought",) if action == "think" else ()
    arguments = _tool_arguments(meta) or {
        k: v for k, v in args.items() if k not in ("thought", "impl_source") or k in keep
    }
    name = fn or action
    return tool_call_json(name, arguments), "tool_call", name


def _reasoning(event: dict[str, Any]) -> str:
    """The model's hidden reasoning behind an action (`reasoning_content` of its model response)."""
    response = as_dict(as_dict(event.get("tool_call_metadata")).get("model_response"))
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        value = as_dict(choices[0].get("message")).get("reasoning_content")
        return value if isinstance(value, str) else ""
    return ""


def _tool_arguments(meta: dict[str, Any]) -> dict[str, Any] | None:
    response = meta.get("model_response")
    choices = response.get("choices") if isinstance(response, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = as_dict(choices[0].get("message"))
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict) and call.get("id") == meta.get("tool_call_id"):
            fn = as_dict(call.get("function"))
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except (ValueError, RecursionError, TypeError):
                return None
            return args if isinstance(args, dict) else None
    return None


def parse(obj: list[Any] | dict[str, Any]) -> ParsedRecord:
    if isinstance(obj, dict):
        return _parse_row(obj)
    return _parse_events(obj)


def _parse_row(row: dict[str, Any]) -> ParsedRecord:
    """One `output.jsonl` row: its history, with the row's instruction, model, outcome and ids."""
    parsed = _parse_events(_flat_history(row.get("history")))
    if not parsed["task"]:
        issue = as_dict(row.get("issue"))
        parsed["task"] = as_str(row.get("instruction")) or as_str(issue.get("body")) or ""
    meta = as_dict(row.get("metadata"))
    parsed["model"] = parsed.get("model") or as_str(as_dict(meta.get("llm_config")).get("model"))
    parsed["agent"] = as_str(meta.get("agent_class")) or "openhands"
    issue = as_dict(row.get("issue"))
    extra: dict[str, Any] = {
        "instance_id": as_str(row.get("instance_id")),
        "issue": f"{issue.get('owner')}/{issue.get('repo')}#{issue.get('number')}" if issue else None,
        "success": row.get("success") if isinstance(row.get("success"), bool) else None,
    }
    parsed["metadata"].update({k: v for k, v in extra.items() if v is not None})
    error = as_str(row.get("error"))
    if error:
        truncated = any(marker in error.lower() for marker in _TRUNCATED_ERRORS)
        parsed["status"] = "truncated" if truncated else "policy_error"
        parsed["status_reason"] = error[:500]
    return parsed


def _parse_events(events: list[Any]) -> ParsedRecord:
    task = ""
    system = None
    tools: list[dict[str, Any]] = []
    turns: list[RawTurn] = []
    by_event_id: dict[int, RawTurn] = {}
    model = None
    # Events without ids (flat resolver histories): an observation answers the action before it.
    sequential = not any(isinstance(e, dict) and "cause" in e for e in events)
    waiting: RawTurn | None = None
    for event in events:
        if not isinstance(event, dict):
            continue
        if "action" in event:
            source = event.get("source")
            if event.get("action") == "system":
                args = _args(event)
                system = system or as_str(args.get("content"))
                tools = tools or tool_specs(as_list(args.get("tools")))
                continue
            if source == "user" or (
                source is None and not task and not turns and event.get("action") == "message"
            ):
                if not task:
                    args = _args(event)
                    task = as_str(args.get("content")) or as_str(event.get("message")) or ""
                continue
            text, kind, tool = _action_text(event)
            t = turn(
                text,
                kind,
                "",
                tool_name=tool,
                started_at=as_str(event.get("timestamp")),
                metadata={"openhands_action": str(event.get("action"))},
            )
            thought = as_str(_args(event).get("thought")) or as_str(event.get("thought"))
            if kind != "empty" and thought:
                t["metadata"]["thought"] = thought
            reasoning = _reasoning(event)
            if reasoning:
                t["metadata"]["reasoning"] = reasoning
            turns.append(t)
            waiting = t if kind != "empty" else None
            eid = as_int(event.get("id"))
            if eid is not None:
                by_event_id[eid] = t
            meta = as_dict(event.get("tool_call_metadata"))
            resp = as_dict(meta.get("model_response"))
            model = model or as_str(resp.get("model"))
        elif "observation" in event:
            cause = as_int(event.get("cause"))
            target = by_event_id.get(cause) if cause is not None else (waiting if sequential else None)
            if target is None:
                continue
            waiting = None
            target["observation"] = content_text(event.get("content"))
            extras = as_dict(event.get("extras"))
            meta = as_dict(extras.get("metadata"))
            code = as_int(meta.get("exit_code"))
            if code is None:
                code = as_int(event.get("exit_code"))  # flat events
            if code is not None and code >= 0:
                target["exit_code"] = code
            if event.get("observation") == "error" or code not in (None, 0, -1):
                target["is_error"] = True
    return {
        "format": Format.OPENHANDS,
        "domain": "swe",
        "task": task,
        "system_prompt": system,
        "tools": tools,
        "agent": "openhands",
        "model": model,
        "status": "complete",
        "turns": turns,
        "metadata": {},
    }
