"""Tasks from public suites: `worldline tasks import SUITE PATH`.

One module per suite reads that suite's own files and yields task-file objects, or a skip with its
reason when a task cannot run here (an application the desktop lacks, a Dockerfile step that needs
the network). Every imported task passes its domain's `validate_task` and records its provenance in
`metadata` (`suite`, `suite_task_id`, `suite_source`, `importer_version`, `state_hash`), which the
collection job copies into each trajectory as `task.<key>`.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.environment import TaskError
from collectors.generators import state_hash, validated

IMPORTER_VERSION = 1
SUITE_MODULES = {
    "terminal-bench": "collectors.task_import.terminal_bench",
    "swe-bench": "collectors.task_import.swe_bench",
    "osworld": "collectors.task_import.osworld",
    "mcp": "collectors.task_import.mcp_tools",
    "miniwob": "collectors.task_import.miniwob",
}


class SuiteError(ValueError):
    """A suite cannot be read (unknown suite, missing path, a file that is not the suite's format)."""


@dataclass
class Skip:
    """One suite task that is not imported, and why."""

    task_id: str
    reason: str


@dataclass
class Imported:
    """What an import produced: (domain, task) pairs and the skipped tasks with their reasons."""

    tasks: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)

    def reasons(self) -> Counter[str]:
        return Counter(s.reason for s in self.skipped)


Item = tuple[str, dict[str, Any]] | Skip


def suites() -> list[str]:
    return sorted(SUITE_MODULES)


def with_provenance(
    domain: str, suite: str, suite_id: str, source: str, task: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The task with its provenance added to `metadata` (kept keys the suite module set there)."""
    meta = dict(task.pop("metadata", {}))
    meta.update(
        {
            "suite": suite,
            "suite_task_id": suite_id,
            "suite_source": source,
            "importer_version": IMPORTER_VERSION,
            "state_hash": state_hash(task),
        }
    )
    task["metadata"] = meta
    return domain, task


def import_suite(suite: str, path: str | Path, **options: Any) -> Imported:
    """Read `path` as a `suite` and return the valid tasks and the skipped ones with their reasons."""
    if suite not in SUITE_MODULES:
        raise SuiteError(f"unknown suite {suite!r}; suites: {', '.join(suites())}")
    module = importlib.import_module(SUITE_MODULES[suite])
    items: Iterator[Item] = module.read(path, **options)
    out = Imported()
    seen: set[str] = set()
    for item in items:
        if isinstance(item, Skip):
            out.skipped.append(item)
            continue
        domain, task = item
        if task["id"] in seen:
            out.skipped.append(Skip(task["id"], "duplicate task id"))
            continue
        try:
            validated(domain, task)
        except TaskError as exc:
            out.skipped.append(Skip(task["id"], f"invalid for {domain}: {exc}"))
            continue
        seen.add(task["id"])
        out.tasks.append((domain, task))
    return out
