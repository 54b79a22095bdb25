"""A stage's contract (`Stage`) and the collector settings every stage process runs with.

Stage modules import these from here, never from the package, so the package may collect the
stage modules' contracts without an import cycle."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

BULK_GC_THRESHOLD = 50_000
"""Allocations between collections of the youngest generation while a stage runs (Python's default: 700)."""
_driver_tunes_gc = False


@dataclass(frozen=True, slots=True)
class Stage:
    """What one stage consumes and produces, and which counters it may emit."""

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    counters: tuple[str, ...]

    def declares(self, counter: str) -> bool:
        """Whether `counter` is one of this stage's counters (`prefix.*` matches any reason code)."""
        for declared in self.counters:
            if declared.endswith(".*") and counter.startswith(declared[:-1]):
                return True
            if declared == counter:
                return True
        return False


def tune_gc_for_bulk_work() -> None:
    """Collector settings for a process that runs pipeline stages.

    A stage allocates millions of short-lived rows, dicts and lists that reference counting frees; with
    Python's defaults the cyclic collector runs every 700 allocations and, every few runs, re-scans
    everything alive, including the long-lived heap (modules, vocabulary, templates, DoFns). Here what
    is alive once a worker is set up is moved out of the scans (`gc.freeze`) and the youngest
    generation is collected every `BULK_GC_THRESHOLD` allocations. Cyclic garbage is still collected.

    In a worker process this lasts for the life of the process; in the driver `bulk_gc()` applies it
    for the job and restores the settings after (the in-process runner runs stages in the driver).
    """
    if _driver_tunes_gc:
        return
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(gen0, BULK_GC_THRESHOLD), gen1, gen2)
    gc.freeze()


@contextmanager
def bulk_gc() -> Iterator[None]:
    """`tune_gc_for_bulk_work` for the duration of a job run from this process, then the settings as
    they were (the caller may be a notebook or a test session that lives on)."""
    global _driver_tunes_gc
    if _driver_tunes_gc:  # nested: the outer job restores
        yield
        return
    before = gc.get_threshold()
    tune_gc_for_bulk_work()
    _driver_tunes_gc = True
    try:
        yield
    finally:
        _driver_tunes_gc = False
        gc.unfreeze()
        gc.set_threshold(*before)
