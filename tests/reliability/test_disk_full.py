"""The output disk fills up (a real small tmpfs) during `clean` and `pools build`: one clear line, no
torn shard or staging folder left, and the same command finishes once there is space."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from schemas import read_manifest
from tests.helpers.disks import resize
from tests.reliability.harness import ROOT

SAMPLES = ROOT / "curation_agents" / "samples"
TRACES = [str(p) for p in sorted(SAMPLES.iterdir()) if p.is_file() and p.name != "SOURCES.md"]


def worldline(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worldline", *args], capture_output=True, text=True, timeout=900
    )


def fill(disk: Path, leave_kib: int) -> None:
    import shutil

    free = shutil.disk_usage(disk).free
    (disk / "ballast").write_bytes(b"\0" * max(0, free - leave_kib * 1024))


def only_whole_parts(dataset: Path) -> int:
    manifest = read_manifest(dataset)
    listed = {f.path for f in manifest.files} if manifest else set()
    on_disk = {str(p.relative_to(dataset)) for p in (dataset / "trajectories").glob("*")}
    assert on_disk == listed, f"unlisted or temporary files: {on_disk - listed}"
    return sum(pq.read_table(dataset / name).num_rows for name in listed)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    text = result.stdout + result.stderr
    assert "Traceback" not in text, text[-3000:]
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, text[-3000:]
    return errors[0]


def test_clean_on_a_full_disk_then_resume(small_disk: Callable[[int], Path]) -> None:
    disk = small_disk(1024)
    fill(disk, leave_kib=24)
    out = disk / "clean"
    line = one_line_error(worldline("clean", *TRACES, "--out", str(out), "--no-llm"))
    assert "No space left on device" in line or "disk full" in line
    only_whole_parts(out)
    (disk / "ballast").unlink()
    resize(disk, 16 * 1024)
    done = worldline("clean", *TRACES, "--out", str(out), "--no-llm")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_in"] == summary["accepted"] + summary["quarantined"]
    assert only_whole_parts(out) == summary["accepted"]


def test_pools_build_on_a_full_disk_then_again(small_disk: Callable[[int], Path], tmp_path: Path) -> None:
    cleaned = tmp_path / "cleaned"
    done = worldline("clean", *TRACES, "--out", str(cleaned), "--no-llm")
    assert done.returncode == 0, done.stdout[-2000:]
    disk = small_disk(1024)
    fill(disk, leave_kib=32)
    out = disk / "pools"
    args = [
        "pools",
        "build",
        "--config",
        str(ROOT / "pipelines/configs/demo.yaml"),
        "--in",
        str(cleaned),
        "--out",
        str(out),
    ]
    line = one_line_error(worldline(*args))
    assert "disk full" in line and str(out) in line
    assert sorted(p.name for p in disk.iterdir()) == ["ballast"], "a staging folder or a partial OUT was left"
    (disk / "ballast").unlink()
    resize(disk, 64 * 1024)
    done = worldline(*args)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads((out / "manifest.json").read_text())["counts"]["reconciles"]
