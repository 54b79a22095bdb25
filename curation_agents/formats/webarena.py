"""WebArena trajectories: states with accessibility-tree text alternate with the actions taken."""

from __future__ import annotations

from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import as_dict, as_str, lenient_literal, turn
from curation_agents.model import ParsedRecord, RawTurn


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and "intent" in obj and isinstance(obj.get("trajectory"), list)


def _action_text(action: Any) -> str:
    if not isinstance(action, dict):
        return str(action or "")
    name = str(action.get("action_name") or action.get("action_type") or "")
    raw = as_str(action.get("raw_prediction"))
    fields = {
        k: v
        for k, v in action.items()
        if k in ("element_id", "text", "url", "key_comb", "direction", "answer")
        and v not in ("", [], None, 0)
    }
    if raw:
        return raw
    args = ", ".join(f"{k}={v!r}" for k, v in sorted(fields.items()))
    return f"{name}({args})"


def parse(obj: dict[str, Any]) -> ParsedRecord:
    states = [s for s in obj["trajectory"] if isinstance(s, dict) and "axtree" in s]
    initial = states[0] if states else {}
    turns: list[RawTurn] = []
    last_state: dict[str, Any] | None = initial or None
    for entry in obj["trajectory"]:
        if not isinstance(entry, dict) or "axtree" in entry:
            if isinstance(entry, dict) and turns and not turns[-1]["observation"]:
                turns[-1]["observation"] = as_str(entry.get("axtree")) or ""
                turns[-1]["metadata"]["url"] = as_str(entry.get("url")) or ""
                turns[-1]["metadata"]["state_changed"] = entry.get("axtree") != (last_state or {}).get(
                    "axtree"
                )
                last_state = entry
            continue
        meta = entry.get("metadata")
        meta = lenient_literal(meta) if isinstance(meta, str) else meta
        meta = as_dict(meta)
        action = (
            lenient_literal(meta.get("action")) if isinstance(meta.get("action"), str) else meta.get("action")
        )
        text = _action_text(action if action is not None else entry.get("action"))
        name = (
            str(action.get("action_name")) if isinstance(action, dict) and action.get("action_name") else None
        )
        turns.append(
            turn(
                text,
                "gui",
                "",
                tool_name=name,
                observation_format="axtree",
                metadata={"thought": as_str(meta.get("cot")) or ""},
            )
        )
    return {
        "format": Format.WEBARENA,
        "domain": "web",
        "task": as_str(obj.get("intent")) or "",
        "system_prompt": None,
        "tools": [],
        "agent": "webarena",
        "model": as_str(obj.get("source")),
        "status": "complete",
        "turns": turns,
        "metadata": {
            "task_id": str(obj.get("task_id")),
            "initial_url": as_str(initial.get("url")) or "",
            "initial_state": as_str(initial.get("axtree")) or "",
        },
    }
