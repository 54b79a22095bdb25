"""SIGINT and SIGTERM to a real `worldline collect` behave alike: what is final is published, the tasks
in flight are aborted without leaving recordings, and a resumed run gives every task the id an
uninterrupted run gives it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from docker import DockerClient

from collectors import engine
from collectors.collection import CollectConfig, collect
from schemas import TrajectoryStatus, iter_trajectories, read_manifest, stable_id
from tests.helpers.sandboxes import owned_by, private_host

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_publishes_what_is_final_and_ids_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    client: DockerClient = engine.connect()
    as_this_host = private_host(monkeypatch)
    ids = [f"s{i}" for i in range(8)]
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"id": i, "instruction": "x", "actions": ["sleep 0.5", f"echo {i}", "sleep 20"]})
            + "\n"
            for i in ids[:2]
        )
        + "".join(
            json.dumps({"id": i, "instruction": "x", "actions": ["sleep 0.3", f"echo {i}"]}) + "\n"
            for i in ids[2:]
        )
    )
    out = tmp_path / "out"
    # --flush-every larger than the run: every finished trajectory is still in memory when the signal comes.
    argv = ["collect", "--env", "terminal", "--tasks", str(tasks), "--out", str(out), "-j", "3"]
    argv += ["--flush-every", "100", "--no-progress", "--step-timeout", "60"]
    runner = subprocess.Popen(
        [sys.executable, "-c", f"{as_this_host}from worldline.cli import main; main()", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 90
        # Two tasks sleep for 20 s; signal once the short ones are done and those two are still running.
        while time.monotonic() < deadline:
            casts = list((out / "casts").glob("*.cast")) if (out / "casts").is_dir() else []
            if len(casts) >= 4:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the run did not finish four tasks in time")
        os.kill(runner.pid, signum)
        _, stderr = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == (130 if signum == signal.SIGINT else -signum), stderr
    assert b"Traceback" not in stderr
    assert owned_by(client, runner.pid) == []
    published = {t.metadata["task_id"]: t for t in iter_trajectories(out)}
    assert len(published) >= 4 and not {"s0", "s1"} & set(published)  # what was final, and only that
    assert all(t.status == TrajectoryStatus.COMPLETE for t in published.values())
    aborted = list(iter_trajectories(out / "attempts")) if read_manifest(out / "attempts") else []
    assert {"s0", "s1"} <= {t.metadata["task_id"] for t in aborted}
    assert not {t.metadata["task_id"] for t in aborted} & set(published)
    assert all(t.status == TrajectoryStatus.ABORTED for t in aborted)
    # No recording without its published trajectory.
    assert {f"casts/{p.name}" for p in (out / "casts").iterdir()} == {
        t.metadata["asciicast"] for t in published.values()
    }

    tasks.write_text(tasks.read_text().replace('"sleep 20"', '"true"'))
    collect(CollectConfig(env="terminal", tasks_path=tasks, policy="scripted", out=out, resume=True))
    final = list(iter_trajectories(out))
    assert sorted(t.metadata["task_id"] for t in final) == ids
    # The ids an uninterrupted run gives, however often a task was interrupted.
    assert {t.id for t in final} == {stable_id("worldline-collect/terminal", "t.jsonl", i) for i in ids}
    assert {f"casts/{p.name}" for p in (out / "casts").iterdir()} == {t.metadata["asciicast"] for t in final}
