"""`worldline clean --workers N` when the OS kills a worker (the OOM killer's SIGKILL, kill -9): the file it
was cleaning is quarantined as worker_died, a new worker takes over, the run finishes and reconciles,
and a resumed run does not read that file again.

The kill is real: the test finds the worker process that has the file open (/proc) and sends it SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curation_agents.clean_run import QUARANTINE_DIR, CleanRun
from curation_agents.model import CleanConfig
from tests.curation_agents.test_curation_robustness import _chat_line

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the worker through /proc"),
]


def _worker_with_open(path: Path) -> int | None:
    """The pid of a child process of this one that has PATH open, if any."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[1] != me:
                continue
            if any(os.readlink(fd) == str(path) for fd in (entry / "fd").iterdir()):
                return int(entry.name)
        except (OSError, IndexError):
            continue  # the process ended while we looked
    return None


def _kill_the_workers_of(targets: list[Path], killed: list[int], deadline_s: float = 120.0) -> None:
    end = time.monotonic() + deadline_s
    for target in targets:
        while time.monotonic() < end:
            pid = _worker_with_open(target)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                break
            time.sleep(0.005)


def test_killed_workers_cost_their_file_not_the_run(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    # Large files, cleaned for long enough that the test sees them open; then many small ones.
    big = [src / "a0-big.jsonl", src / "a1-big.jsonl"]
    for n, path in enumerate(big):
        path.write_text("\n".join(_chat_line(10_000 * (n + 1) + i) for i in range(6000)) + "\n")
    small = [src / f"b{i:03d}.jsonl" for i in range(24)]
    for i, path in enumerate(small):
        path.write_text(_chat_line(i) + "\n")
    killed: list[int] = []
    killer = threading.Thread(target=_kill_the_workers_of, args=(big, killed), daemon=True)
    killer.start()
    out = tmp_path / "out"
    summary = CleanRun([str(src)], out, CleanConfig(), workers=2, flush_every=50).run()
    killer.join()
    assert len(killed) == 2, "the test did not catch both large files open"
    assert summary["worker_deaths"] == 2
    assert summary["per_reason"].get("worker_died") == 2, summary
    assert summary["records_in"] == summary["accepted"] + summary["quarantined"]
    assert summary["files"] == len(big) + len(small)
    # Every small file was cleaned, though both workers that started were killed on the large ones.
    rows = [
        r
        for p in out.rglob("*.parquet")
        if QUARANTINE_DIR not in p.parts
        for r in pq.read_table(p).to_pylist()
    ]
    uris = {r["source"]["uri"] for r in rows}
    assert {f"in/{p.name}#line-1" for p in small} <= uris
    died = [
        r
        for p in (out / QUARANTINE_DIR).rglob("*.parquet")
        for r in pq.read_table(p).to_pylist()
        if r["reason"] == "worker_died"
    ]
    assert sorted(r["source_path"] for r in died) == [str(p) for p in big]
    assert all("SIGKILL" in r["detail"] for r in died)

    again = CleanRun([str(src)], out, CleanConfig(), workers=2).run()
    assert again["processed_records"] == 0 and again["worker_deaths"] == 0
    assert again["resumed_records"] == again["records_in"] == summary["records_in"]
    assert {k: again[k] for k in ("accepted", "quarantined", "per_reason")} == {
        k: summary[k] for k in ("accepted", "quarantined", "per_reason")
    }
