"""Killing `worldline clean` mid-run and rerunning gives the same accepted set, each record once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemas import read_manifest
from schemas.shards import iter_record_batches

REPO = Path(__file__).resolve().parents[2]


def _make_inputs(root: Path, files: int, per_file: int) -> None:
    root.mkdir()
    for f in range(files):
        lines = []
        for r in range(per_file):
            conv = [{"from": "human", "value": f"task {f}-{r}"}]
            for k in range(2 + (r % 3)):
                conv += [
                    {"from": "function_call", "value": f"step\n```bash\necho {f} {r} {k}\n```"},
                    {"from": "observation", "value": f"{f} {r} {k}"},
                ]
            if r % 7 == 0:
                conv = conv[:3]  # one turn only: quarantined as too_few_turns
            lines.append(json.dumps({"id": f"{f}-{r}", "conversations": conv}))
        (root / f"part-{f:03d}.jsonl").write_text("\n".join(lines) + "\n")


def _clean(inputs: Path, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "worldline",
        "clean",
        str(inputs),
        "--out",
        str(out),
        "--flush-every",
        "20",
        *extra,
    ]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _accepted_ids(out: Path) -> list[str]:
    ids: list[str] = []
    for _, batch in iter_record_batches(out, columns=["id"]):
        ids.extend(batch.column("id").to_pylist())
    return ids


def _quarantined_keys(out: Path) -> list[str]:
    keys: list[str] = []
    for f in sorted((out / "quarantine" / "parts").glob("*.parquet")):
        keys.extend(pq.read_table(f, columns=["record_key"]).column("record_key").to_pylist())
    return keys


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_sigkill_then_rerun_gives_the_same_accepted_set_once(tmp_path: Path, workers: int) -> None:
    inputs = tmp_path / "in"
    _make_inputs(inputs, files=30, per_file=120)
    reference = _clean(inputs, tmp_path / "ref", "--workers", str(workers))
    assert reference.wait(timeout=300) == 0, reference.stderr.read() if reference.stderr else ""

    out = tmp_path / "out"
    victim = _clean(inputs, out, "--workers", str(workers))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        manifest = read_manifest(out) if (out / "manifest.json").exists() else None
        if manifest is not None and manifest.rows >= 100:
            break
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    partial = _accepted_ids(out)
    assert 0 < len(partial) < len(_accepted_ids(tmp_path / "ref")), "the kill must land mid-run"

    rerun = _clean(inputs, out, "--workers", str(workers))
    assert rerun.wait(timeout=300) == 0, rerun.stderr.read() if rerun.stderr else ""
    ids = _accepted_ids(out)
    assert Counter(ids).most_common(1)[0][1] == 1, "a record was written twice"
    assert set(ids) == set(_accepted_ids(tmp_path / "ref"))
    assert set(_quarantined_keys(out)) == set(_quarantined_keys(tmp_path / "ref"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_in"] == 3600 == summary["accepted"] + summary["quarantined"]
    assert summary["resumed_records"] >= len(partial)
    assert summary["per_reason"] == json.loads((tmp_path / "ref" / "summary.json").read_text())["per_reason"]


def test_parallel_workers_open_a_prepared_checkpoint_database_without_locking(tmp_path: Path) -> None:
    """Workers that set up the shared checkpoint file at the same moment fail with "database is
    locked" (the switch to WAL needs the file to itself); the run prepares it before they start."""
    import sqlite3
    import threading

    from langgraph.checkpoint.sqlite import SqliteSaver

    from curation_agents.clean_run import prepare_checkpoints

    errors: list[BaseException] = []
    for trial in range(30):
        path = tmp_path / f"checkpoints-{trial}.sqlite"
        prepare_checkpoints(path)
        barrier = threading.Barrier(4)

        def worker(path: Path = path, barrier: threading.Barrier = barrier) -> None:
            # A short busy timeout, as a worker on a loaded machine would effectively see.
            saver = SqliteSaver(sqlite3.connect(str(path), check_same_thread=False, timeout=5))
            barrier.wait()
            try:
                saver.setup()
            except sqlite3.OperationalError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
