"""A full disk is an error of the run, never a task's outcome, and nothing torn is ever published.

The disks are real: small tmpfs mounts (root only; skipped where mounting is not allowed)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from schemas import (
    Domain,
    ShardWriter,
    Source,
    SourceKind,
    Trajectory,
    TrajectoryStatus,
    iter_trajectories,
    read_manifest,
    stable_id,
)
from schemas.shards import ShardError
from tests.helpers.disks import resize
from worldline.cli import app


def noisy_trajectory(i: int) -> Trajectory:
    return Trajectory(
        id=f"t{i}",
        domain=Domain.TERMINAL,
        source=Source(kind=SourceKind.INFRA, name="disk-test"),
        task=os.urandom(12_000).hex(),  # incompressible: ~24 KB per row on disk
        status=TrajectoryStatus.COMPLETE,
    )


def assert_only_whole_parts_published(dataset: Path) -> int:
    """Every part on disk is listed, every listed part reads in full; returns the rows."""
    manifest = read_manifest(dataset)
    listed = {f.path for f in manifest.files} if manifest else set()
    on_disk = {str(p.relative_to(dataset)) for p in (dataset / "trajectories").glob("*")}
    assert on_disk == listed, "a temporary or unlisted file was left in the dataset"
    rows = 0
    for name in sorted(listed):
        rows += pq.read_table(dataset / name).num_rows  # raises on a part without a footer
    assert manifest is None or rows == manifest.rows
    return rows


def test_shard_writer_never_publishes_a_torn_part(small_disk: Callable[[int], Path]) -> None:
    disk = small_disk(256)
    ballast = disk / "ballast"
    ballast.write_bytes(b"\0" * 64 * 1024)
    writer = ShardWriter(disk / "ds")
    published = 0
    with pytest.raises(OSError) as failed:
        for i in range(100):
            writer.write(noisy_trajectory(i))
            writer.flush()
            published += 1
    assert "No space left on device" in str(failed.value) or failed.value.errno == 28
    ballast.unlink()  # space comes back before close: still nothing torn may be published
    with pytest.raises(ShardError, match="not published"):
        writer.close()
    assert assert_only_whole_parts_published(disk / "ds") == published
    assert [t.id for t in iter_trajectories(disk / "ds")] == [f"t{i}" for i in range(published)]
    with pytest.raises(ShardError, match="an earlier write failed"):
        writer.write(noisy_trajectory(999))


@pytest.mark.engine
def test_disk_full_during_collect_stops_the_run_and_resume_finishes_it(
    tmp_path: Path, small_disk: Callable[[int], Path]
) -> None:
    disk = small_disk(1024)
    out = disk / "ds"
    tasks = tmp_path / "t.jsonl"
    big = "head -c 150000 /dev/zero | base64 | head -c 150000; echo"  # ~156 KB of recording per task
    ids = [f"d{i}" for i in range(8)]
    tasks.write_text(
        "".join(json.dumps({"id": i, "instruction": "x", "actions": [big, f"echo {i}"]}) + "\n" for i in ids)
    )
    argv = ["collect", "--env", "terminal", "--tasks", str(tasks), "--out", str(out), "--no-progress"]
    result = CliRunner().invoke(app, argv)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: disk full: cannot write "), result.output
    assert str(out) in lines[0] and "needed" in lines[0] and "--resume" in lines[0]
    # What was published is whole; no task got the full disk as its outcome; no cut recording is left.
    assert_only_whole_parts_published(out)
    for folder in (out, out / "attempts"):
        for t in iter_trajectories(folder) if read_manifest(folder) else []:
            assert "Errno 28" not in (t.status_reason or "") and "No space" not in (t.status_reason or "")
    named = {t.metadata["asciicast"] for t in iter_trajectories(out)} if read_manifest(out) else set()
    assert {f"casts/{p.name}" for p in (out / "casts").iterdir()} == named
    before = {t.metadata["task_id"] for t in iter_trajectories(out)} if read_manifest(out) else set()
    assert len(before) < len(ids)

    resize(disk, 32 * 1024)
    result = CliRunner().invoke(app, [*argv, "--resume"])
    assert result.exit_code == 0, result.output
    final = list(iter_trajectories(out))
    assert sorted(t.metadata["task_id"] for t in final) == ids  # every task exactly once
    assert all(t.status == TrajectoryStatus.COMPLETE and len(t.turns) == 2 for t in final)
    assert {t.id for t in final} == {stable_id("worldline-collect/terminal", "t.jsonl", i) for i in ids}
    assert {f"casts/{p.name}" for p in (out / "casts").iterdir()} == {t.metadata["asciicast"] for t in final}


@pytest.mark.engine
def test_disk_full_while_publishing_shards_keeps_the_dataset_whole(
    tmp_path: Path, small_disk: Callable[[int], Path]
) -> None:
    """Only the shard folder fills up (a tiny disk mounted at OUT/trajectories): the recordings fit, the
    Parquet parts do not."""
    out = tmp_path / "ds"
    (out / "trajectories").mkdir(parents=True)
    shards = out / "trajectories"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(shards)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        tasks = tmp_path / "t.jsonl"
        noise = "head -c 9000 /dev/urandom | base64 -w 0; echo"  # ~12 KB that zstd cannot shrink
        ids = [f"p{i}" for i in range(6)]
        tasks.write_text(
            "".join(json.dumps({"id": i, "instruction": "x", "actions": [noise]}) + "\n" for i in ids)
        )
        argv = ["collect", "--env", "terminal", "--tasks", str(tasks), "--out", str(out), "--no-progress"]
        argv += ["--flush-every", "1"]
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 2, result.output
        assert (
            result.output.startswith("error: disk full: cannot write ") and "Traceback" not in result.output
        )
        assert_only_whole_parts_published(out)
        published = list(iter_trajectories(out)) if read_manifest(out) else []
        assert len(published) < len(ids)
        assert {f"casts/{p.name}" for p in (out / "casts").iterdir()} == {
            t.metadata["asciicast"] for t in published
        }
        resize(shards, 8 * 1024)
        assert CliRunner().invoke(app, [*argv, "--resume"]).exit_code == 0
        assert sorted(t.metadata["task_id"] for t in iter_trajectories(out)) == ids
        assert_only_whole_parts_published(out)
    finally:
        subprocess.run(["umount", "-l", str(shards)], check=False)
