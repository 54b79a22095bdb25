# Beam's transforms carry no type annotations; calling them is the point of this module.
# mypy: disable-error-code="no-untyped-call"
"""Stage assign: decide one pool per source group, so a whole group lands in exactly one pool.

Reads: (source group, source kind) of every record that survived the filters. Writes: source group
-> pool, from the group's majority source kind and the configured rule (a seeded hash of the group
chooses among weighted pools).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import apache_beam as beam

from pipelines.config import PoolsConfig
from pipelines.minhash import stable_hash
from pipelines.stages.contract import Stage
from pipelines.stages.dedup import Fingerprint
from schemas.trajectory import Source

STAGE = Stage(
    name="assign",
    reads=("(source group, source kind)",),
    writes=("source group -> pool",),
    counters=("groups_defaulted", "groups_defaulted_by.*"),
)
GROUP_BY = ("source", "task", "record")
"""How records without an explicit `Source.group` are grouped (`assignment.group_by`, `--group-by`)."""


NO_TASK = "record_no_task"
"""How a record without a task is grouped under `group_by: task`: as its own group."""


def record_group(source: Source, task: str, record_id: str, group_by: str) -> tuple[str, str | None]:
    """(source group, how it was defaulted: a GROUP_BY value or NO_TASK; None for an explicit group).

    An explicit `Source.group` always wins. Otherwise `task` (default) keeps every trajectory of one
    task of one source together (sessions of one task share prefixes and answers), `source` puts
    the whole source in one pool, `record` lets each trajectory be its own group. A record without a
    task (a cleaned recording has none) shares nothing a task would: under `task` it is its own group,
    so a task-less source spreads over the pools instead of landing in one.
    """
    if source.group:
        return source.group, None
    if group_by == "source":
        return source.name, group_by
    if group_by == "record":
        return f"{source.name}/record:{record_id}", group_by
    if group_by != "task":
        raise ValueError(f"group_by {group_by!r} is not one of {', '.join(GROUP_BY)}")
    words = " ".join(task.split())
    if not words:
        return f"{source.name}/record:{record_id}", NO_TASK
    task_key = stable_hash("task", words)
    return f"{source.name}/task:{task_key:016x}", group_by


def grouping_note(stats: dict[str, int], group_by: str) -> str | None:
    """The build's warning about records without a source group: how many, and grouped which way."""
    total = int(stats.get("groups_defaulted", 0))
    if not total:
        return None
    prefix = "groups_defaulted_by."
    ways = {k[len(prefix) :]: int(v) for k, v in stats.items() if k.startswith(prefix) and v}
    names = {NO_TASK: "one group per record (they have no task)"}
    parts = ", ".join(f"{n} {names.get(way, f'by {way}')}" for way, n in sorted(ways.items()))
    return (
        f"{total} trajectories carry no source group (Source.group); they were grouped by {group_by}"
        f"{f' ({parts})' if parts else ''}, so each such group lands in one pool. "
        "Choose with --group-by source|task|record."
    )


def group_kind_counts(fps: Iterable[Fingerprint]) -> Counter[str]:
    return Counter(fp.kind for fp in fps)


def choose_pool(weights: dict[str, float], seed: int, group: str) -> str:
    """A weighted choice by seeded hash of the source group: the whole group lands in one pool."""
    names = sorted(n for n, w in weights.items() if w > 0)
    total = sum(weights[n] for n in names)
    point = (stable_hash("pool", seed, group) % 1_000_000) / 1_000_000 * total
    acc = 0.0
    for name in names:
        acc += weights[name]
        if point < acc:
            return name
    return names[-1]


def decide_group_pool(element: tuple[str, Iterable[Fingerprint]], cfg: PoolsConfig) -> tuple[str, str]:
    """The pool of a source group from its majority source kind (ties: dedup.source_priority order)."""
    group, fps = element
    return group_pool_from_kinds((group, group_kind_counts(fps)), cfg)


def group_pool_from_kinds(element: tuple[str, Counter[str]], cfg: PoolsConfig) -> tuple[str, str]:
    """`decide_group_pool` from the group's source-kind counts (what the job shuffles: no signatures)."""
    group, counts = element
    prio = cfg.dedup.source_priority
    kind = min(counts, key=lambda k: (-counts[k], prio.index(k) if k in prio else len(prio), k))
    return group, choose_pool(cfg.assignment.rule_for(kind).pools, cfg.assignment.seed, group)


class CountKinds(beam.CombineFn):
    """Source-kind counts of one source group."""

    def create_accumulator(self) -> Counter[str]:
        return Counter()

    def add_input(self, acc: Counter[str], kind: str) -> Counter[str]:
        acc[kind] += 1
        return acc

    def merge_accumulators(self, accs: Iterable[Counter[str]]) -> Counter[str]:
        total: Counter[str] = Counter()
        for acc in accs:
            total.update(acc)
        return total

    def extract_output(self, acc: Counter[str]) -> Counter[str]:
        return acc
