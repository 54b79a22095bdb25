"""Stage filter: validate each row into a Trajectory and apply the paper's filters (pipelines.filters).

Reads: the rows of one read split. Writes: the kept (edited) trajectories, one quarantine row per
invalid or dropped record (stage `validation` or `filter`, with its reason code), and counters.
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pipelines import filters as flt
from pipelines import fs
from pipelines.benchmarks_exclusion import ExclusionMatcher
from pipelines.config import PoolsConfig
from pipelines.stages.contract import Stage
from pipelines.stages.spill import removed_row
from schemas.grounding import GroundingError, Verdict, grounding_file, read_verdicts
from schemas.reasons import ReasonCode
from schemas.trajectory import Trajectory

STAGE = Stage(
    name="filter",
    reads=("trajectory rows",),
    writes=("kept Trajectory", "removed rows (validation, filter)"),
    counters=(
        "turns_in",
        "quarantined.*",
        "dropped.*",
        "turns_removed.*",
        "turns_masked.*",
        "excluded_benchmark.*",
        "grounding.*",
    ),
)


HELD_OUT = ReasonCode.HELD_OUT_BENCHMARK.value
"""Reason code of a trajectory recorded on an excluded benchmark (pipelines.benchmarks_exclusion)."""
UNGROUNDED = ReasonCode.UNGROUNDED.value


def grounding_verdicts(path: str) -> dict[str, Verdict]:
    """The verdicts of the configured grounding table, read once per worker process and file version."""
    stamp: tuple[int, int] = (0, 0)
    if not fs.is_url(path):
        try:
            st = os.stat(grounding_file(path))
        except OSError as exc:
            raise GroundingError(
                f"grounding: {path}: no grounding table ({exc.strerror}); write one with "
                "`worldline replay --ground` or unset grounding in pools.yaml"
            ) from exc
        stamp = (st.st_mtime_ns, st.st_size)
    return _verdicts(path, stamp)


@functools.lru_cache(maxsize=4)
def _verdicts(path: str, stamp: tuple[int, int]) -> dict[str, Verdict]:
    if fs.is_url(path):
        return read_verdicts(path, fs.read_bytes(path))
    return read_verdicts(path)


def ungrounded_detail(verdict: Verdict) -> str:
    turn = "" if verdict.first_disagreeing_turn is None else f" at turn {verdict.first_disagreeing_turn}"
    return (
        f"a real replay disagrees with the recorded observations{turn} ({verdict.cause or 'observation differs'}); "
        "see the grounding setting and `worldline replay --ground`"
    )


@dataclass(slots=True)
class FilteredSplit:
    """What the filters left of one split."""

    kept: list[Trajectory] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    stats: Counter[str] = field(default_factory=Counter)


def filter_rows(table: pa.Table, input_file: str, cfg: PoolsConfig) -> FilteredSplit:
    """Validate and filter every row of `table` (read from `input_file`)."""
    result = FilteredSplit()
    stats = result.stats
    held_out = ExclusionMatcher(cfg.decontamination.exclude_benchmarks)
    verdicts = grounding_verdicts(cfg.grounding) if cfg.grounding else None
    for record in table.to_pylist():
        traj, code, detail = flt.validate_record(record)
        if traj is None:
            assert code is not None
            result.removed.append(removed_row(record.get("id") or "", input_file, "validation", code, detail))
            stats[f"quarantined.{code}"] += 1
            continue
        stats["turns_in"] += len(traj.turns)
        benchmark = held_out.match(traj)
        if benchmark is not None:  # source-level decontamination: the whole trajectory goes
            name, where = benchmark
            detail = f"from held-out benchmark {name} ({where}); see decontamination.exclude_benchmarks"
            result.removed.append(removed_row(traj.id, input_file, "decontamination", HELD_OUT, detail))
            stats[f"dropped.{HELD_OUT}"] += 1
            stats[f"excluded_benchmark.{name}"] += 1
            continue
        if verdicts is not None:
            verdict = verdicts.get(traj.id)
            stats[f"grounding.{verdict.verdict if verdict else 'unlisted'}"] += 1
            if verdict is not None and verdict.verdict == "disagrees":
                detail = ungrounded_detail(verdict)
                result.removed.append(removed_row(traj.id, input_file, "grounding", UNGROUNDED, detail))
                stats[f"dropped.{UNGROUNDED}"] += 1
                continue
        outcome = flt.apply_filters(traj, cfg.filters)
        for reason, n in outcome.removed_turns.items():
            stats[f"turns_removed.{reason}"] += n
        for fact, n in outcome.masked_turns.items():  # harness facts: out of the loss, kept as history
            stats[f"turns_masked.{fact}"] += n
        if outcome.trajectory is None:
            assert outcome.drop_reason is not None
            result.removed.append(
                removed_row(traj.id, input_file, "filter", outcome.drop_reason, outcome.detail)
            )
            stats[f"dropped.{outcome.drop_reason}"] += 1
            continue
        result.kept.append(outcome.trajectory)
    return result
