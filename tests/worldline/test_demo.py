"""`worldline demo` end to end, reduced: real sandboxes, the real cleaner, Beam, verify and the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from schemas.shards import iter_trajectories
from tests.worldline.test_notebook import NOTEBOOK, kernel_spec

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def test_reduced_demo_runs_every_step_and_reports_the_android_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "demo"
    command = [sys.executable, "-m", "worldline", "demo", "--out", str(out)]
    command += ["--domains", "terminal,android", "--tasks-per-domain", "3"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=1500, env={**os.environ, "COLUMNS": "200"}
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    summary = json.loads((out / "demo-summary.json").read_text())
    status = {step["name"]: step["status"] for step in summary["steps"]}
    assert status["collect android"] == "skipped"
    assert status["collect terminal (explore)"] == "ok"
    assert (
        status["pools build (3 inputs, Beam)"] == "ok"
        and status["pools verify"] == "ok"
        and status["report"] == "ok"
    )
    assert summary["pools"]["counts"]["reconciles"]
    assert summary["pools"]["counts"]["records_in"] >= 3
    assert (out / "pools" / "report.html").stat().st_size > 100_000
    assert "next: open" in done.stdout and "report.html" in done.stdout

    # The browsing notebook runs on what the demo collected (several terminal trajectories).
    collected = out / "collected" / "terminal"
    monkeypatch.setenv("WORLDLINE_DATASET", str(collected))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, kernel_name=kernel_spec(tmp_path, monkeypatch), timeout=180).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    longest = max(iter_trajectories(collected), key=lambda t: t.num_turns)
    card = code[5].outputs[0]["data"]["text/html"]
    assert card.count('class="wl-turn"') == longest.num_turns


def test_demo_refuses_to_wipe_a_folder_that_is_not_a_demo(tmp_path: Path) -> None:
    precious = tmp_path / "data"
    precious.mkdir()
    (precious / "keep.txt").write_text("x")
    done = subprocess.run(
        [sys.executable, "-m", "worldline", "demo", "--out", str(precious)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "not a demo output" in done.stdout + done.stderr
    assert (precious / "keep.txt").exists()
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "worldline",
            "demo",
            "--out",
            str(tmp_path / "x"),
            "--domains",
            "terminal,moon",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "unknown moon" in bad.stdout + bad.stderr
