# Beam's FileSystems API carries no type annotations.
# mypy: disable-error-code="no-untyped-call"
"""Stage write: merge each output part's sorted runs and publish the part with its trainer export.

Reads: ((table, shard), run files). Writes: OUT/<table>/part-NNNNN.parquet and its export, the
build's counters (OUT/_build/stats.json) and the evaluation turns verify checks against.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipelines.exports import write_export
from pipelines.rows import EVAL_TURNS_SCHEMA
from pipelines.stages import Stage
from pipelines.stages.spill import REMOVED, SORT_KEYS, TABLE_SCHEMAS, WORK_DIR, join, mkdirs, read_ipc

STAGE = Stage(
    name="write",
    reads=("(table, shard) run files",),
    writes=("pool parts", "exports", "stats.json", "eval_turns.parquet"),
    counters=("collapsed_copies.*",),
)
PART_ROW_GROUP = 1000


def sorted_unique(table: pa.Table, table_name: str) -> tuple[pa.Table, int]:
    """Sort by the table's key; identical records read twice render identical rows: keep one."""
    table = table.sort_by([(k, "ascending") for k in SORT_KEYS[table_name]])
    if table_name == REMOVED or table.num_rows < 2:
        return table, 0
    keys = table.column(SORT_KEYS[table_name][0]).to_pylist()
    keep = [i for i in range(len(keys)) if i == 0 or keys[i] != keys[i - 1]]
    if len(keep) == len(keys):
        return table, 0
    return table.take(pa.array(keep)), len(keys) - len(keep)


def write_part(element: tuple[tuple[str, int], Iterable[str]], out: str) -> Iterator[tuple[str, int]]:
    """Merge a part's sorted runs, collapse identical copies, and publish the part and its trainer
    export atomically (temp + rename)."""
    (table_name, shard), runs = element
    schema = TABLE_SCHEMAS[table_name]
    table = pa.concat_tables([read_ipc(r) for r in sorted(set(runs))]) if runs else schema.empty_table()
    table, collapsed = sorted_unique(table.combine_chunks(), table_name)
    if collapsed:
        yield (f"collapsed_copies.{table_name}", collapsed)
    folder = join(out, table_name)
    stem = f"part-{shard:05d}"
    final = join(folder, f"{stem}.parquet")
    tmp = join(folder, f".{stem}.parquet.tmp")
    mkdirs(folder)
    with FileSystems.create(tmp) as fh:
        pq.write_table(table, fh, compression="zstd", compression_level=3, row_group_size=PART_ROW_GROUP)
    if FileSystems.exists(final):
        FileSystems.delete([final])
    FileSystems.rename([tmp], [final])
    write_export(out, table_name, stem, iter(table.to_batches(max_chunksize=PART_ROW_GROUP)))


def write_stats(stats: dict[str, int], out: str) -> None:
    path = join(out, WORK_DIR, "stats.json")
    mkdirs(join(out, WORK_DIR))
    with FileSystems.create(path) as fh:
        fh.write((json.dumps(dict(sorted(stats.items())), indent=2) + "\n").encode())


def write_eval_turns(eval_turns: list[tuple[str, int, list[int]]], out: str) -> None:
    folder = join(out, WORK_DIR)
    mkdirs(folder)
    table = pa.Table.from_pylist(
        [{"eval_id": e, "turn_index": t, "signature": s} for e, t, s in sorted(eval_turns)],
        schema=EVAL_TURNS_SCHEMA,
    )
    with FileSystems.create(join(folder, "eval_turns.parquet")) as fh:
        pq.write_table(table, fh, compression="zstd")
