"""`worldline export adp`: trajectories as Agent Data Protocol (ADP) standardised records, one JSON
object a line.

The task is a user `text_observation`, each turn an action (`code_action` for commands and code,
`message_action` for messages, `api_action` otherwise) linked by `tool_call_id` to the observation
after it (`web_observation` with an axtree or HTML for those formats, else `text_observation`).
What ADP has no field for (domain, status, model, action kinds, observation formats, exit codes,
times, metadata) travels in `details.worldline`, which `worldline clean` reads back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.agentworldbench import AtomicTextFile
from schemas.trajectory import ActionKind, ObservationFormat, Trajectory, Turn

SCHEMA_VERSION = "1.5.0"
"""The ADP standardised schema version the records declare (schema/version.py upstream)."""
EXTENSION = "worldline"


@dataclass
class AdpExport:
    out: Path
    trajectories: int = 0
    items: int = 0


def _action(turn: Turn, call_id: str | None) -> dict[str, Any]:
    action = turn.action
    base: dict[str, Any] = {}
    if call_id is not None:
        base["tool_call_id"] = call_id
    for key, field in (("reasoning", "reasoning_content"), ("reward", "reward")):
        value = turn.metadata.get(key)
        if isinstance(value, str if key == "reasoning" else (int, float)) and not isinstance(value, bool):
            base[field] = value
    thought = turn.metadata.get("thought")
    description = thought if isinstance(thought, str) else None
    if action.kind == ActionKind.MESSAGE:
        base.pop("tool_call_id", None)
        return {**base, "class_": "message_action", "content": action.text, "description": description}
    if action.kind in (ActionKind.COMMAND, ActionKind.CODE):
        language = turn.metadata.get("language")
        if not isinstance(language, str):
            language = "bash" if action.kind == ActionKind.COMMAND else "python"
        return {
            **base,
            "class_": "code_action",
            "language": language,
            "content": action.text,
            "description": description,
        }
    try:
        call = json.loads(action.text)
    except json.JSONDecodeError:
        call = None
    if isinstance(call, dict) and isinstance(call.get("arguments"), dict):
        function, kwargs = str(call.get("name") or action.tool_name or "call"), call["arguments"]
    else:
        function, kwargs = action.tool_name or action.kind.value, {"action": action.text}
    return {
        **base,
        "class_": "api_action",
        "function": function,
        "kwargs": kwargs,
        "description": description,
    }


def _observation(turn: Turn, call_id: str | None) -> dict[str, Any]:
    obs = turn.observation
    base: dict[str, Any] = {} if call_id is None else {"tool_call_id": call_id}
    if obs.format in (ObservationFormat.AXTREE, ObservationFormat.HTML):
        is_tree = obs.format == ObservationFormat.AXTREE
        url = turn.metadata.get("observation_url")
        return {
            **base,
            "class_": "web_observation",
            "html": None if is_tree else obs.text,
            "axtree": obs.text if is_tree else None,
            "url": url if isinstance(url, str) else None,
            "image_observation": None,
            "viewport_size": None,
        }
    return {**base, "class_": "text_observation", "content": obs.text, "name": None, "source": "environment"}


def trajectory_to_adp(traj: Trajectory) -> dict[str, Any]:
    """One trajectory as an ADP standardised record."""
    content: list[dict[str, Any]] = [
        {"class_": "text_observation", "content": traj.task, "name": None, "source": "user"}
    ]
    turns: list[dict[str, Any]] = []
    for index, turn in enumerate(traj.turns, 1):
        call_id = None if turn.action.kind == ActionKind.MESSAGE else f"call_{index:06d}"
        content.append(_action(turn, call_id))
        if call_id is not None or turn.observation.text:
            content.append(_observation(turn, call_id))
        turns.append(
            {
                "action_kind": turn.action.kind.value,
                "observation_format": turn.observation.format.value,
                "exit_code": turn.exit_code,
                "is_error": turn.observation.is_error,
                "started_at": None if turn.started_at is None else turn.started_at.isoformat(),
                "duration_s": turn.duration_s,
            }
        )
    languages = sorted({i["language"] for i in content if i["class_"] == "code_action"})
    record: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "id": traj.id, "content": content}
    if languages:
        record["available_code_languages"] = languages
    record["details"] = {
        EXTENSION: {
            "domain": traj.domain.value,
            "status": traj.status.value,
            "status_reason": traj.status_reason,
            "model": traj.source.model,
            "agent": traj.source.agent,
            "task": traj.task,
            "turns": turns,
            "metadata": traj.metadata,
        }
    }
    return record


def write_adp(
    trajectories: Iterable[Trajectory], out: Path, on_written: Callable[[], None] | None = None
) -> AdpExport:
    """Write every trajectory to OUT as ADP JSONL; the file appears whole or not at all."""
    report = AdpExport(out=out)
    lines = AtomicTextFile(out)
    try:
        for traj in trajectories:
            record = trajectory_to_adp(traj)
            lines.write_line(json.dumps(record, ensure_ascii=False, default=str))
            report.trajectories += 1
            report.items += len(record["content"])
            if on_written is not None:
                on_written()
    except BaseException:
        lines.abort()
        raise
    lines.commit()
    return report
