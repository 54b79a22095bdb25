"""Replay span labels as a pools build reads them: which files, the merged table, one turn's labels.

Labels (schemas/span_labels.py) reach a build through the `span_labels:` setting of pools.yaml, or,
when it is unset, the `span_labels.parquet` that `worldline replay` writes beside the input
trajectories. The renderer takes a turn's labels only when they describe its observation and its
replay did not diverge (`turn_labels`); otherwise everything falls back to its patterns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pipelines import fs
from pipelines.config import PoolsConfig
from schemas.span_labels import SPAN_LABELS_NAME, TurnLabels, read_span_labels
from worldline.rewards.spans import labels_cover

LabelTable = Mapping[tuple[str, int], TurnLabels]


def turn_labels(labels: LabelTable | None, trajectory_id: str, turn: int, text: str) -> TurnLabels | None:
    """The labels of a trajectory's TURN (0-based) when they describe TEXT (its observation) and its
    replay did not diverge; None otherwise, and whoever asked falls back to its patterns."""
    found = labels.get((trajectory_id, turn)) if labels else None
    if found is None or found.diverged or not labels_cover(text, found):
        return None
    return found


def span_label_sources(cfg: PoolsConfig, input_dirs: Sequence[str]) -> list[str]:
    """The span-labels files of a build: the configured one, else those beside the local inputs
    (labels are read from local paths)."""
    if cfg.span_labels:
        return [cfg.span_labels]
    found = (fs.join(d, SPAN_LABELS_NAME) for d in input_dirs if not fs.is_url(d))
    return [f for f in found if fs.is_file(f)]


def load_span_labels(sources: Sequence[str]) -> dict[tuple[str, int], TurnLabels] | None:
    """The labels of every source merged (a later source wins a repeated key); None without sources.
    A configured source that cannot be read raises SpanLabelsError."""
    if not sources:
        return None
    table: dict[tuple[str, int], TurnLabels] = {}
    for source in sources:
        table.update(read_span_labels(Path(source)))
    return table
