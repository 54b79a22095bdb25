"""AgentWorldBench JSONL samples: one line per (trajectory, turn) with the full history up to it."""

from __future__ import annotations

import json
import re
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import as_int, as_list, as_str, content_text, turn
from curation_agents.model import ParsedRecord, Reason, StageFailure

_ACTION = re.compile(r"\*\*Action:\*\*\s*(.*)", re.DOTALL)
_OBSERVATION = re.compile(r"^\s*\*\*Environment Observation:\*\*\s*", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```\s*$", re.DOTALL)
_DOMAIN_WORDS = ("mcp", "search", "terminal", "swe", "android", "web", "os")

KEYS = frozenset({"system_str", "prompt", "response", "turn_idx"})


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and KEYS <= obj.keys()


def _action_text(prompt: str) -> str:
    m = _ACTION.search(prompt)
    text = m.group(1).strip() if m else prompt.strip()
    fence = _FENCE.match(text)
    return fence.group(1).strip() if fence else text


def parse(obj: dict[str, Any]) -> ParsedRecord:
    prompts = as_list(obj.get("prompt"))
    responses = as_list(obj.get("response"))
    turn_idx = as_int(obj.get("turn_idx")) or len(prompts)
    total = as_int(obj.get("total_turns")) or turn_idx
    if turn_idx < total:
        # Every earlier turn's sample is a prefix of the last one, which carries the whole trajectory.
        raise StageFailure(
            Reason.SUPERSEDED_PREFIX, f"turn {turn_idx} of {total}: the turn-{total} sample holds it"
        )
    task_field = str(obj.get("task") or "").lower()
    domain = next((d for d in _DOMAIN_WORDS if task_field == d or task_field.startswith(d + "_")), None)
    action_kind = {"terminal": "keystrokes", "web": "gui", "android": "gui", "os": "code"}.get(
        domain or "", "tool_call"
    )
    turns = []
    for index, prompt in enumerate(prompts):
        action = _action_text(content_text(prompt))
        observation = content_text(responses[index]) if index < len(responses) else ""
        observation = _OBSERVATION.sub("", observation, count=1)
        tool_name = None
        if action_kind == "tool_call":
            try:
                call = json.loads(action)
            except (ValueError, RecursionError):
                call = None
            if isinstance(call, dict):
                tool_name = as_str(call.get("name")) or as_str(call.get("tool"))
        turns.append(turn(action, action_kind, observation, tool_name=tool_name))
    return {
        "format": Format.AGENTWORLDBENCH,
        "domain": domain,
        "task": as_str(obj.get("current_prompt")) or "",
        "system_prompt": as_str(obj.get("system_str")),
        "tools": [],
        "agent": None,
        "model": None,
        "status": "complete",
        "turns": turns,
        "metadata": {"agentworldbench_id": str(obj.get("id")), "agentworldbench_task": str(obj.get("task"))},
    }
