"""Replay span labels in a pools build: where they come from and how deterministic each pool is.

Labels (schemas/span_labels.py) reach a build one of two ways: the `span_labels:` setting of
pools.yaml (a span-labels file, or a folder holding `span_labels.parquet`), or, when it is unset,
the `span_labels.parquet` that `worldline replay` writes beside the input trajectories (one per
input folder that has one; all are merged). No file found: no labels, and everything that uses them
falls back to its patterns.

`deterministic_shares` gives, per pool and domain, the share of the labelled observation characters
of the pool's trajectories that replay identically; `pools verify` and the cards report it, or
"no labels".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipelines import fs
from pipelines.config import ALL_POOLS, EVAL_POOL, PoolsConfig
from pipelines.span_table import LabelTable, load_span_labels, span_label_sources
from schemas.span_labels import SpanLabel, TurnLabels

NO_LABELS = "no labels"


@dataclass
class ShareCount:
    """Labelled turns and characters of one pool and domain, and how many replayed identically."""

    trajectories: int = 0
    labelled_turns: int = 0
    chars: int = 0
    deterministic_chars: int = 0

    @property
    def share(self) -> float | None:
        """Deterministic characters over labelled characters (None: nothing labelled)."""
        return self.deterministic_chars / self.chars if self.chars else None

    def to_json(self) -> dict[str, Any]:
        share = self.share
        return {
            "trajectories": self.trajectories,
            "labelled_turns": self.labelled_turns,
            "chars": self.chars,
            "deterministic_chars": self.deterministic_chars,
            "deterministic_share": None if share is None else round(share, 6),
        }


def _by_trajectory(labels: LabelTable) -> dict[str, list[TurnLabels]]:
    grouped: dict[str, list[TurnLabels]] = defaultdict(list)
    for (tid, _turn), row in labels.items():
        grouped[tid].append(row)
    return grouped


def deterministic_shares(
    members: Iterable[tuple[str, str, str]], labels: LabelTable | None
) -> dict[str, dict[str, ShareCount]] | None:
    """Per pool, per domain: the labelled characters of the pool's trajectories and their
    deterministic share. MEMBERS are (pool, domain, trajectory id), repeats allowed (an SFT pool has
    a row per turn); each trajectory counts once per pool. None without labels."""
    if labels is None:
        return None
    grouped = _by_trajectory(labels)
    seen: set[tuple[str, str]] = set()
    out: dict[str, dict[str, ShareCount]] = defaultdict(dict)
    for pool, domain, tid in members:
        if (pool, tid) in seen:
            continue
        seen.add((pool, tid))
        count = out[pool].setdefault(domain, ShareCount())
        count.trajectories += 1
        for row in grouped.get(tid, ()):
            count.labelled_turns += 1
            for span in row.spans:
                count.chars += span.end - span.start
                if span.label == SpanLabel.DETERMINISTIC:
                    count.deterministic_chars += span.end - span.start
    return {pool: dict(sorted(domains.items())) for pool, domains in sorted(out.items())}


def pool_members(out: str) -> list[tuple[str, str, str]]:
    """(pool, domain, trajectory id) of every row of the pools in OUT (the eval pool's `id`)."""
    import pyarrow.parquet as pq

    members: list[tuple[str, str, str]] = []
    for pool in ALL_POOLS:
        key = "id" if pool == EVAL_POOL else "trajectory_id"
        for part in fs.list_files(fs.join(out, pool), "part-*.parquet", recursive=False):
            with fs.open_read(part) as fh:
                for batch in pq.ParquetFile(fh).iter_batches(batch_size=512, columns=["domain", key]):
                    members += [(pool, r["domain"], r[key]) for r in batch.to_pylist()]
    return members


def build_shares(
    out: str, cfg: PoolsConfig, inputs: Sequence[str]
) -> dict[str, dict[str, ShareCount]] | None:
    """The deterministic shares of the pools in OUT built from INPUTS; None when no labels exist."""
    labels = load_span_labels(span_label_sources(cfg, inputs))
    if labels is None:
        return None
    return deterministic_shares(pool_members(out), labels)


def shares_json(shares: Mapping[str, ShareCount] | None) -> dict[str, Any] | str:
    """One pool's shares for card.json: per domain counts and share, or "no labels"."""
    if shares is None:
        return NO_LABELS
    return {domain: count.to_json() for domain, count in shares.items()}


def share_lines(pool: str, shares: Mapping[str, ShareCount] | None) -> list[str]:
    """Markdown lines: one pool's deterministic share per domain, or "no labels"."""
    if shares is None:
        return [f"{pool}: {NO_LABELS} (no span_labels setting and no span_labels.parquet beside the inputs)."]
    lines = ["| domain | trajectories | labelled turns | deterministic share |", "|---|---|---|---|"]
    for domain, count in shares.items():
        share = count.share
        shown = "no labelled turns" if share is None else f"{share:.1%}"
        lines.append(f"| {domain} | {count.trajectories} | {count.labelled_turns} | {shown} |")
    return lines


def report_lines(shares: Mapping[str, Mapping[str, ShareCount]] | None) -> list[str]:
    """What `pools verify` prints: the deterministic share per pool and domain, or "no labels"."""
    if shares is None:
        return [f"deterministic share: {NO_LABELS}"]
    lines: list[str] = []
    for pool, domains in shares.items():
        for domain, count in domains.items():
            share = count.share
            shown = "no labelled turns" if share is None else f"{share:.1%} of {count.chars} chars"
            lines.append(f"deterministic share {pool}/{domain}: {shown} ({count.labelled_turns} turns)")
    return lines or [f"deterministic share: {NO_LABELS} for any pooled trajectory"]
