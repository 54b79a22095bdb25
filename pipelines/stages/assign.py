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
    counters=("groups_defaulted",),
)
GROUP_BY = ("source", "task", "record")
"""How records without an explicit `Source.group` are grouped (`assignment.group_by`, `--group-by`)."""


def record_group(source: Source, task: str, record_id: str, group_by: str) -> tuple[str, bool]:
    """(source group, whether it was defaulted) of one trajectory.

    An explicit `Source.group` always wins. Otherwise `task` (default) keeps every trajectory of one
    task of one source together (sessions of one task share prefixes and answers), `source` puts
    the whole source in one pool, `record` lets each trajectory be its own group.
    """
    if source.group:
        return source.group, False
    if group_by == "source":
        return source.name, True
    if group_by == "record":
        return f"{source.name}/record:{record_id}", True
    if group_by != "task":
        raise ValueError(f"group_by {group_by!r} is not one of {', '.join(GROUP_BY)}")
    task_key = stable_hash("task", " ".join(task.split()))
    return f"{source.name}/task:{task_key:016x}", True


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
