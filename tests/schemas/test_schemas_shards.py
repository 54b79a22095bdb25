"""Shard IO: bounded parts, manifest, atomic publication, lazy reads, and clear errors on bad files."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas import (
    Action,
    Observation,
    SchemaVersionError,
    ShardError,
    ShardWriter,
    Source,
    Trajectory,
    Turn,
    arrow_dataset,
    get_trajectory,
    iter_trajectories,
    open_dataset,
    read_manifest,
    stable_id,
    write_trajectories,
)
from schemas.shards import sha256_file, shard_files


def make_traj(i: int, domain: str = "terminal", turns: int = 2) -> Trajectory:
    return Trajectory(
        id=stable_id("test", str(i)),
        domain=domain,
        source=Source(kind="infra", name="unit", uri=f"task-{i}"),
        task=f"task {i}",
        turns=[
            Turn(Action("command", f"echo {i}-{t}"), Observation(f"{i}-{t}\n$ ", "terminal"), exit_code=0)
            for t in range(turns)
        ],
    )


def test_stable_id_is_stable_and_distinct() -> None:
    assert stable_id("a", "b") == stable_id("a", "b")
    assert stable_id("a", "b") != stable_id("ab", "")
    assert stable_id("a", "b").startswith("wl-")


def test_files_and_row_groups_are_bounded_and_manifest_reconciles(tmp_path: Path) -> None:
    trajs = [make_traj(i) for i in range(23)]
    manifest = write_trajectories(tmp_path, trajs, row_group_rows=4, max_file_rows=10)
    assert [f.rows for f in manifest.files] == [10, 10, 3]
    assert manifest.rows == 23
    on_disk = json.loads((tmp_path / "manifest.json").read_text())
    assert on_disk["rows"] == 23 and on_disk["schema_version"] == "1.0.0"
    for f in manifest.files:
        path = tmp_path / f.path
        assert sha256_file(path) == f.sha256
        meta = pq.ParquetFile(path).metadata
        assert all(meta.row_group(i).num_rows <= 4 for i in range(meta.num_row_groups))
        assert meta.row_group(0).column(0).compression == "ZSTD"
    assert not list(tmp_path.rglob("*.tmp"))
    assert [t.id for t in iter_trajectories(tmp_path)] == [t.id for t in trajs]


def test_byte_bound_splits_files(tmp_path: Path) -> None:
    big = [make_traj(i) for i in range(6)]
    for t in big:
        t.turns[0].observation.text = f"{t.id}" + "x" * 200_000
    manifest = write_trajectories(tmp_path, big, row_group_rows=1, max_file_bytes=1)
    assert len(manifest.files) == 6


def test_appending_keeps_earlier_parts(tmp_path: Path) -> None:
    write_trajectories(tmp_path, [make_traj(0)])
    write_trajectories(tmp_path, [make_traj(1)])
    manifest = read_manifest(tmp_path)
    assert manifest is not None and manifest.rows == 2 and len(manifest.files) == 2
    assert {t.id for t in iter_trajectories(tmp_path)} == {make_traj(0).id, make_traj(1).id}


def test_unflushed_part_is_never_visible(tmp_path: Path) -> None:
    writer = ShardWriter(tmp_path, row_group_rows=1, max_file_rows=100)
    writer.write(make_traj(0))
    writer.write(make_traj(1))
    # Rows are in a temp part, not yet published: readers see an empty dataset.
    assert shard_files(tmp_path) == []
    writer.flush()
    assert len(shard_files(tmp_path)) == 1
    writer.close()


def test_lazy_readers_agree(tmp_path: Path) -> None:
    trajs = [make_traj(i, domain=d) for i, d in enumerate(["terminal", "swe", "mcp", "terminal"])]
    write_trajectories(tmp_path, trajs, max_file_rows=2)
    lf = open_dataset(tmp_path)
    assert isinstance(lf, pl.LazyFrame)
    counts = lf.group_by("domain").len().sort("domain").collect()
    assert counts.to_dict(as_series=False) == {"domain": ["mcp", "swe", "terminal"], "len": [1, 1, 2]}
    turns = lf.select(pl.col("turns").list.len().sum()).collect().item()
    assert turns == 8
    assert arrow_dataset(tmp_path).count_rows() == 4
    assert get_trajectory(tmp_path, trajs[2].id) == trajs[2]
    with pytest.raises(KeyError, match="no trajectory with id"):
        get_trajectory(tmp_path, "nope")


def test_newer_major_version_is_rejected(tmp_path: Path) -> None:
    write_trajectories(tmp_path, [make_traj(0)])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["schema_version"] = "2.0.0"
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SchemaVersionError, match=r"schema 2\.0\.0.*upgrade worldline"):
        list(iter_trajectories(tmp_path))


def test_newer_version_in_file_metadata_is_rejected(tmp_path: Path) -> None:
    from schemas import TRAJECTORY_SCHEMA, to_table

    table = to_table([make_traj(0)]).replace_schema_metadata({b"worldline.schema_version": b"3.1.0"})
    path = tmp_path / "future.parquet"
    pq.write_table(table, path)
    with pytest.raises(SchemaVersionError, match="3.1.0"):
        list(iter_trajectories(path))
    assert TRAJECTORY_SCHEMA.metadata[b"worldline.schema_version"] == b"1.0.0"


def test_corrupt_and_foreign_files_raise_shard_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"PAR1 not really")
    with pytest.raises(ShardError, match="truncated or corrupt"):
        list(iter_trajectories(junk))
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"x": [1]}), foreign)
    with pytest.raises(ShardError, match="missing column"):
        list(iter_trajectories(foreign))


def test_memory_stays_bounded_when_streaming(tmp_path: Path) -> None:
    """Streaming 40 MB of observations holds one batch at a time, not the dataset."""
    import tracemalloc

    payload = "y" * 100_000
    trajs = []
    for i in range(400):
        t = make_traj(i, turns=1)
        t.turns[0].observation.text = payload + str(i)
        trajs.append(t)
    write_trajectories(tmp_path, trajs, row_group_rows=16, max_file_rows=100)
    del trajs
    tracemalloc.start()
    n = 0
    for batch_traj in iter_trajectories(tmp_path, batch_size=16):
        n += len(batch_traj.turns[0].observation.text) > 0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert n == 400
    assert peak < 20 * 1024 * 1024  # the dataset is ~40 MB of text; a batch is ~1.6 MB
