"""Validation and the trajectory / turn filters of paper 3.1.2, as small functions with reason codes
(`schemas.reasons.ReasonCode`; the GUI failure markers are `schemas.gui_failure`, the retry-cycle rule
`curation_agents.turn_rules.skip_retry_cycles`).

Each trajectory filter returns None (keep) or a reason code (drop); turn filters return the edited
trajectory and how many turns they removed. The Beam job counts every code, so the dataset card can
say how many records each rule removed and counts reconcile (in = kept + dropped + quarantined).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pipelines.config import FilterConfig
from schemas.domains import GUI_DOMAINS, TOOL_DOMAINS
from schemas.gui_failure import error_state_marker
from schemas.reasons import ReasonCode
from schemas.screen_state import stable_screen
from schemas.trajectory import (
    ActionKind,
    Trajectory,
    TrajectoryStatus,
    Turn,
)
from schemas.turn_facts import facts


@dataclass(slots=True)
class FilterOutcome:
    """What the filters did to one record: the kept trajectory or the drop reason, and turn counts."""

    trajectory: Trajectory | None
    drop_reason: str | None = None
    detail: str = ""
    removed_turns: Counter[str] = field(default_factory=Counter)
    masked_turns: Counter[str] = field(default_factory=Counter)  # harness fact -> turns masked


def validate_record(record: dict[str, Any]) -> tuple[Trajectory | None, str | None, str]:
    """Parse one Arrow row into a Trajectory, or say why it cannot be used (quarantine code + detail)."""
    rid = record.get("id") or ""
    if not rid:
        return (
            None,
            ReasonCode.MISSING_ID,
            "field 'id' is empty; give every trajectory a stable id (schemas.stable_id)",
        )
    try:
        traj = Trajectory.from_record(record)
    except (ValueError, KeyError, TypeError) as exc:
        return None, ReasonCode.INVALID_RECORD, f"trajectory {rid}: {exc}"
    return traj, None, ""


def undeclared_tools(traj: Trajectory) -> list[str]:
    """Tools an MCP/SWE trajectory calls that its per-trajectory action space does not declare."""
    declared = traj.action_space.tool_names()
    called: list[str] = []
    for turn in traj.turns:
        if turn.action.kind != ActionKind.TOOL_CALL:
            continue
        name = turn.action.tool_name or _tool_name_from_text(turn.action.text)
        if name and name not in declared:
            called.append(name)
    return sorted(set(called))


def _tool_name_from_text(text: str) -> str | None:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    if isinstance(obj, dict):
        name = obj.get("name") or obj.get("tool") or (obj.get("function") or {}).get("name")
        return str(name) if name else None
    return None


def gui_env_failure(traj: Trajectory, markers: list[str], max_words: int = 150) -> str | None:
    """Why a GUI trajectory counts as hit by an environment failure, or None.

    The collector's own verdict (status env_failure) counts; so does a screen in an error state
    (`error_state_marker`), which public traces need since they rarely carry a status.
    """
    if traj.status == TrajectoryStatus.ENV_FAILURE:
        return f"status env_failure: {traj.status_reason or 'no reason given'}"
    for i, turn in enumerate(traj.turns, start=1):
        marker = error_state_marker(turn.observation.text, markers, max_words)
        if marker:
            return f"turn {i} observation is an error screen ({marker!r})"
    return None


def drop_gui_no_change_turns(traj: Trajectory) -> tuple[Trajectory, int]:
    """Remove GUI turns whose state did not change: the collector's flag, else identical screens.

    A turn is no-change when `state_changed` is False, or when its observation equals the previous
    turn's once volatile content is masked (`stable_screen`: clocks, countdowns, timer nodes, dates,
    relative times, re-created refs, the error line). A True flag wins when the text is byte for byte
    the previous screen (the collector saw state the text does not show, e.g. a form value), but not
    when the texts differ only in volatile content: that difference is a clock, whatever the collector
    that recorded it thought. The first turn is always kept: it has no "before" screen.
    """
    kept: list[Turn] = []
    removed = 0
    previous: tuple[str, str] | None = None  # (raw text, stable screen) of the previous turn
    for turn in traj.turns:
        raw = turn.observation.text
        screen = stable_screen(raw)
        same = previous is not None and screen == previous[1]
        volatile_only = same and previous is not None and raw != previous[0]
        unchanged = turn.state_changed is False or (same and (turn.state_changed is None or volatile_only))
        if unchanged and kept:
            removed += 1
        else:
            kept.append(turn)
        previous = (raw, screen)
    if removed:
        traj.turns = kept
    return traj, removed


def harness_fact_drop(traj: Trajectory, cfg: FilterConfig) -> str | None:
    """Why the trajectory is dropped for a harness fact set to `drop`, or None."""
    for i, turn in enumerate(traj.turns, start=1):
        for fact in facts(turn.metadata):
            if cfg.harness_action(fact) == "drop":
                return f"turn {i} {fact} (filters.harness_facts.{fact}: drop)"
    return None


def drop_harness_fact_turns(traj: Trajectory, cfg: FilterConfig) -> tuple[Trajectory, int]:
    """Remove the turns carrying a harness fact set to `drop_turn`."""
    kept = [t for t in traj.turns if not any(cfg.harness_action(f) == "drop_turn" for f in facts(t.metadata))]
    removed = len(traj.turns) - len(kept)
    if removed:
        traj.turns = kept
    return traj, removed


def masked_turns(traj: Trajectory, cfg: FilterConfig) -> Counter[str]:
    """How many turns each harness fact masks (out of the loss, kept as history)."""
    from pipelines.lossmask import harness_mask

    return Counter(fact for t in traj.turns if (fact := harness_mask(t.metadata, cfg)) is not None)


def apply_filters(traj: Trajectory, cfg: FilterConfig) -> FilterOutcome:
    """All paper filters in the paper's order; turn filters run before the final turn-count check."""
    if len(traj.turns) < cfg.min_turns:
        return FilterOutcome(None, ReasonCode.TOO_FEW_TURNS, f"{len(traj.turns)} turn(s) < {cfg.min_turns}")
    if cfg.drop_undeclared_tools and traj.domain in TOOL_DOMAINS:
        missing = undeclared_tools(traj)
        if missing:
            return FilterOutcome(
                None, ReasonCode.UNDECLARED_TOOL, f"calls undeclared tool(s) {', '.join(missing)}"
            )
    if cfg.drop_gui_env_failures and traj.domain in GUI_DOMAINS:
        why = gui_env_failure(traj, cfg.gui_failure_markers, cfg.gui_failure_max_words)
        if why:
            return FilterOutcome(None, ReasonCode.GUI_ENV_FAILURE, why)
    why = harness_fact_drop(traj, cfg)
    if why:
        return FilterOutcome(None, ReasonCode.HARNESS_FACT, why)
    removed: Counter[str] = Counter()
    traj, n = drop_harness_fact_turns(traj, cfg)
    removed[ReasonCode.HARNESS_FACT_TURNS] += n
    if cfg.strip_empty_actions:
        # The cleaner's own rule: pools apply the same definition when the cleaner did not run.
        from curation_agents.turn_rules import strip_empty_actions

        traj, n = strip_empty_actions(traj)
        removed[ReasonCode.EMPTY_ACTION_TURNS] += n
    if cfg.skip_retry_cycles:
        # The paper's retry-cycle rule in its "retried_only" mode: a rejected pair is skipped only when
        # a retry follows it (the cleaner, which sees raw traces, skips every rejected pair).
        from curation_agents.turn_rules import skip_retry_cycles

        traj, n = skip_retry_cycles(traj, mode="retried_only")
        removed[ReasonCode.RETRY_CYCLE_TURNS] += n
    if cfg.drop_gui_no_change and traj.domain in GUI_DOMAINS:
        traj, n = drop_gui_no_change_turns(traj)
        removed[ReasonCode.GUI_NO_CHANGE_TURNS] += n
    removed = +removed
    if len(traj.turns) < cfg.min_turns:
        return FilterOutcome(
            None,
            ReasonCode.TOO_FEW_TURNS_AFTER_TURN_FILTERS,
            f"{len(traj.turns)} turn(s) left",
            removed_turns=removed,
        )
    masked = masked_turns(traj, cfg)
    if sum(masked.values()) == len(traj.turns):
        return FilterOutcome(
            None,
            ReasonCode.HARNESS_FACT,
            f"every turn is masked for a harness fact ({', '.join(sorted(masked))}): nothing to learn",
            removed_turns=removed,
        )
    if cfg.canonical_actions:
        from pipelines.actions import canonicalise_actions

        canonicalise_actions(traj)
    return FilterOutcome(traj, removed_turns=removed, masked_turns=masked)
