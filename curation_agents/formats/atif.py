"""ATIF (Harbor's Agent Trajectory Interchange Format, v1.0 to v1.7): steps with tool calls and results.

Tools come from `agent.tool_definitions` (or a top-level `tools`), the model's `reasoning_content`
goes to the turn's `reasoning` metadata, and a step of Terminus-style keystroke calls
(`{"keystrokes", "duration"}`: one batch the terminal answers once) is one keystrokes turn.

Identity follows ATIF-v1.7: `trajectory_id` names this document, `session_id` the run (shared by a
parent and its sub-agents, optional since v1.7). Sub-agent trajectories embedded in
`subagent_trajectories` are records of their own (`split`), linked back by `parent_trajectory_id`;
the results that delegated to them keep their references. Every `extra` object is kept in metadata
(`atif_extra`, `atif_agent_extra`, a turn's `atif_step_extra`, `atif_tool_call_extra`,
`atif_result_extra`), except the `worldline` object that `worldline export atif` writes, which gives
back the fields ATIF has no place for (the action kind, observation format, exit code, domain, status).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.chat import tool_specs
from curation_agents.formats.common import as_dict, as_list, as_str, content_text, tool_call_json, turn
from curation_agents.model import ParsedRecord, RawTurn, StageFailure
from schemas.reasons import ReasonCode

TERMINUS_TOOL = "bash_command"
"""The tool Terminus-2 names its keystroke batches by when it writes them as tool calls."""
EXTENSION = "worldline"
"""The key of worldline's own object inside ATIF `extra` (root and step), written by the exporter."""
SUBAGENT_OF = "atif_subagent_of"
"""A sub-agent record's payload: `{SUBAGENT_OF: {parent ids}, "trajectory": <the embedded ATIF>}`."""
ARGUMENT_KEYS = {"command": "command", "code": "code", "gui": "action"}
"""The one argument a non-tool-call action travels in (the exporter's tool call for that kind)."""


_KEPT = ("id", "source", "metadata", "action_space_description", "schema_version")
"""What of the exporter's root object the trajectory keeps under `metadata.worldline` (the rest goes
back to the trajectory's own fields)."""


def looks_like(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("steps"), list)
        and ("schema_version" in obj or "session_id" in obj or "trajectory_id" in obj)
        and str(obj.get("schema_version", "ATIF")).upper().startswith("ATIF")
    )


def split(doc: dict[str, Any], locator: str) -> Iterator[tuple[str, Any]]:
    """(locator, payload) for an ATIF document and, depth first, every sub-agent embedded in it."""
    yield locator, doc
    yield from subagents(doc, locator)


def subagents(doc: dict[str, Any], locator: str) -> Iterator[tuple[str, Any]]:
    """(locator, payload) for every sub-agent trajectory embedded in DOC, depth first."""
    for index, sub in enumerate(as_list(doc.get("subagent_trajectories"))):
        if not isinstance(sub, dict):
            continue
        where = f"{locator}/subagent-{index}"
        parent = {
            "trajectory_id": as_str(doc.get("trajectory_id")),
            "session_id": as_str(doc.get("session_id")),
            "agent": as_str(as_dict(doc.get("agent")).get("name")),
            "locator": locator,
        }
        yield where, {SUBAGENT_OF: parent, "trajectory": sub}
        yield from subagents(sub, where)


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


def _terminus_batch(message: str) -> tuple[str, dict[str, Any]] | None:
    """(keystrokes JSON, metadata) of a Terminus reply written as the step's message instead of as
    tool calls (`{"analysis", "plan", "commands": [{"keystrokes", "duration"}], "task_complete"}`)."""
    if not message.lstrip().startswith("{"):
        return None
    try:
        reply = json.loads(message)
    except (ValueError, RecursionError):
        return None
    commands = reply.get("commands") if isinstance(reply, dict) else None
    if not isinstance(commands, list) or not commands:
        return None
    keys = _keystrokes([{"arguments": c} for c in commands])
    if keys is None:
        return None
    said = "\n".join(
        f"{label}: {reply[key]}"
        for key, label in (("analysis", "Analysis"), ("plan", "Plan"))
        if reply.get(key)
    )
    meta: dict[str, Any] = {"thought": said} if said else {}
    if isinstance(reply.get("task_complete"), bool):
        meta["task_complete"] = reply["task_complete"]
    return json.dumps(keys, ensure_ascii=False), meta


def _step_notes(step: dict[str, Any]) -> dict[str, Any]:
    """A step's ATIF fields besides its action and observation, as turn metadata."""
    notes: dict[str, Any] = {}
    reasoning = as_str(step.get("reasoning_content")) or ""
    if reasoning:
        notes["reasoning"] = reasoning
    for key, name in (
        ("model_name", "model_name"),
        ("reasoning_effort", "reasoning_effort"),
        ("llm_call_count", "llm_call_count"),
        ("is_copied_context", "is_copied_context"),
        ("metrics", "atif_metrics"),
    ):
        if step.get(key) is not None:
            notes[name] = step[key]
    extra = {k: v for k, v in as_dict(step.get("extra")).items() if k != EXTENSION}
    if extra:
        notes["atif_step_extra"] = extra
    return notes


def _result_notes(result: Any) -> dict[str, Any]:
    result = as_dict(result)
    notes: dict[str, Any] = {}
    if result.get("extra"):
        notes["atif_result_extra"] = result["extra"]
    refs = [r for r in as_list(result.get("subagent_trajectory_ref")) if isinstance(r, dict)]
    if refs:
        notes["subagent_trajectory_ref"] = refs
    return notes


def _restore(raw: RawTurn, own: dict[str, Any], calls: list[dict[str, Any]]) -> RawTurn:
    """Give a turn back what `worldline export atif` kept in the step's `extra.worldline`."""
    kind = own.get("action_kind")
    key = ARGUMENT_KEYS.get(str(kind))
    args = as_dict(calls[0].get("arguments")) if len(calls) == 1 else {}
    if key is not None and set(args) == {key} and isinstance(args[key], str):
        raw["action"] = args[key]
    if isinstance(own.get("action_text"), str):
        raw["action"] = own["action_text"]
    if isinstance(kind, str):
        raw["action_kind"] = kind
    if "tool_name" in own:
        raw["tool_name"] = as_str(own["tool_name"])
    if isinstance(own.get("observation_format"), str):
        raw["observation_format"] = own["observation_format"]
    raw["is_error"] = own.get("is_error")
    raw["exit_code"] = own.get("exit_code")
    raw["duration_s"] = own.get("duration_s")
    meta = dict(raw.get("metadata") or {})
    meta.update(as_dict(own.get("metadata")))
    if own.get("state_changed") is not None:
        meta["state_changed"] = own["state_changed"]
    raw["metadata"] = meta
    return raw


def step_turns(step: dict[str, Any]) -> list[RawTurn]:
    """The turns of one agent step: one per tool call, one keystrokes batch, or one message."""
    message = content_text(step.get("message"))
    calls = [c for c in as_list(step.get("tool_calls")) if isinstance(c, dict)]
    results = [r for r in as_list(as_dict(step.get("observation")).get("results")) if isinstance(r, dict)]
    by_call = {r.get("source_call_id"): r for r in results}
    notes = _step_notes(step)
    own = as_dict(as_dict(step.get("extra")).get(EXTENSION))
    started = as_str(step.get("timestamp"))
    everything = "\n".join(content_text(r.get("content")) for r in results)
    extras = [r["extra"] for r in results if r.get("extra")]
    refs = [x for r in results for x in as_list(r.get("subagent_trajectory_ref")) if isinstance(x, dict)]
    result_notes: dict[str, Any] = {
        **({"atif_result_extra": extras} if extras else {}),
        **({"subagent_trajectory_ref": refs} if refs else {}),
    }
    thought = {"thought": message} if message else {}
    if not calls:
        batch = None if own else _terminus_batch(message)
        if batch is not None:
            text, said = batch
            return [
                turn(
                    text,
                    "keystrokes",
                    everything,
                    tool_name=TERMINUS_TOOL,
                    started_at=started,
                    metadata={**said, **notes, **result_notes},
                )
            ]
        raw = turn(message, "empty", everything, started_at=started, metadata={**notes, **result_notes})
        return [_restore(raw, own, calls) if own else raw]
    keys = _keystrokes(calls)
    if keys is not None:
        extras = [c["extra"] for c in calls if c.get("extra")]
        raw = turn(
            json.dumps(keys, ensure_ascii=False),
            "keystrokes",
            everything,
            tool_name=str(calls[0].get("function_name") or ""),
            started_at=started,
            metadata={
                **thought,
                **notes,
                **result_notes,
                **({"atif_tool_call_extra": extras} if extras else {}),
            },
        )
        return [_restore(raw, own, calls) if own else raw]
    turns = []
    for index, call in enumerate(calls):
        name = str(call.get("function_name") or "")
        result = by_call.get(call.get("tool_call_id"))
        if result is None and len(results) == len(calls):
            result = results[index]
        text = content_text(result.get("content")) if isinstance(result, dict) else ""
        meta: dict[str, Any] = {**thought, **notes} if index == 0 else {}
        if call.get("extra"):
            meta["atif_tool_call_extra"] = call["extra"]
        meta.update(_result_notes(result))
        raw = turn(
            tool_call_json(name, call.get("arguments")),
            "tool_call",
            text,
            tool_name=name,
            started_at=started,
            metadata=meta,
        )
        turns.append(_restore(raw, own, calls) if own else raw)
    return turns


def parse(obj: dict[str, Any]) -> ParsedRecord:
    """One ATIF trajectory (or an embedded sub-agent's, wrapped by `split`) as a parsed record."""
    parent = as_dict(obj.get(SUBAGENT_OF))
    if parent:
        obj = as_dict(obj.get("trajectory"))
    if not isinstance(obj.get("steps"), list):
        raise StageFailure(ReasonCode.PARSE_ERROR, "an ATIF trajectory without a steps array")
    agent = as_dict(obj.get("agent"))
    task = ""
    system = None
    later_users: list[str] = []
    notes: list[str] = []
    refs: list[dict[str, Any]] = []
    copied = 0
    turns: list[RawTurn] = []
    for step in obj["steps"]:
        if not isinstance(step, dict):
            continue
        source = step.get("source")
        message = content_text(step.get("message"))
        if source in ("system", "user"):
            # A harness step may hand work to sub-agents (Terminus's context summarization does).
            results = as_list(as_dict(step.get("observation")).get("results"))
            refs += [x for r in results for x in as_list(as_dict(r).get("subagent_trajectory_ref"))]
        if source == "system":
            if system is None and not turns:
                system = message
            else:
                notes.append(message)  # later system steps are harness notes
            continue
        if source == "user":
            if not task and not turns:
                task = message
            else:
                later_users.append(message)
            continue
        if step.get("is_copied_context") is True:
            # Copied from the trajectory this one continues (ATIF-v1.5): its turns are there already.
            copied += 1
            continue
        turns.extend(step_turns(step))
    own = as_dict(as_dict(obj.get("extra")).get(EXTENSION))
    source = as_dict(own.get("source"))
    extra = {k: v for k, v in as_dict(obj.get("extra")).items() if k != EXTENSION}
    tools = as_list(obj.get("tools")) or as_list(agent.get("tool_definitions"))
    subagents = [as_str(as_dict(s).get("trajectory_id")) for s in as_list(obj.get("subagent_trajectories"))]
    return {
        "format": Format.ATIF,
        "domain": as_str(own.get("domain")),
        "task": task,
        "system_prompt": system,
        "tools": tool_specs(tools),
        "agent": as_str(source.get("agent")) if "agent" in source else as_str(agent.get("name")),
        "model": as_str(source.get("model")) if "model" in source else as_str(agent.get("model_name")),
        "collected_at": as_str(own.get("collected_at")),
        "status": as_str(own.get("status")) or "complete",
        "status_reason": as_str(own.get("status_reason")),
        "turns": turns,
        "metadata": {
            "trajectory_id": as_str(obj.get("trajectory_id")),
            "session_id": as_str(obj.get("session_id")),
            "schema_version": as_str(obj.get("schema_version")),
            "agent_version": as_str(agent.get("version")),
            "notes": as_str(obj.get("notes")),
            "continued_trajectory_ref": as_str(obj.get("continued_trajectory_ref")),
            "final_metrics": as_dict(obj.get("final_metrics")) or None,
            "atif_agent_extra": as_dict(agent.get("extra")) or None,
            "atif_extra": extra or None,
            "subagent_trajectory_ids": [s for s in subagents if s] or None,
            "parent_trajectory_id": parent.get("trajectory_id"),
            "parent_session_id": parent.get("session_id"),
            "parent_agent": parent.get("agent"),
            "parent_locator": parent.get("locator"),
            "later_user_messages": json.dumps(later_users, ensure_ascii=False) if later_users else None,
            "later_system_messages": json.dumps(notes, ensure_ascii=False) if notes else None,
            "subagent_trajectory_ref": [r for r in refs if isinstance(r, dict)] or None,
            "copied_context_steps": copied or None,
            "initial_state": as_str(own.get("initial_state")),
            "demonstrations": as_str(own.get("demonstrations")),
            "simulation_instruction": as_str(own.get("simulation_instruction")),
            EXTENSION: {k: own[k] for k in _KEPT if k in own} or None,
        },
    }
