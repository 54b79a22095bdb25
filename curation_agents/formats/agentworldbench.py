"""AgentWorldBench JSONL samples: one line per (trajectory, turn) with the full history up to it.

A sample is read exactly as `worldline import agentworldbench` reads it (validation, domain, action
prompts, observations, system-prompt parts, action kinds); this module only adds the cleaner's
per-line rule: the last turn's line carries the trajectory, earlier lines are superseded prefixes.
"""

from __future__ import annotations

from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import turn
from curation_agents.model import ParsedRecord, StageFailure
from schemas.agentworldbench import AgentWorldBenchSample, SampleFieldError, domain_of, sample_to_trajectory
from schemas.reasons import ReasonCode

KEYS = frozenset({"system_str", "prompt", "response", "turn_idx"})


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and KEYS <= obj.keys()


def parse(obj: dict[str, Any]) -> ParsedRecord:
    try:
        sample = AgentWorldBenchSample.from_json(obj)
        domain = domain_of(sample)
    except SampleFieldError as exc:
        raise StageFailure(ReasonCode.PARSE_ERROR, f"field {exc.field!r} ({exc.reason}): {exc}") from exc
    if sample.turn_idx < sample.total_turns:
        # Every earlier turn's sample is a prefix of the last one, which carries the whole trajectory.
        raise StageFailure(
            ReasonCode.SUPERSEDED_PREFIX,
            f"turn {sample.turn_idx} of {sample.total_turns}: the turn-{sample.total_turns} sample holds it",
        )
    traj = sample_to_trajectory(sample, domain=domain)
    # Turn metadata (current state, verbatim source text) is left out: denoise does not redact it.
    turns = [
        turn(
            t.action.text,
            t.action.kind.value,
            t.observation.text,
            tool_name=t.action.tool_name,
            observation_format=t.observation.format.value,
            is_error=t.observation.is_error,
        )
        for t in traj.turns
    ]
    # Demonstrations and the simulation instruction stay inside `system_prompt`, which denoise
    # redacts; ParsedRecord has no fields of their own for them.
    return {
        "format": Format.AGENTWORLDBENCH,
        "domain": traj.domain.value,
        "task": traj.task,
        "system_prompt": sample.system_str,
        "tools": [tool.to_json() for tool in traj.action_space.tools],
        "agent": None,
        "model": None,
        "status": traj.status.value,
        "turns": turns,
        "metadata": {
            "agentworldbench_id": str(sample.id),
            "agentworldbench_task": sample.task,
            "initial_state": traj.initial_state,
        },
    }
