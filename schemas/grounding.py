"""Grounding verdicts: whether a public trace's recorded observations agree with a real replay.

`worldline replay --ground TASKS` replays a public terminal or SWE trace's actions in a fresh sandbox
built from its task and compares, turn by turn, what reality printed with what the trace recorded.
The result is an attribute table beside the public data, `OUT/grounding.parquet`, one row per
(trajectory id, compared turn) with the trajectory's verdict on every row:

- `grounded`: every compared turn agrees fully;
- `disagrees`: a turn's recorded observation differs from reality (`first_disagreeing_turn`, `cause`);
- `not_groundable`: nothing could be compared (`cause` says why); one row, turn -1.

`pools build` reads the table when pools.yaml names it (`grounding:`) and keeps the traces that
disagree with reality out of every pool (reason `ungrounded`); traces it does not list, and those
not groundable, go on as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.atomic import atomic_write_parquet

GROUNDING_NAME = "grounding.parquet"
VERDICTS = ("grounded", "disagrees", "not_groundable")
ZSTD_LEVEL = 3

GROUNDING_SCHEMA = pa.schema(
    [
        pa.field("trajectory_id", pa.string(), nullable=False),
        pa.field("turn", pa.int32(), nullable=False),  # -1: the trajectory had no compared turn
        pa.field("agreement", pa.float64(), nullable=True),  # share of equal characters, 0..1
        pa.field("verdict", pa.string(), nullable=False),  # one of VERDICTS, per trajectory
        pa.field("cause", pa.string(), nullable=True),
        pa.field("first_disagreeing_turn", pa.int32(), nullable=True),
    ],
    metadata={b"worldline.content": b"grounding verdicts"},
)


class GroundingError(ValueError):
    """A grounding table that cannot be read or is not one."""


@dataclass(frozen=True)
class Verdict:
    """One trajectory's verdict."""

    verdict: str
    first_disagreeing_turn: int | None = None
    cause: str | None = None


def write_grounding(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Write the rows (GROUNDING_SCHEMA's columns) to PATH as one zstd Parquet file, atomically."""
    atomic_write_parquet(path, pa.Table.from_pylist(list(rows), schema=GROUNDING_SCHEMA), ZSTD_LEVEL)


def grounding_file(path: str | Path) -> Path:
    """The table of PATH: a grounding file, or a folder holding `grounding.parquet`."""
    p = Path(path)
    return p / GROUNDING_NAME if p.is_dir() else p


def read_verdicts(path: str | Path, data: bytes | None = None) -> dict[str, Verdict]:
    """Each listed trajectory's verdict, by id (PATH: a grounding file or the folder holding one;
    DATA: the file's bytes, when the caller fetched them from an object store)."""
    file = grounding_file(path) if data is None else path
    try:
        table = pq.read_table(file if data is None else pa.BufferReader(data))
    except (OSError, pa.ArrowInvalid) as exc:
        raise GroundingError(
            f"{file}: not a readable grounding table ({exc}); write one with `worldline replay --ground`"
        ) from exc
    required = ("trajectory_id", "turn", "verdict", "cause")
    missing = [n for n in required if n not in table.schema.names]
    if missing:
        raise GroundingError(f"{file}: not a grounding table: missing column(s) {', '.join(missing)}")
    has_first = "first_disagreeing_turn" in table.schema.names
    columns = [*required, "agreement"] if "agreement" in table.schema.names else list(required)
    verdicts: dict[str, Verdict] = {}
    first_below: dict[str, int] = {}  # tables without the column: the first turn that did not agree
    for row in table.select(columns + (["first_disagreeing_turn"] if has_first else [])).to_pylist():
        rid, verdict = row["trajectory_id"], row["verdict"]
        if verdict not in VERDICTS:
            raise GroundingError(
                f"{file}: trajectory {rid}: verdict {verdict!r} is not one of {', '.join(VERDICTS)}"
            )
        if not has_first and row.get("agreement") is not None and row["agreement"] < 1.0 and row["turn"] >= 0:
            first_below[rid] = min(first_below.get(rid, row["turn"]), row["turn"])
        first = row["first_disagreeing_turn"] if has_first else None
        verdicts[rid] = Verdict(verdict, first, row["cause"])
    for rid, turn in first_below.items():
        if verdicts[rid].verdict == "disagrees":
            verdicts[rid] = Verdict("disagrees", turn, verdicts[rid].cause)
    return verdicts
