"""OpenHands (V0) event streams: agent actions paired with their observations through `cause`."""

from __future__ import annotations

import json
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import (
    as_dict,
    as_int,
    as_str,
    content_text,
    tool_call_json,
    turn,
)
from curation_agents.model import ParsedRecord, RawTurn

_NARRATION = frozenset(
    {"message", "finish", "think", "recall", "system", "condensation", "change_agent_state"}
)


def looks_like(obj: Any) -> bool:
    return (
        isinstance(obj, list)
        and bool(obj)
        and all(
            isinstance(e, dict) and "source" in e and ("action" in e or "observation" in e) for e in obj[:5]
        )
    )


def _action_text(event: dict[str, Any]) -> tuple[str, str, str | None]:
    action = str(event.get("action"))
    args = as_dict(event.get("args"))
    meta = as_dict(event.get("tool_call_metadata"))
    fn = as_str(meta.get("function_name"))
    if action == "run":
        return as_str(args.get("command")) or "", "command", fn or "execute_bash"
    if action in _NARRATION:
        return as_str(args.get("content")) or as_str(args.get("thought")) or "", "empty", None
    arguments = _tool_arguments(meta) or {
        k: v for k, v in args.items() if k not in ("thought", "impl_source")
    }
    name = fn or action
    return tool_call_json(name, arguments), "tool_call", name


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


def parse(events: list[Any]) -> ParsedRecord:
    task = ""
    turns: list[RawTurn] = []
    by_event_id: dict[int, RawTurn] = {}
    model = None
    for event in events:
        if not isinstance(event, dict):
            continue
        if "action" in event:
            if event.get("source") == "user":
                if not task:
                    args = as_dict(event.get("args"))
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
            args = as_dict(event.get("args"))
            if kind != "empty" and as_str(args.get("thought")):
                t["metadata"]["thought"] = args["thought"]
            turns.append(t)
            eid = as_int(event.get("id"))
            if eid is not None:
                by_event_id[eid] = t
            meta = as_dict(event.get("tool_call_metadata"))
            resp = as_dict(meta.get("model_response"))
            model = model or as_str(resp.get("model"))
        elif "observation" in event:
            cause = as_int(event.get("cause"))
            target = by_event_id.get(cause) if cause is not None else None
            if target is None:
                continue
            target["observation"] = content_text(event.get("content"))
            extras = as_dict(event.get("extras"))
            meta = as_dict(extras.get("metadata"))
            code = as_int(meta.get("exit_code"))
            if code is not None and code >= 0:
                target["exit_code"] = code
            if event.get("observation") == "error" or code not in (None, 0, -1):
                target["is_error"] = True
    return {
        "format": Format.OPENHANDS,
        "domain": "swe",
        "task": task,
        "system_prompt": None,
        "tools": [],
        "agent": "openhands",
        "model": model,
        "status": "complete",
        "turns": turns,
        "metadata": {},
    }
