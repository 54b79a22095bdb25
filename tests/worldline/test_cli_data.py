"""`worldline show`, `export jsonl|agentworldbench` and `import agentworldbench` through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from schemas import iter_trajectories
from worldline.cli import app
from worldline.samples import sample_files

runner = CliRunner()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "ds"
    result = runner.invoke(app, ["import", "agentworldbench", *map(str, sample_files()), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "24 samples" in result.output and "7 trajectories" in result.output
    return out


def _id(dataset: Path, domain: str) -> str:
    return next(t.id for t in iter_trajectories(dataset) if t.domain.value == domain)


def test_show_renders_one_trajectory(dataset: Path) -> None:
    result = runner.invoke(app, ["show", str(dataset), "--id", _id(dataset, "mcp"), "--max-chars", "0"])
    assert result.exit_code == 0, result.output
    out = result.output
    for expected in (
        "mcp",
        "public: agentworldbench",
        "Find which library members",
        "list_tables, describe_table",
        "turn 3",
        "tool read_query",
        "no such table: loan",
        "error",
    ):
        assert expected in out, expected


def test_show_json_and_missing_id(dataset: Path) -> None:
    tid = _id(dataset, "os")
    result = runner.invoke(app, ["show", str(dataset), "--id", tid, "--json"])
    assert json.loads(result.output)["id"] == tid
    missing = runner.invoke(app, ["show", str(dataset), "--id", "awb-nope"])
    assert missing.exit_code == 1
    assert "no trajectory with id 'awb-nope'" in missing.output and "Traceback" not in missing.output


def test_export_jsonl_contract(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    result = runner.invoke(app, ["export", "jsonl", str(dataset), "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in out.read_text("utf-8").split("\n") if x]
    assert len(lines) == 7
    for obj in lines:
        assert isinstance(obj["id"], str) and obj["domain"] and obj["source"]["kind"] == "public"
        assert obj["source"]["uri"].endswith("_test.jsonl")
        assert all(
            isinstance(t["action"]["text"], str) and isinstance(t["observation"]["text"], str)
            for t in obj["turns"]
        )


def test_export_agentworldbench_all_and_paper(dataset: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["export", "agentworldbench", str(dataset), "--out", str(tmp_path / "all")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == sorted(f.name for f in sample_files())
    result = runner.invoke(
        app,
        [
            "export",
            "agentworldbench",
            str(dataset),
            "--out",
            str(tmp_path / "paper"),
            "--turns",
            "paper",
            "--seed",
            "4",
        ],
    )
    assert result.exit_code == 0, result.output
    paper = [json.loads(x) for x in (tmp_path / "paper" / "terminal_test.jsonl").read_text().split("\n") if x]
    turns = [s["turn_idx"] for s in paper]
    assert len(turns) == 5 and turns[0] == 1 and turns[-1] == 7
    web = (tmp_path / "paper" / "web_test.jsonl").read_text().count("\n")
    assert web == 3  # GUI trajectories keep every turn
    bad = runner.invoke(
        app, ["export", "agentworldbench", str(dataset), "--out", str(tmp_path / "x"), "--turns", "some"]
    )
    assert bad.exit_code == 1 and "choose all, paper or source" in bad.output


def test_import_reports_quarantine_without_traceback(tmp_path: Path) -> None:
    f = tmp_path / "terminal_test.jsonl"
    good = sample_files()[0].read_text("utf-8").split("\n")[0]
    f.write_bytes(good.encode() + b'\n{"task": "terminal"}\n\xff\xfe\n')
    result = runner.invoke(app, ["import", "agentworldbench", str(f), "--out", str(tmp_path / "ds")])
    assert result.exit_code == 0, result.output
    assert "read 3 samples" in result.output and "2 quarantined" in result.output
    assert "invalid_utf8: 1" in result.output and "missing_field: 1" in result.output
    assert "Traceback" not in result.output
    q = (tmp_path / "ds" / "quarantine" / "agentworldbench.jsonl").read_text().splitlines()
    assert [json.loads(x)["line"] for x in q] == [2, 3]
    missing = runner.invoke(
        app, ["import", "agentworldbench", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "d")]
    )
    assert missing.exit_code == 1 and "no such file" in missing.output


def test_corrupt_dataset_errors_name_the_file(tmp_path: Path, dataset: Path) -> None:
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"PAR1 not really parquet")
    for args in (
        ["show", str(bad), "--id", "x"],
        ["export", "jsonl", str(bad), "--out", str(tmp_path / "o.jsonl")],
        ["export", "agentworldbench", str(bad), "--out", str(tmp_path / "o")],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, args
        assert "broken.parquet" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o.jsonl").exists()


def test_console_script_runs_the_import(tmp_path: Path) -> None:
    # The installed entry point, as a user runs it.
    exe = Path(sys.executable).parent / "worldline"
    proc = subprocess.run(
        [str(exe), "import", "agentworldbench", *map(str, sample_files()), "--out", str(tmp_path / "ds")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(list(iter_trajectories(tmp_path / "ds"))) == 7
