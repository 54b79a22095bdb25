"""OSWorld `traj.jsonl` result folders (tests/fixtures/osworld/README.md names their origin), cleaned
whole through the cleaning run: steps read here with json alone, apart from worldline's reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.formats import Format
from curation_agents.model import CleanConfig
from curation_agents.reader import sniff
from pipelines.benchmarks_exclusion import DEFAULT_EXCLUDED, ExclusionMatcher
from schemas import Domain, Trajectory, iter_trajectories

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "osworld"
FILES = sorted(ROOT.rglob("traj.jsonl"))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Trajectory], Path]:
    out = tmp_path_factory.mktemp("osworld") / "out"
    summary = CleanRun([str(ROOT / "results")], out, CleanConfig()).run()
    return summary, {str(t.source.uri): t for t in iter_trajectories(out)}, out


def _uri(path: Path) -> str:
    return f"{path.relative_to(ROOT).as_posix()}#file"


def test_every_file_is_detected_as_osworld() -> None:
    assert len(FILES) == 4
    assert {sniff(p) for p in FILES} == {(Format.OSWORLD, "whole")}


def test_summary_reconciles(run: tuple[dict[str, Any], dict[str, Trajectory], Path]) -> None:
    summary, cleaned, out = run
    assert summary["records_in"] == len(FILES) == summary["accepted"] + summary["quarantined"]
    assert summary["accepted"] == len(cleaned) == 2
    rows = pl.read_parquet(sorted((out / "quarantine" / "parts").glob("*.parquet"))).to_dicts()
    # The one-step runs: a DONE at once, and a run whose runner raised after the first step.
    assert {(r["record_key"], r["reason"]) for r in rows} == {
        (_uri(p), "too_few_turns") for p in FILES if len([s for s in _lines(p) if "step_num" in s]) == 1
    }


def test_steps_become_turns(run: tuple[dict[str, Any], dict[str, Trajectory], Path]) -> None:
    _, cleaned, _ = run
    for path in FILES:
        steps = [s for s in _lines(path) if "step_num" in s]
        traj = cleaned.get(_uri(path))
        if traj is None:
            continue
        assert [t.action.text for t in traj.turns] == [s["action"] for s in steps]
        assert [t.metadata["thought"] for t in traj.turns] == [s["response"] for s in steps]
        assert [t.metadata["screenshot_file"] for t in traj.turns] == [s["screenshot_file"] for s in steps]
        assert [t.metadata["step_num"] for t in traj.turns] == [s["step_num"] for s in steps]
        kinds = {t.action.text: t.action.kind.value for t in traj.turns}
        assert all(kind == ("gui" if text == "WAIT" else "code") for text, kind in kinds.items())
        first = traj.turns[0]
        assert (
            first.started_at is not None
            and first.started_at.strftime("%Y%m%d@%H%M%S") == steps[0]["action_timestamp"]
        )
        assert first.observation.text == "[screenshot of step 1]"


def test_provenance_names_the_benchmark(run: tuple[dict[str, Any], dict[str, Trajectory], Path]) -> None:
    _, cleaned, _ = run
    matcher = ExclusionMatcher(DEFAULT_EXCLUDED)
    for uri, traj in cleaned.items():
        example = uri.split("/")[-2]
        domain = uri.split("/")[-3]
        assert traj.domain == Domain.OS
        assert traj.source.model == "gpt-4o-mini"
        assert traj.metadata["benchmark"] == "OSWorld"
        assert traj.metadata["task_id"] == example and traj.metadata["osworld_domain"] == domain
        assert traj.metadata["action_space"] == "pyautogui"
        assert traj.metadata["observation_type"] == "screenshot"
        # 15 steps and no DONE / FAIL: the runner's step limit ended both.
        assert traj.status.value == "truncated"
        hit = matcher.match(traj)
        assert hit is not None and hit[0] == "osworld-verified"


def test_runner_error_line_ends_the_run_as_env_failure() -> None:
    from curation_agents.formats.osworld import parse_file

    (path,) = [p for p in FILES if any("Error" in s for s in _lines(p))]
    parsed = parse_file(str(path), 1 << 20)
    assert parsed["status"] == "env_failure"
    assert "bytes-like object is required" in str(parsed["status_reason"])
    assert len(parsed["turns"]) == 1


def test_a_line_that_is_no_step_quarantines_the_file(tmp_path: Path) -> None:
    source = next(p for p in FILES if len(_lines(p)) == 15)
    folder = tmp_path / "results" / "pyautogui" / "screenshot" / "gpt-4o-mini" / "chrome" / "x"
    folder.mkdir(parents=True)
    (folder / "traj.jsonl").write_text(source.read_text() + '{"unexpected": 1}\n')
    summary = CleanRun([str(tmp_path / "results")], tmp_path / "out", CleanConfig()).run()
    assert summary["records_in"] == 1 == summary["quarantined"]
    assert summary["per_reason"] == {"parse_error": 1}
