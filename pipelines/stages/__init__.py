"""The stages of the pool build, one module each, in the order records flow through them.

    read -> filter -> dedup -> decontaminate -> assign -> render -> write

Every module declares its contract as a `Stage`: the fields it reads, the fields it writes and the
counters it adds to OUT/_build/stats.json (a `*` stands for a reason code). `pipelines.build`
composes the stages into one Beam pipeline; read, filter and the per-record halves of dedup and
decontaminate run fused in one worker pass (`PrepareInput`), the global halves after shuffles.
"""

from __future__ import annotations

from pipelines.stages.contract import BULK_GC_THRESHOLD, Stage, bulk_gc, tune_gc_for_bulk_work

__all__ = [
    "BULK_GC_THRESHOLD",
    "Stage",
    "all_stages",
    "bulk_gc",
    "stage_of",
    "tune_gc_for_bulk_work",
    "undeclared_counters",
]


def all_stages() -> list[Stage]:
    """Every stage's contract, in pipeline order."""
    from pipelines.stages import assign, decontaminate, dedup, filter, read, render, write

    return [m.STAGE for m in (read, filter, dedup, decontaminate, assign, render, write)]


def undeclared_counters(counters: list[str]) -> list[str]:
    """Counters no stage declares (a stage that counts something must say so in its contract)."""
    stages = all_stages()
    return sorted(c for c in counters if not any(s.declares(c) for s in stages))


def stage_of(counter: str) -> str:
    """The name of the stage that declares `counter` ("build" when none does)."""
    for stage in all_stages():
        if stage.declares(counter):
            return stage.name
    return "build"
