"""The ledger: one row per candidate template, as TSV (for people) and Parquet (for tools).

The row is the product of autoresearch: run, iteration, parent, template hash and path, length in lines
and tokens, the score with its five dimension means, valid and failed judgement counts, the calls,
tokens and cost the candidate took, its status (keep / discard / crash), the reason, and the
optimizer's one-line description. Both files are rewritten from the run state after every candidate
(atomically), so they always agree with it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.atomic import atomic_write_bytes

STATUSES = ("keep", "discard", "crash")

LEDGER_SCHEMA = pa.schema(
    [
        pa.field("run", pa.int32(), nullable=False),
        pa.field("iteration", pa.int32(), nullable=False),
        pa.field("candidate_id", pa.string(), nullable=False),
        pa.field("parent", pa.string(), nullable=True),
        pa.field("style", pa.string(), nullable=False),
        pa.field("template_hash", pa.string(), nullable=False),
        pa.field("template_path", pa.string(), nullable=True),
        pa.field("lines", pa.int32(), nullable=False),
        pa.field("tokens", pa.int32(), nullable=False),
        pa.field("score", pa.float64(), nullable=True),
        pa.field("format", pa.float64(), nullable=True),
        pa.field("factuality", pa.float64(), nullable=True),
        pa.field("consistency", pa.float64(), nullable=True),
        pa.field("realism", pa.float64(), nullable=True),
        pa.field("quality", pa.float64(), nullable=True),
        pa.field("valid", pa.int32(), nullable=False),
        pa.field("failed", pa.int32(), nullable=False),
        pa.field("parse_failures", pa.int32(), nullable=False),
        pa.field("incumbent_score", pa.float64(), nullable=True),
        pa.field("noise_floor", pa.float64(), nullable=True),
        pa.field("calls", pa.int64(), nullable=False),
        pa.field("prompt_tokens", pa.int64(), nullable=False),
        pa.field("completion_tokens", pa.int64(), nullable=False),
        pa.field("cost_usd", pa.float64(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("description", pa.string(), nullable=False),
    ],
    metadata={
        b"worldline.table": b"autoresearch-ledger",
        b"score": b"mean normalised judge score 0..100 over judged samples; a turn without a "
        b"<predicted_observation> block scores 0, a judge that never parses is excluded and counted",
        b"dimensions": b"mean 1..5 per dimension over valid judgements",
    },
)
"""One row per candidate; `iteration` 0 is the run's seed template."""

COLUMNS = tuple(LEDGER_SCHEMA.names)


def ledger_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([{c: row.get(c) for c in COLUMNS} for row in rows], schema=LEDGER_SCHEMA)


def _tsv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    return " ".join(str(value).split())  # one physical line per row


def write_ledger(rundir: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write `ledger.tsv` and `ledger.parquet` in RUNDIR (each atomically)."""
    ordered = sorted(rows, key=lambda r: (r["run"], r["iteration"]))
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(COLUMNS)
    for row in ordered:
        writer.writerow([_tsv_value(row.get(c)) for c in COLUMNS])
    atomic_write_bytes(rundir / "ledger.tsv", buffer.getvalue().encode("utf-8"))
    sink = pa.BufferOutputStream()
    pq.write_table(ledger_table(ordered), sink, compression="zstd")
    atomic_write_bytes(rundir / "ledger.parquet", sink.getvalue().to_pybytes())


def read_ledger(rundir: Path) -> pa.Table:
    return pq.read_table(rundir / "ledger.parquet", schema=LEDGER_SCHEMA)
