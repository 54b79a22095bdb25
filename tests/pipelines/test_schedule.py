"""The scheduled cycle on real commands: only new shards reach the pools, nothing new builds nothing."""

from __future__ import annotations

import fcntl
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.schedule import LOCK, ScheduleError, load_schedule, read_state, run_cycle, run_step
from worldline.cli import app

ROOT = Path(__file__).resolve().parents[2]
CASTS = sorted((ROOT / "curation_agents" / "samples").glob("*.cast"))
CHAT = ROOT / "curation_agents" / "samples" / "sharegpt_toolcall_sample.json"


def write_schedule(tmp: Path) -> Path:
    incoming = tmp / "incoming"
    incoming.mkdir()
    path = tmp / "schedule.yaml"
    path.write_text(
        "data: data\npools_out: data/pools\n"
        f"pools_config: {ROOT / 'pipelines/configs/demo.yaml'}\n"
        f"eval: [{ROOT / 'worldline/samples'}]\n"
        "clean:\n"
        "  - {name: recordings, inputs: [incoming/*.cast], source_kind: public, source_name: rec, licence: MIT}\n"
        "  - {name: chats, inputs: [incoming/*.json], source_kind: inhouse, source_name: team, licence: MIT}\n"
    )
    return path


def pool_rows(pools: Path) -> dict[str, int]:
    manifest = json.loads((pools / "manifest.json").read_text())
    return {pool: entry["samples"] for pool, entry in manifest["pools"].items()}


@pytest.mark.slow
def test_cycles_add_only_new_parts_and_skip_when_nothing_is_new(tmp_path: Path) -> None:
    schedule_path = write_schedule(tmp_path)
    shutil.copy(CASTS[0], tmp_path / "incoming")
    lines: list[str] = []
    run_cycle(schedule_path, log=lines.append)
    schedule = load_schedule(schedule_path)
    state = read_state(schedule)
    assert state["cycles"] == 1 and len(state["built"]) == 1 and state["pending"] == []
    first = json.loads((schedule.pools_out / "manifest.json").read_text())
    assert first["counts"]["reconciles"] and (schedule.pools_out / "report.html").is_file()
    report_mtime = (schedule.pools_out / "report.html").stat().st_mtime_ns

    # Nothing new: no build, no verify, no report; the pools are untouched.
    lines.clear()
    run_cycle(schedule_path, log=lines.append)
    assert any("build: nothing new" in line for line in lines), lines
    assert json.loads((schedule.pools_out / "manifest.json").read_text()) == first
    assert (schedule.pools_out / "report.html").stat().st_mtime_ns == report_mtime

    # New files: only their parts are linked into an increment and added with --incremental.
    shutil.copy(CASTS[1], tmp_path / "incoming")
    shutil.copy(CHAT, tmp_path / "incoming")
    lines.clear()
    run_cycle(schedule_path, log=lines.append)
    state = read_state(schedule)
    assert len(state["built"]) == 3, state["built"]  # recordings twice (two cycles), chats once
    assert any("--incremental" in line for line in lines), lines
    after = json.loads((schedule.pools_out / "manifest.json").read_text())
    assert after["counts"]["reconciles"] and after["counts"]["records_in"] > first["counts"]["records_in"]
    assert len(after["inputs"]) == 3
    # Every increment holds parts no other increment holds.
    shas = [
        f["sha256"]
        for p in state["built"]
        for f in json.loads((Path(p) / "manifest.json").read_text())["files"]
    ]
    assert len(shas) == len(set(shas))
    assert (schedule.pools_out / "report.html").stat().st_mtime_ns != report_mtime


def test_a_second_cycle_is_refused_while_one_runs(tmp_path: Path) -> None:
    schedule_path = write_schedule(tmp_path)
    schedule = load_schedule(schedule_path)
    schedule.data.mkdir(parents=True)
    with open(schedule.data / LOCK, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ScheduleError, match="another cycle is running"):
            run_step(schedule_path, "increment")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("data: d\npools_out: p\npools_config: c\n", "nothing to do"),
        ("pools_out: p\npools_config: c\nclean: [{name: a, inputs: x}]\n", "missing field 'data'"),
        ("data: d\npools_out: p\npools_config: c\nclean: [{inputs: x}]\n", "clean[0]: missing field 'name'"),
        ("data: d\npools_out: p\npools_config: c\nclena: []\n", "unknown field(s) clena"),
        (
            "data: d\npools_out: p\npools_config: c\nclean: [{name: a, inputs: x}, {name: a, inputs: y}]\n",
            "repeated: cleaned/a",
        ),
    ],
)
def test_schedule_file_errors_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["schedule", "run", str(path)])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    unknown = CliRunner().invoke(app, ["schedule", "step", "deploy", str(path)])
    assert unknown.exit_code == 2


def test_the_example_schedule_loads() -> None:
    schedule = load_schedule(ROOT / "infra" / "schedules" / "schedule.example.yaml")
    assert Path(schedule.collect[0].tasks).is_file() and Path(schedule.pools_config).is_file()
    assert schedule.clean[0].inputs and Path(schedule.evals[0]).is_dir()
