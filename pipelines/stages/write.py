# Beam's FileSystems API carries no type annotations.
# mypy: disable-error-code="no-untyped-call"
"""Stage write: merge each output part's sorted runs and publish the part with its trainer export.

Reads: ((table, shard), run files). Writes: OUT/<table>/part-NNNNN.parquet and its export, the
build's counters (OUT/_build/stats.json) and the evaluation turns verify checks against.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipelines import fs
from pipelines.exports import write_export
from pipelines.rows import EVAL_TURNS_SCHEMA
from pipelines.stages.contract import Stage
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


def run_rows(path: str) -> Iterator[dict[str, Any]]:
    """The rows of one sorted run, one record batch at a time."""
    with FileSystems.open(path) as fh:
        reader = pa.ipc.open_file(pa.BufferReader(fh.read()))
        for i in range(reader.num_record_batches):
            yield from reader.get_batch(i).to_pylist()


def merged_rows(runs: list[str], table_name: str, collapsed: list[int]) -> Iterator[dict[str, Any]]:
    """A k-way merge of a part's sorted runs in key order; identical records read twice render
    identical rows, so a repeated key keeps its first row (counted in `collapsed[0]`)."""
    keys = SORT_KEYS[table_name]
    previous: object = None
    for row in heapq.merge(*(run_rows(r) for r in runs), key=lambda r: tuple(r[k] for k in keys)):
        if table_name != REMOVED:
            if row[keys[0]] == previous:
                collapsed[0] += 1
                continue
            previous = row[keys[0]]
        yield row


def part_stem(shard: int, roll: int) -> str:
    """`part-SSSSS-RRR`: bucket SSSSS, roll-over RRR (names sort in key order)."""
    return f"part-{shard:05d}-{roll:03d}"


def write_part(
    element: tuple[tuple[str, int], Iterable[str]], out: str, max_bytes: int = 256 * 1024 * 1024
) -> Iterator[tuple[str, int]]:
    """Merge a bucket's sorted runs into parts of at most `max_bytes` of Arrow data, streaming (one
    chunk of rows in memory), each published atomically (temp + rename) with its trainer export.
    A single row larger than `max_bytes` gets a part of its own."""
    (table_name, shard), runs = element
    schema = TABLE_SCHEMAS[table_name]
    folder = join(out, table_name)
    mkdirs(folder)
    collapsed = [0]
    roll, part_bytes, writer, fh, tmp = 0, 0, None, None, ""
    stems: list[str] = []

    def close() -> None:
        nonlocal writer, fh
        if writer is not None and fh is not None:
            writer.close()
            fh.close()
            stem = stems[-1]
            fs.publish_file(tmp, join(folder, f"{stem}.parquet"))
            writer, fh = None, None

    rows_per_chunk = 64  # adapted to the rows' size so a chunk stays well below max_bytes

    def flush(table: pa.Table) -> None:
        nonlocal roll, part_bytes, writer, fh, tmp, rows_per_chunk
        per_row = max(1, table.nbytes // max(1, table.num_rows))
        rows_per_chunk = max(1, min(PART_ROW_GROUP, max_bytes // (4 * per_row)))
        if writer is not None and part_bytes + table.nbytes > max_bytes:
            close()
            roll += 1
        if writer is None:
            stems.append(part_stem(shard, roll))
            tmp = fs.temp_beside(join(folder, f"{stems[-1]}.parquet"))
            fh = FileSystems.create(tmp)
            writer = pq.ParquetWriter(fh, schema, compression="zstd", compression_level=3)
            part_bytes = 0
        writer.write_table(table, row_group_size=PART_ROW_GROUP)
        part_bytes += table.nbytes

    names = sorted(set(runs))
    run_bytes = sum(m.size_in_bytes for r in names for m in FileSystems.match([r])[0].metadata_list)
    if run_bytes * 4 <= max_bytes:
        # Small bucket (the usual case: buckets are planned to fit a part): merge in Arrow, which
        # is much faster than the row-wise merge and still bounded by the part size.
        table = pa.concat_tables([read_ipc(r) for r in names]).combine_chunks()
        table, collapsed[0] = sorted_unique(table, table_name)
        start = 0
        while start < table.num_rows or writer is None:
            step = rows_per_chunk  # flush adapts rows_per_chunk to the rows' size
            flush(table.slice(start, step))
            start += step
    else:
        chunk: list[dict[str, Any]] = []
        for row in merged_rows(names, table_name, collapsed):
            chunk.append(row)
            if len(chunk) >= rows_per_chunk:
                flush(pa.Table.from_pylist(chunk, schema=schema))
                chunk = []
        if chunk or writer is None:
            flush(pa.Table.from_pylist(chunk, schema=schema))
    close()
    if collapsed[0]:
        yield (f"collapsed_copies.{table_name}", collapsed[0])
    for stem in stems:  # exports read the published part back, batch by batch
        with FileSystems.open(join(folder, f"{stem}.parquet")) as part:
            batches = pq.ParquetFile(part).iter_batches(batch_size=PART_ROW_GROUP)
            write_export(out, table_name, stem, (pa.Table.from_batches([b]) for b in batches))


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
