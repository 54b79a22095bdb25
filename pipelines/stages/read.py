# Beam's FileSystems API carries no type annotations.
# mypy: disable-error-code="no-untyped-call"
"""Stage read: resolve the inputs in the driver, cut parts into row-range splits, read one split.

Reads: trajectory parts (--in), knowledge corpora (--knowledge), evaluation sets (--eval).
Writes: `ReadSplit`s (path, row group, offset, length) and the rows of each, under the part's schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipelines.config import PoolsConfig
from pipelines.inputs import (
    input_parts,
    knowledge_files,
    open_part,
    read_eval_ngrams,
    read_eval_turns,
)
from pipelines.stages.contract import Stage
from schemas.shards import check_version
from schemas.trajectory import SCHEMA_METADATA_KEY

STAGE = Stage(
    name="read",
    reads=("--in trajectory parts", "--knowledge files", "--eval sets"),
    writes=("ReadSplit", "trajectory rows", "knowledge file names", "evaluation turn signatures"),
    counters=("records_in", "knowledge_in"),
)


@dataclass(frozen=True, slots=True)
class ReadSplit:
    """A row range of one input part: the unit of reading, filtering and fingerprinting."""

    index: int
    path: str
    row_group: int
    offset: int
    length: int


@dataclass(slots=True)
class BuildInputs:
    """Resolved inputs of one build: trajectory parts, knowledge files, evaluation turns."""

    trajectory_files: list[str]
    knowledge_files: list[str]
    eval_turns: list[tuple[str, int, list[int]]]
    total_rows: int
    row_groups: dict[str, list[int]] = field(default_factory=dict)
    """Rows per row group of every trajectory part (read from the footers once, in the driver)."""
    eval_grams: list[tuple[str, list[int]]] = field(default_factory=list)
    """N-gram hashes of every evaluation turn and task (containment decontamination)."""
    input_bytes: int = 0
    """Bytes of all trajectory parts and knowledge files (to size the output parts)."""
    span_label_files: list[str] = field(default_factory=list)
    """Replay span-label tables (pipelines.span_shares): RL rule checks and CPT runtime weights."""


def read_parquet(path: str) -> pq.ParquetFile:
    return pq.ParquetFile(FileSystems.open(path))


def row_groups_of(path: str) -> list[int]:
    meta = read_parquet(path).metadata
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def plan_splits(files: list[tuple[str, list[int]]], split_rows: int) -> list[ReadSplit]:
    """Cut every row group of every part into ranges of at most `split_rows` rows."""
    splits: list[ReadSplit] = []
    for path, group_rows in files:
        for rg, n in enumerate(group_rows):
            for offset in range(0, n, split_rows):
                splits.append(ReadSplit(len(splits), path, rg, offset, min(split_rows, n - offset)))
    return splits


def read_split(split: ReadSplit) -> pa.Table:
    """The rows of one split under the part's own schema (rows that fail validation are quarantined)."""
    pf = read_parquet(split.path)
    version = (pf.schema_arrow.metadata or {}).get(SCHEMA_METADATA_KEY)
    if version is not None:
        check_version(version.decode("utf-8", "replace"), split.path)
    return pf.read_row_group(split.row_group).slice(split.offset, split.length)


def resolve_inputs(
    inputs: list[str], knowledge: list[str], evals: list[str], cfg: PoolsConfig
) -> BuildInputs:
    """Expand input folders into part files and read the (small) evaluation set in the driver."""
    files: list[str] = []
    row_groups: dict[str, list[int]] = {}
    for item in inputs:
        # An unreadable part, a foreign schema or a newer schema version stops here with the file named.
        for f in input_parts(item):
            open_part(f)
            files.append(f)
            row_groups[f] = row_groups_of(f)
    total = sum(sum(row_groups[f]) for f in files)
    know = [f for item in knowledge for f in knowledge_files(item)]
    eval_turns = read_eval_turns(evals, cfg)
    size = sum(m.size_in_bytes for f in [*files, *know] for m in FileSystems.match([f])[0].metadata_list)
    return BuildInputs(files, know, eval_turns, total, row_groups, read_eval_ngrams(evals, cfg), size)
