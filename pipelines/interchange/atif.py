"""`worldline export atif`: trajectories as ATIF-v1.7 documents (Harbor's Agent Trajectory
Interchange Format), one per trajectory, that harbor's own pydantic model accepts.

A trajectory becomes: `trajectory_id` (our id), `session_id` (the source's, else our id), `agent`
(agent, model, tool definitions in OpenAI's function form), a `system` step when the source had a
system prompt, a `user` step with the task, and one `agent` step per turn: its thought as the
message, `reasoning_content`, the action as tool calls (a tool call as itself, keystrokes one call per
batch entry, a command, code or GUI action as one call of the kind's name) and the observation as
the call's result. What ATIF has no field for (action kind, observation format, exit code, duration,
the turn's other metadata; the domain, status, provenance and metadata of the trajectory) travels in
the steps' and the root's `extra.worldline`, which the cleaner's ATIF reader gives back, so
ours -> ATIF -> ours keeps every field.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curation_agents.formats import atif
from schemas.agentworldbench import AtomicTextFile
from schemas.atomic import atomic_write_text
from schemas.trajectory import ActionKind, Trajectory, Turn

SCHEMA_VERSION = "ATIF-v1.7"
EXTENSION = atif.EXTENSION
_KEYSTROKES_TOOL = "bash_command"  # what Terminus calls its keystroke tool
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
# The turn metadata an ATIF field carries itself (everything else rides in extra.worldline).
_AS_MESSAGE, _AS_REASONING = "thought", "reasoning"


@dataclass
class AtifExport:
    """What `write_atif` wrote: how many documents, where, and how many steps in all."""

    out: Path
    trajectories: int = 0
    steps: int = 0
    files: list[str] = field(default_factory=list)


def _tool_calls(turn: Turn, call_id: str) -> list[dict[str, Any]]:
    """The action as ATIF tool calls (none for a message or a pause)."""
    action = turn.action
    kind = action.kind
    if kind in (ActionKind.MESSAGE, ActionKind.EMPTY):
        return []
    if kind == ActionKind.KEYSTROKES:
        keys = _json(action.text)
        if isinstance(keys, list) and keys and all(isinstance(k, dict) for k in keys):
            name = action.tool_name or _KEYSTROKES_TOOL
            return [
                {"tool_call_id": f"{call_id}_{i}", "function_name": name, "arguments": k}
                for i, k in enumerate(keys)
            ]
        return [
            {
                "tool_call_id": call_id,
                "function_name": action.tool_name or _KEYSTROKES_TOOL,
                "arguments": {"keystrokes": action.text},
            }
        ]
    if kind == ActionKind.TOOL_CALL:
        call = _json(action.text)
        if isinstance(call, dict) and isinstance(call.get("arguments"), dict):
            name = action.tool_name or (call["name"] if isinstance(call.get("name"), str) else "tool_call")
            return [{"tool_call_id": call_id, "function_name": name, "arguments": call["arguments"]}]
        return [
            {
                "tool_call_id": call_id,
                "function_name": action.tool_name or "tool_call",
                "arguments": {"input": action.text},
            }
        ]
    key = atif.ARGUMENT_KEYS[kind.value]
    return [
        {
            "tool_call_id": call_id,
            "function_name": action.tool_name or kind.value,
            "arguments": {key: action.text},
        }
    ]


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _agent_step(step_id: int, turn: Turn) -> dict[str, Any]:
    call_id = f"call_{step_id}"
    calls = _tool_calls(turn, call_id)
    meta = dict(turn.metadata)
    thought = meta.get(_AS_MESSAGE)
    reasoning = meta.get(_AS_REASONING)
    step: dict[str, Any] = {"step_id": step_id, "source": "agent"}
    if turn.started_at is not None:
        step["timestamp"] = turn.started_at.isoformat()
    if calls:
        step["message"] = thought if isinstance(thought, str) and thought else ""
        if step["message"]:
            meta.pop(_AS_MESSAGE)
        step["tool_calls"] = calls
        step["observation"] = {
            "results": [{"source_call_id": calls[0]["tool_call_id"], "content": turn.observation.text}]
        }
    else:
        step["message"] = turn.action.text
        step["observation"] = {"results": [{"content": turn.observation.text}]}
    if isinstance(reasoning, str) and reasoning:
        step["reasoning_content"] = reasoning
        meta.pop(_AS_REASONING)
    own: dict[str, Any] = {
        "action_kind": turn.action.kind.value,
        "tool_name": turn.action.tool_name,
        "observation_format": turn.observation.format.value,
        "is_error": turn.observation.is_error,
        "exit_code": turn.exit_code,
        "duration_s": turn.duration_s,
        "state_changed": turn.state_changed,
        "metadata": meta,
    }
    step["extra"] = {EXTENSION: own}
    (read,) = atif.step_turns(step)
    if read.get("action") != turn.action.text:
        own["action_text"] = turn.action.text  # the calls do not spell the action exactly
    return step


def trajectory_to_atif(traj: Trajectory) -> dict[str, Any]:
    """One trajectory as an ATIF-v1.7 document (a dict ready for `json.dumps`)."""
    meta = dict(traj.metadata)
    system = meta.get("source_system_prompt")
    session = meta.get("session_id")
    steps: list[dict[str, Any]] = []
    if isinstance(system, str) and system:
        del meta["source_system_prompt"]  # the reader gives a system step back as this key
        steps.append({"step_id": 1, "source": "system", "message": system})
    steps.append({"step_id": len(steps) + 1, "source": "user", "message": traj.task})
    for turn in traj.turns:
        steps.append(_agent_step(len(steps) + 1, turn))
    agent: dict[str, Any] = {
        "name": traj.source.agent or traj.source.name,
        "version": str(meta.get("agent_version") or "unknown"),
    }
    if traj.source.model:
        agent["model_name"] = traj.source.model
    if traj.action_space.tools:
        agent["tool_definitions"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    **({"description": t.description} if t.description is not None else {}),
                    **({"parameters": t.parameters} if t.parameters is not None else {}),
                },
            }
            for t in traj.action_space.tools
        ]
    own = {
        "id": traj.id,
        "domain": traj.domain.value,
        "status": traj.status.value,
        "status_reason": traj.status_reason,
        "initial_state": traj.initial_state,
        "demonstrations": traj.demonstrations,
        "simulation_instruction": traj.simulation_instruction,
        "collected_at": traj.source.collected_at.isoformat() if traj.source.collected_at else None,
        "action_space_description": traj.action_space.description,
        "source": traj.source.to_json(),
        "metadata": meta,
        "schema_version": traj.schema_version,
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": session if isinstance(session, str) and session else traj.id,
        "trajectory_id": traj.id,
        "agent": agent,
        "steps": steps,
        "final_metrics": {"total_steps": len(steps)},
        "extra": {EXTENSION: own},
    }


def file_name(trajectory_id: str) -> str:
    """A file name for a trajectory's document: its id where the id is file-safe, else a safe form of
    it with a hash that keeps distinct ids apart."""
    safe = _UNSAFE.sub("_", trajectory_id)[:120]
    if safe != trajectory_id or safe in ("", ".", ".."):
        safe = f"{safe}-{hashlib.sha256(trajectory_id.encode()).hexdigest()[:12]}"
    return f"{safe}.json"


def write_atif(
    trajectories: Iterable[Trajectory], out: Path, on_written: Callable[[], None] | None = None
) -> AtifExport:
    """Write every trajectory: to OUT as JSONL (one document a line) when it ends in `.jsonl`, else as
    one `<id>.json` file each in the folder OUT. Each file appears whole or not at all."""
    report = AtifExport(out=out)
    lines = AtomicTextFile(out) if out.suffix == ".jsonl" else None
    try:
        for traj in trajectories:
            doc = trajectory_to_atif(traj)
            if lines is not None:
                lines.write_line(json.dumps(doc, ensure_ascii=False))
            else:
                name = file_name(traj.id)
                atomic_write_text(out / name, json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
                report.files.append(name)
            report.trajectories += 1
            report.steps += len(doc["steps"])
            if on_written is not None:
                on_written()
    except BaseException:
        if lines is not None:
            lines.abort()
        raise
    if lines is not None:
        lines.commit()
    return report
