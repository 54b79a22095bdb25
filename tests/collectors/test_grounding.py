"""Re-grounding on real sandboxes: Harbor's terminus-2 hello-world golden trajectory, cleaned,
replayed against the imported Terminal-Bench hello-world task; an edited copy is flagged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from worldline.cli import app

pytestmark = [pytest.mark.engine, pytest.mark.slow]

FIXTURES = Path(__file__).parents[1] / "fixtures"
ATIF = FIXTURES / "atif" / "terminus-2_hello-world-invalid-json.trajectory.json"
SUITE = FIXTURES / "task_suites" / "terminal_bench" / "hello-world"


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def grounded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ground")
    edited = json.loads(ATIF.read_text("utf-8"))
    for step in edited["steps"]:  # the public trace claims an output the command never printed
        for result in (step.get("observation") or {}).get("results", []):
            if "printf 'Hello, world!" in (result.get("content") or ""):
                result["content"] = result["content"].replace("hello.txt\n", "hello.txt\nHello, world!\n", 1)
    traces = root / "traces"
    traces.mkdir()
    shutil.copy(ATIF, traces / ATIF.name)
    (traces / "edited.trajectory.json").write_text(json.dumps(edited), "utf-8")
    _run("clean", str(traces), "--out", str(root / "clean"))
    _run("tasks", "import", "terminal-bench", str(SUITE), "--out", str(root / "tasks.jsonl"))
    output = _run(
        "replay",
        str(root / "clean"),
        "--out",
        str(root / "out"),
        "--ground",
        str(root / "tasks.jsonl"),
        "--task-id",
        "tbench-hello-world",
        "--no-progress",
    )
    (root / "report.txt").write_text(output, "utf-8")
    return root


def test_the_real_trace_is_grounded_and_the_edited_one_flagged(grounded: Path) -> None:
    manifest = json.loads((grounded / "out" / "manifest.json").read_text("utf-8"))
    verdicts = sorted(
        (v["verdict"], v["first_disagreeing_turn"], v["cause"]) for v in manifest["verdicts"].values()
    )
    assert verdicts == [("disagrees", 0, "observation differs"), ("grounded", None, None)]
    assert manifest["by_domain"]["terminal"]["grounded"] == 1
    assert manifest["by_domain"]["terminal"]["disagrees"] == 1
    assert "terminal: 1 grounded, 1 disagreeing, 0 not groundable" in (grounded / "report.txt").read_text(
        "utf-8"
    )


def test_the_table_and_the_real_observations(grounded: Path) -> None:
    rows = pq.read_table(grounded / "out" / "grounding.parquet").to_pylist()
    # the mark_task_complete turns are Terminus's own tool: not compared, so one row per trace
    assert len(rows) == 2 and {r["turn"] for r in rows} == {0}
    by_verdict = {r["verdict"]: r for r in rows}
    assert by_verdict["grounded"]["agreement"] == 1.0
    assert by_verdict["disagrees"]["agreement"] < 1.0
    real = list((grounded / "out" / "grounded").rglob("*"))
    assert real, "the real observations are written as a dataset"


def test_no_matching_task_is_not_groundable(grounded: Path, tmp_path: Path) -> None:
    output = _run(
        "replay",
        str(grounded / "clean"),
        "--out",
        str(tmp_path),
        "--ground",
        str(grounded / "tasks.jsonl"),
        "--no-progress",
    )
    assert "0 grounded, 0 disagreeing, 2 not groundable" in output
    manifest = json.loads((tmp_path / "manifest.json").read_text("utf-8"))
    assert {v["cause"] for v in manifest["verdicts"].values()} == {"no matching task"}
