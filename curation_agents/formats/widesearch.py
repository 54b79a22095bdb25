"""WideSearch response files: `<model>_<instance_id>_<trial>_response.jsonl`, one line per run, written
by WideSearch's `WideSearchResponseLoader.dump_response` (scripts/run_infer_and_eval_batching.py).

A line is `{"instance_id", "response", "messages", "trial_idx"}`. `messages` comes from
`extrac_messages_from_memory`: `{"role": "user", "content": TEXT}` for the query (and the runner's
stop notes), and `{"role": "assistant", "content": ActionStep}` for each step, an ActionStep being
`{"step_status", "content", "reasoning_content", "signature", "tool_calls": [{"tool_name",
"arguments", "tool_call_id"}], "tool_call_results": [{"tool_call_id", "content", "error_marker",
"system_error_marker", "extra"}], "error_marker"}`. The tools are `search_global` (queries and their
results) and `text_browser_view` (a page's extracted text).
"""

from __future__ import annotations

import json
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import as_dict, as_list, as_str, tool_call_json, turn
from curation_agents.model import ParsedRecord, RawTurn, StageFailure
from schemas.reasons import ReasonCode

KEYS = frozenset({"instance_id", "response", "messages"})
BENCHMARK = "WideSearch"
_STEP_KEYS = frozenset({"step_status", "tool_calls", "tool_call_results"})


def looks_like(obj: Any) -> bool:
    """Whether a decoded line is one WideSearch response row."""
    if not (isinstance(obj, dict) and KEYS <= obj.keys() and isinstance(obj.get("messages"), list)):
        return False
    steps = [
        m.get("content") for m in obj["messages"] if isinstance(m, dict) and m.get("role") == "assistant"
    ]
    return any(isinstance(s, dict) and _STEP_KEYS <= s.keys() for s in steps)


def _result_text(result: dict[str, Any]) -> tuple[str, bool]:
    """A tool call result's text and whether it is an error (ToolCallResult.get_content_or_error)."""
    content = result.get("content")
    if isinstance(content, str):
        return content, False
    if isinstance(content, dict | list):  # forks that keep the search API's JSON answer
        return json.dumps(content, ensure_ascii=False), False
    for key in ("error_marker", "system_error_marker"):
        message = as_dict(result.get(key)).get("message")
        if isinstance(message, str):
            return message, True
    return "", True


def _step_turns(step: dict[str, Any], index: int) -> list[RawTurn]:
    """One ActionStep: a turn per tool call with its result, or the final answer as a message."""
    thought = as_str(step.get("content")) or ""
    reasoning = as_str(step.get("reasoning_content")) or ""
    results = {
        as_str(r.get("tool_call_id")): r
        for r in as_list(step.get("tool_call_results"))
        if isinstance(r, dict)
    }
    calls = [c for c in as_list(step.get("tool_calls")) if isinstance(c, dict)]
    out: list[RawTurn] = []
    for position, call in enumerate(calls):
        name = as_str(call.get("tool_name"))
        if not name:
            raise StageFailure(ReasonCode.PARSE_ERROR, f"step {index}: a tool call without tool_name")
        result = results.get(as_str(call.get("tool_call_id")))
        if result is None:
            raise StageFailure(
                ReasonCode.PARSE_ERROR, f"step {index}: no result for tool call {call.get('tool_call_id')!r}"
            )
        text, is_error = _result_text(result)
        meta: dict[str, Any] = {"step": index, "tool_call_id": as_str(call.get("tool_call_id")) or ""}
        if position == 0:
            meta.update(thought=thought, reasoning=reasoning)
        out.append(
            turn(
                tool_call_json(name, call.get("arguments")),
                "tool_call",
                text,
                tool_name=name,
                is_error=is_error,
                metadata=meta,
            )
        )
    if not calls and step.get("step_status") == "FINISHED":
        out.append(turn(thought, "message", "", metadata={"step": index, "reasoning": reasoning}))
    return out


def parse(obj: dict[str, Any]) -> ParsedRecord:
    """One response row as a trajectory of the search domain."""
    messages = [m for m in obj["messages"] if isinstance(m, dict)]
    users = [as_str(m.get("content")) or "" for m in messages if m.get("role") == "user"]
    steps = [as_dict(m.get("content")) for m in messages if m.get("role") == "assistant"]
    turns: list[RawTurn] = []
    errors: list[str] = []
    for index, step in enumerate(steps, 1):
        marker = as_dict(step.get("error_marker")).get("message")
        if isinstance(marker, str):
            errors.append(marker)
            continue
        turns.extend(_step_turns(step, index))
    if not turns:
        raise StageFailure(ReasonCode.NO_TURNS, "no tool calls and no final answer")
    last = steps[-1] if steps else {}
    reason: str | None
    status, reason = "truncated", "the run ended without a FINISHED step"
    if last.get("step_status") == "FINISHED":
        status, reason = "complete", None
    elif errors:
        status, reason = "policy_error", errors[-1][:500]
    return {
        "format": Format.WIDESEARCH,
        "domain": "search",
        "task": users[0] if users else "",
        "system_prompt": None,
        "tools": [],
        "agent": None,
        "model": None,
        "status": status,
        "status_reason": reason,
        "turns": turns,
        "metadata": {
            "benchmark": BENCHMARK,
            "task_id": str(obj.get("instance_id")),
            "trial_idx": obj.get("trial_idx") if isinstance(obj.get("trial_idx"), int) else None,
            "runner_notes": json.dumps(users[1:], ensure_ascii=False) if len(users) > 1 else None,
            "step_errors": len(errors),
        },
    }
