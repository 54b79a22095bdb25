"""Trajectory shards on disk: `DIR/trajectories/part-*.parquet` plus `DIR/manifest.json`.

Writes are atomic (a part becomes visible only by renaming a finished temp file, and the manifest is
replaced the same way), files and row groups are bounded, and every file carries the schema version in
its Parquet metadata. Reads are lazy and streaming so memory stays bounded on datasets larger than RAM.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import polars as pl  # imported where a frame is built: the pipelines and their workers never need it

    # pyarrow.dataset pulls in pandas (~50 MB, ~0.2 s); import it only where a dataset is built.
    import pyarrow.dataset as pads

from schemas.atomic import atomic_write_json, publish_file, temp_path
from schemas.trajectory import (
    SCHEMA_MAJOR,
    SCHEMA_METADATA_KEY,
    SCHEMA_VERSION,
    TRAJECTORY_SCHEMA,
    Trajectory,
)

TRAJECTORY_DIR = "trajectories"
MANIFEST_NAME = "manifest.json"
DEFAULT_ROW_GROUP_ROWS = 1_000
DEFAULT_MAX_FILE_ROWS = 50_000
DEFAULT_MAX_FILE_BYTES = 256 * 1024 * 1024
ZSTD_LEVEL = 3


class ShardError(Exception):
    """A shard cannot be read as trajectories; the message names the file and the fix."""


class SchemaVersionError(ShardError):
    """The data was written by a newer major schema version than this reader understands."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------------
# Manifest
# --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class ShardFile:
    """One finished part file as recorded in the manifest."""

    path: str  # relative to the dataset root
    rows: int
    bytes: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "rows": self.rows, "bytes": self.bytes, "sha256": self.sha256}


@dataclass(slots=True)
class Manifest:
    """What a dataset directory holds: its files, row counts, checksums and schema version."""

    schema_version: str = SCHEMA_VERSION
    files: list[ShardFile] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "worldline.trajectories",
            "schema_version": self.schema_version,
            "rows": self.rows,
            "files": [f.to_json() for f in self.files],
            **({"extra": self.extra} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Manifest:
        return cls(
            schema_version=obj.get("schema_version", SCHEMA_VERSION),
            files=[ShardFile(**f) for f in obj.get("files", [])],
            extra=dict(obj.get("extra", {})),
        )


def read_manifest(root: str | Path) -> Manifest | None:
    """The manifest of a dataset directory, or None when it has none."""
    path = Path(root) / MANIFEST_NAME
    if not path.exists():
        return None
    try:
        manifest = Manifest.from_json(json.loads(path.read_text("utf-8")))
    except (json.JSONDecodeError, TypeError, KeyError) as exc:
        raise ShardError(f"{path}: manifest is not valid ({exc}); delete it and rewrite the dataset") from exc
    check_version(manifest.schema_version, str(path))
    return manifest


def check_version(version: str, where: str) -> None:
    """Reject data written by a newer major schema version, with a message that says what to do."""
    try:
        major = int(version.split(".")[0])
    except ValueError as exc:
        raise SchemaVersionError(f"{where}: schema version {version!r} is not major.minor.patch") from exc
    if major > SCHEMA_MAJOR:
        raise SchemaVersionError(
            f"{where}: written with trajectory schema {version}, but this worldline reads "
            f"schema {SCHEMA_VERSION} (major {SCHEMA_MAJOR}); upgrade worldline to read it"
        )


# --------------------------------------------------------------------------------------------------
# Writer
# --------------------------------------------------------------------------------------------------


class ShardWriter:
    """Appends trajectories to a dataset directory in bounded, atomically published Parquet parts.

    Thread-safe. Each finished part is renamed into place and the manifest rewritten atomically, so a
    crash loses at most the unfinished part and never corrupts what is already published. `flush()`
    publishes the current part now (collectors call it after each finished trajectory batch).
    Opening an existing dataset appends to it.

    A write that fails (a full disk) discards the unfinished part, temporary file included, and
    raises; the writer is then broken: later writes, flushes and `close()` raise ShardError saying how
    many rows were not published, and nothing after the failure is published. The manifest keeps
    listing exactly the parts published before it.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        max_file_rows: int = DEFAULT_MAX_FILE_ROWS,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        schema: pa.Schema = TRAJECTORY_SCHEMA,
        subdir: str = TRAJECTORY_DIR,
    ) -> None:
        self.root = Path(root)
        self.subdir = subdir
        self.schema = schema
        self.row_group_rows = max(1, row_group_rows)
        self.max_file_rows = max(1, max_file_rows)
        self.max_file_bytes = max(1, max_file_bytes)
        (self.root / subdir).mkdir(parents=True, exist_ok=True)
        self.manifest = read_manifest(self.root) or Manifest()
        self._lock = threading.Lock()
        self._buffer: list[dict[str, Any]] = []
        self._writer: pq.ParquetWriter | None = None
        self._tmp_path: Path | None = None
        self._final_path: Path | None = None
        self._file_rows = 0
        self._seq = len(self.manifest.files)
        self._run = uuid.uuid4().hex[:8]
        self._failure: BaseException | None = None  # the write that broke the writer
        self.lost_rows = 0  # rows written to this writer that were never published

    # -- public ------------------------------------------------------------------------------------
    def write(self, trajectory: Trajectory) -> None:
        self.write_records([trajectory.to_record()])

    def write_many(self, trajectories: Iterable[Trajectory]) -> None:
        for t in trajectories:
            self.write(t)

    def write_records(self, records: list[dict[str, Any]]) -> None:
        """Append rows already in the Arrow record form of `schema`."""
        with self._lock:
            self._check_usable(len(records))
            self._buffer.extend(records)
            if len(self._buffer) >= self.row_group_rows:
                self._drain()

    def write_table(self, table: pa.Table) -> None:
        """Append an Arrow table that already has exactly `schema` (the fast path)."""
        if not table.schema.equals(self.schema, check_metadata=False):
            raise ShardError("write_table: table schema differs from the dataset schema; cast it first")
        with self._lock:
            self._check_usable(table.num_rows)
            self._drain()
            for batch in table.to_batches(max_chunksize=self.row_group_rows):
                self._write_batch(pa.Table.from_batches([batch], schema=self.schema))

    def flush(self) -> None:
        """Publish everything written so far as a finished part."""
        with self._lock:
            self._check_usable(0)
            self._drain()
            self._publish()

    def close(self) -> Manifest:
        """Publish what is buffered and the manifest. After a failed write, publish nothing more and
        raise ShardError (the manifest lists what was published before the failure)."""
        self.flush()
        with self._lock:
            self._write_manifest()
        return self.manifest

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None or self._failure is None:
            self.close()  # with an exception in the block: publish what is complete; it still propagates
        # else the block's exception is the write failure itself (or came after it): it propagates as is

    # -- internals (lock held) --------------------------------------------------------------------
    def _check_usable(self, rows: int) -> None:
        if self._failure is None:
            return
        self.lost_rows += rows
        self._buffer.clear()
        raise ShardError(
            f"{self.root}: an earlier write failed ({self._failure}); {self.lost_rows} row(s) were not "
            "published and nothing more is (what the manifest lists is complete)"
        ) from self._failure

    def _fail(self, exc: BaseException) -> None:
        """Discard the unfinished part (its rows are lost, its temporary file removed) and break the
        writer: a torn part is never published."""
        self.lost_rows += self._file_rows + len(self._buffer)
        self._buffer.clear()
        writer, tmp = self._writer, self._tmp_path
        self._writer, self._tmp_path, self._final_path = None, None, None
        self._file_rows = 0
        if writer is not None:
            try:
                writer.close()
            except Exception:  # the file is discarded either way
                pass
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if self._failure is None:
            self._failure = exc

    def _drain(self) -> None:
        # A chunk never crosses a row group or a file boundary; _write_batch publishes full files.
        while self._buffer:
            take = min(self.max_file_rows - self._file_rows, self.row_group_rows)
            chunk, self._buffer = self._buffer[:take], self._buffer[take:]
            try:
                table = pa.Table.from_pylist(chunk, schema=self.schema)
            except BaseException:
                self._buffer = chunk + self._buffer  # a bad record: nothing written, the writer still usable
                raise
            try:
                self._write_batch(table)
            except BaseException as exc:
                self.lost_rows += len(chunk)
                self._fail(exc)
                raise

    def _write_batch(self, table: pa.Table) -> None:
        try:
            if self._writer is None:
                self._open_part()
            assert self._writer is not None and self._tmp_path is not None
            self._writer.write_table(table, row_group_size=self.row_group_rows)
        except BaseException as exc:
            if self._failure is None:
                self._fail(exc)
            raise
        self._file_rows += table.num_rows
        if self._file_rows >= self.max_file_rows or self._tmp_path.stat().st_size >= self.max_file_bytes:
            self._publish()

    def _open_part(self) -> None:
        name = f"part-{self._seq:05d}-{self._run}.parquet"
        self._final_path = self.root / self.subdir / name
        self._tmp_path = temp_path(self._final_path)
        self._file_rows = 0
        self._writer = pq.ParquetWriter(  # on failure _write_batch removes the temporary file
            self._tmp_path,
            self.schema,
            compression="zstd",
            compression_level=ZSTD_LEVEL,
            write_statistics=["id"] if "id" in self.schema.names else True,
        )

    def _publish(self) -> None:
        if self._writer is None:
            return
        assert self._tmp_path is not None and self._final_path is not None
        final = self._final_path
        try:
            self._writer.close()  # the footer: a part without one is torn
            publish_file(self._tmp_path, final)
        except BaseException as exc:
            self._fail(exc)
            raise
        entry = ShardFile(
            path=str(final.relative_to(self.root)),
            rows=self._file_rows,
            bytes=final.stat().st_size,
            sha256=sha256_file(final),
        )
        self.manifest.files.append(entry)
        try:
            self._write_manifest()
        except BaseException as exc:
            # Not listed, so not published: the complete part goes too, and the old manifest stays.
            self.manifest.files.remove(entry)
            final.unlink(missing_ok=True)
            self._writer, self._tmp_path = None, None
            self._fail(exc)
            raise
        self._writer, self._tmp_path, self._final_path = None, None, None
        self._file_rows = 0
        self._seq += 1

    def _write_manifest(self) -> None:
        atomic_write_json(self.root / MANIFEST_NAME, self.manifest.to_json())


def write_trajectories(root: str | Path, trajectories: Iterable[Trajectory], **kwargs: Any) -> Manifest:
    """Write trajectories to a dataset directory (appending if it exists) and return the manifest."""
    with ShardWriter(root, **kwargs) as writer:
        writer.write_many(trajectories)
    return writer.manifest


# --------------------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------------------


def shard_files(path: str | Path) -> list[Path]:
    """The Parquet files behind PATH: a dataset directory (manifest order), a folder, or one file."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.exists():
        raise ShardError(f"{p}: no such file or directory")
    manifest = read_manifest(p)
    if manifest is not None:
        if not manifest.files and _manifest_kind(p) == POOLS_KIND:
            raise ShardError(
                f"{p}: holds the pools `worldline pools build` wrote, not one dataset; give one pool "
                f"folder ({p}/eval holds trajectories; {p}/cpt, {p}/sft, {p}/rl training samples)"
            )
        return [listed_path(p, f.path) for f in manifest.files]
    base = p / TRAJECTORY_DIR if (p / TRAJECTORY_DIR).is_dir() else p
    files = sorted(f for f in base.rglob("*.parquet") if not f.name.startswith("."))
    return files


POOLS_KIND = "worldline.pools"


def dataset_files(path: str | Path) -> list[Path]:
    """`shard_files` for a reader that needs data: a folder holding no dataset (no manifest.json and
    no Parquet parts, e.g. a mistyped path) is an error naming it, never an empty result."""
    files = shard_files(path)
    if not files and read_manifest(path) is None:
        raise ShardError(
            f"{path}: holds no trajectory dataset (no manifest.json, no .parquet parts); give a folder "
            "`worldline collect`, `clean` or `import` wrote, a folder of parts or one part file"
        )
    return files


def _manifest_kind(root: Path) -> str | None:
    try:
        kind = json.loads((root / MANIFEST_NAME).read_text("utf-8")).get("kind")
    except (OSError, ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None


def listed_path(root: Path, relative: str) -> Path:
    """Where a manifest entry of dataset `root` lives. Pool manifests written before pool folders were
    datasets of their own list `POOL/part-...` relative to the build's OUT; those resolve there."""
    path = root / relative
    head, _, rest = relative.partition("/")
    if rest and head == root.name and not path.exists() and (root / rest).exists():
        return root / rest
    return path


def same_shape(got: pa.DataType, want: pa.DataType) -> bool:
    """Types match, ignoring nullability and field metadata (other writers, e.g. polars, mark all nullable)."""
    if pa.types.is_struct(want):
        return (
            pa.types.is_struct(got)
            and [f.name for f in got] == [f.name for f in want]
            and all(same_shape(g.type, w.type) for g, w in zip(got, want, strict=True))
        )
    if pa.types.is_list(want):
        return pa.types.is_list(got) and same_shape(got.value_type, want.value_type)
    return bool(got.equals(want))


def check_file_schema(path: Path, expected: pa.Schema = TRAJECTORY_SCHEMA) -> pq.ParquetFile:
    """Open a part and check its version and schema; errors name the file and what is wrong."""
    if not Path(path).is_file():
        raise ShardError(
            f"{path}: missing (the dataset's manifest.json lists it); restore the file or rewrite the dataset"
        )
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ShardError(
            f"{path}: not a readable Parquet file ({exc}); the file is truncated or corrupt"
        ) from exc
    schema = pf.schema_arrow
    version = (schema.metadata or {}).get(SCHEMA_METADATA_KEY)
    if version is not None:
        check_version(version.decode("utf-8", "replace"), str(path))
    pool = (schema.metadata or {}).get(b"worldline.pool")
    if pool is not None and expected is TRAJECTORY_SCHEMA:
        raise ShardError(
            f"{path}: a part of the {pool.decode()} pool (training samples, not trajectories); read it "
            "with `worldline stats` or worldline.open_dataset, check it with `worldline pools verify OUT`"
        )
    missing = [n for n in expected.names if n not in schema.names]
    if missing:
        raise ShardError(f"{path}: not a worldline trajectory file: missing column(s) {', '.join(missing)}")
    for name in expected.names:
        want, got = expected.field(name).type, schema.field(name).type
        if not same_shape(got, want):
            raise ShardError(f"{path}: column {name!r} has type {got}, expected {want}")
    return pf


def iter_record_batches(
    path: str | Path, *, batch_size: int = 256, columns: list[str] | None = None
) -> Iterator[tuple[Path, pa.RecordBatch]]:
    """Stream (file, batch) pairs from every part; memory is bounded by `batch_size` rows."""
    for f in shard_files(path):
        pf = check_file_schema(f)
        for batch in pf.iter_batches(batch_size=batch_size, columns=columns):
            yield f, batch


def iter_trajectories(path: str | Path, *, batch_size: int = 256) -> Iterator[Trajectory]:
    """Stream typed trajectories from a dataset, a folder of parts or one part file."""
    for _, batch in iter_record_batches(path, batch_size=batch_size):
        for rec in batch.to_pylist():
            yield Trajectory.from_record(rec)


def arrow_dataset(path: str | Path) -> pads.Dataset:
    """A pyarrow dataset over the parts with the explicit schema (never inferred)."""
    import pyarrow.dataset as pads

    files = dataset_files(path)
    for f in files:
        check_file_schema(f)
    return pads.dataset([str(f) for f in files], schema=TRAJECTORY_SCHEMA, format="parquet")


def polars_schema() -> pl.Schema:
    """The trajectory schema in polars terms, derived from the Arrow schema."""
    import polars as pl

    empty = pl.from_arrow(TRAJECTORY_SCHEMA.empty_table())
    assert isinstance(empty, pl.DataFrame)
    return empty.schema


def open_dataset(path: str | Path) -> pl.LazyFrame:
    """A lazy polars frame over a trajectory dataset, scanned with the explicit schema.

    Nothing is read until `.collect()`; filter and select first to touch only what you need, e.g.
    `open_dataset(p).filter(pl.col("domain") == "terminal").select("id", "task").collect()`.
    """
    import polars as pl

    files = dataset_files(path)
    for f in files:
        check_file_schema(f)
    if not files:
        return pl.LazyFrame(schema=polars_schema())
    return pl.scan_parquet([str(f) for f in files], schema=polars_schema())


def get_trajectory(path: str | Path, trajectory_id: str) -> Trajectory:
    """One trajectory by id, read with a pushed-down filter; KeyError if absent."""
    import pyarrow.dataset as pads

    table = arrow_dataset(path).to_table(filter=pads.field("id") == trajectory_id)
    if table.num_rows == 0:
        raise KeyError(f"no trajectory with id {trajectory_id!r} in {path}")
    return Trajectory.from_record(table.slice(0, 1).to_pylist()[0])
