"""Stage filter: validate each row into a Trajectory and apply the paper's filters (pipelines.filters).

Reads: the rows of one read split. Writes: the kept (edited) trajectories, one quarantine row per
invalid or dropped record (stage `validation` or `filter`, with its reason code), and counters.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pipelines import filters as flt
from pipelines.benchmarks_exclusion import ExclusionMatcher
from pipelines.config import PoolsConfig
from pipelines.stages.contract import Stage
from pipelines.stages.spill import removed_row
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
    ),
)


HELD_OUT = "held_out_benchmark"
"""Reason code of a trajectory recorded on an excluded benchmark (pipelines.benchmarks_exclusion)."""


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
