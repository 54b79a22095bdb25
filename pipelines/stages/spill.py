# Beam's FileSystems API carries no type annotations.
# mypy: disable-error-code="no-untyped-call"
"""Intermediate files the stages hand each other under OUT/_build, and the tables they end up in.

Stages exchange compact values through Beam's shuffles and bulky rows through Arrow IPC files
(spilled kept rows, sorted runs per output part). Every path goes through Beam's FileSystems, so
the same code reads and writes local folders and gs:// buckets.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from pipelines import fs
from pipelines.config import EVAL_POOL
from pipelines.rows import ASSIGNMENT_SCHEMA, POOL_SCHEMAS, QUARANTINE_SCHEMA
from schemas.trajectory import TRAJECTORY_SCHEMA

WORK_DIR = "_build"
SPILL_DIRS = ("kept", "runs")
"""Intermediate files under OUT/_build, removed when the job has finished."""
REMOVED = "removed"
ASSIGNMENTS = "assignments"
SORT_KEYS: dict[str, list[str]] = {
    "cpt": ["sample_id"],
    "sft": ["sample_id"],
    "rl": ["sample_id"],
    EVAL_POOL: ["id"],
    ASSIGNMENTS: ["trajectory_id"],
    REMOVED: ["record_id", "stage", "reason", "input_file", "detail"],
}
TABLE_SCHEMAS: dict[str, pa.Schema] = {
    **POOL_SCHEMAS,
    EVAL_POOL: TRAJECTORY_SCHEMA,
    ASSIGNMENTS: ASSIGNMENT_SCHEMA,
    REMOVED: QUARANTINE_SCHEMA,
}
SPILL_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")


def join(base: str, *parts: str) -> str:
    return FileSystems.join(base, *parts)


def mkdirs(path: str) -> None:
    try:
        FileSystems.mkdirs(path)
    except OSError:
        pass


def removed_row(record_id: str, input_file: str, stage: str, reason: str, detail: str) -> dict[str, str]:
    """One quarantine row: which record, from where, removed by which stage and why."""
    return {
        "record_id": record_id,
        "input_file": input_file,
        "stage": stage,
        "reason": reason,
        "detail": detail[:2000],
    }


def write_ipc(path: str, table: pa.Table) -> None:
    """Write an intermediate Arrow file atomically (a retried bundle overwrites the same name)."""
    folder, _ = path.rsplit("/", 1)
    mkdirs(folder)
    tmp = fs.temp_beside(path)
    with FileSystems.create(tmp) as fh:
        with pa.ipc.new_file(fh, table.schema, options=SPILL_OPTIONS) as writer:
            writer.write_table(table, max_chunksize=1000)  # batches the write stage merges one by one
    fs.publish_file(tmp, path)


def read_ipc(path: str, columns: list[str] | None = None) -> pa.Table:
    with FileSystems.open(path) as fh:
        data = fh.read()
    table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
    return table.select(columns) if columns is not None else table


def spill_runs(
    rows: dict[tuple[str, int], list[dict[str, Any]]], work: str, tag: str
) -> Iterator[tuple[tuple[str, int], str]]:
    """Write each (table, shard)'s rows as one run file, sorted by the table's key; yield its name."""
    for (table_name, shard), items in sorted(rows.items()):
        table = pa.Table.from_pylist(items, schema=TABLE_SCHEMAS[table_name])
        table = table.sort_by([(k, "ascending") for k in SORT_KEYS[table_name]])
        path = join(work, "runs", table_name, f"{shard:05d}", f"{tag}.arrow")
        write_ipc(path, table)
        yield (table_name, shard), path
