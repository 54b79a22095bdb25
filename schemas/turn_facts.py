"""Harness facts about a turn: what worldline knows about a step that the environment did not show.

An observation holds only what the environment showed. Facts the harness adds (the command hit the
time limit and was interrupted, the output was cut at the cap, the action was outside the task's
action space) live in the turn's metadata under one key, so pools can filter or mask such turns and
no model learns to predict text the screen never showed.

    turn.metadata["harness"] = {
        "timed_out": {"after_s": 30.0},
        "truncated": {"bytes_total": 1048576, "bytes_kept": 65536},
        "out_of_action_space": {"tool": "delete_repo"},
    }

Facts about the observation a trajectory starts from (the screen at reset) are recorded the same way
in the trajectory's metadata, under INITIAL (`initial_observation_harness`, beside
`initial_observation`): a trajectory's `harness` names the harness a recording came from.
"""

from __future__ import annotations

from typing import Any

HARNESS = "harness"
INITIAL = "initial_observation_harness"

TIMED_OUT = "timed_out"  # {"after_s": float}: the step hit its time limit and was interrupted
TRUNCATED = "truncated"  # {"bytes_total": int, "bytes_kept": int}: the observation was cut at the cap
OUT_OF_ACTION_SPACE = "out_of_action_space"  # {"tool": str}: the action named no tool the task offers
NO_PROMPT = "no_prompt"  # {"after_s": float}: the shell did not return to a prompt after an interrupt
ENDED = "ended"  # {"reason": str}: the environment ended during this step (shell exited, server died)
OUTPUT_FLOOD = "output_flood"  # {"limit_bytes": int}: output passed the flood limit; interrupted with Ctrl-C
# {"max_nodes": int, "nodes_shown": int}: a GUI screen's tree was cut after the first max_nodes nodes
# the collector reads; the observation lists nodes_shown of them (layout-only ones fold) and none after
NODES_TRUNCATED = "nodes_truncated"

FACTS = (TIMED_OUT, TRUNCATED, OUT_OF_ACTION_SPACE, NO_PROMPT, ENDED, OUTPUT_FLOOD, NODES_TRUNCATED)


def record(
    metadata: dict[str, Any], fact: str, detail: dict[str, Any] | None = None, key: str = HARNESS
) -> None:
    """Record `fact` (one of FACTS) with its detail in a turn's metadata (`key` INITIAL: in a
    trajectory's, about its initial observation)."""
    if fact not in FACTS:
        raise ValueError(f"unknown harness fact {fact!r}; known: {', '.join(FACTS)}")
    metadata.setdefault(key, {})[fact] = dict(detail or {})


def facts(metadata: dict[str, Any], key: str = HARNESS) -> dict[str, dict[str, Any]]:
    """The harness facts recorded in a turn's metadata, or under `key` (empty when there are none)."""
    value = metadata.get(key)
    return value if isinstance(value, dict) else {}


def has(metadata: dict[str, Any], fact: str) -> bool:
    """Whether a turn's metadata records `fact`."""
    return fact in facts(metadata)
