"""Harbor job folders (tests/fixtures/harbor/README.md names their origin), cleaned whole through the
cleaning run: one record per trial trajectory, the trial's other files and the job's files read with
it, and a trial without a trajectory quarantined with its exception."""

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
from pipelines.benchmarks_exclusion import ExclusionMatcher
from schemas import ActionKind, Domain, Trajectory, TrajectoryStatus, iter_trajectories

JOBS = Path(__file__).resolve().parents[1] / "fixtures" / "harbor" / "jobs"
TERMINUS = JOBS / "terminus2-simple-daytona" / "030_amerkurev__doku__step17__sho__8P2qKZK"
SILENT = JOBS / "2026-02-09__12-10-48" / "011_atlassian-api__atlassian-pyt__t9JToEW"
FAILED = JOBS / "2026-02-09__12-10-48" / "011_bourbonut__detroit__step164___Qo6mMkt"


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _key(path: Path) -> str:
    return f"jobs/{path.relative_to(JOBS).as_posix()}#file"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Trajectory], Path]:
    out = tmp_path_factory.mktemp("harbor") / "out"
    summary = CleanRun([str(JOBS)], out, CleanConfig()).run()
    return summary, {str(t.source.uri): t for t in iter_trajectories(out)}, out


def test_trial_trajectories_are_records_and_every_other_file_a_companion() -> None:
    records = {p for p in JOBS.rglob("*") if p.is_file() and sniff(p) == (Format.HARBOR, "trial")}
    assert records == {
        TERMINUS / "agent" / "trajectory.json",
        SILENT / "agent" / "trajectory.json",
        FAILED / "result.json",  # the trial left no trajectory
    }
    others = {p for p in JOBS.rglob("*") if p.is_file()} - records
    # The asciinema cast and mini-swe-agent's own trajectory would be records of their own elsewhere.
    assert TERMINUS / "agent" / "recording.cast" in others
    assert SILENT / "agent" / "mini-swe-agent.trajectory.json" in others
    assert {sniff(p) for p in others} == {(Format.HARBOR, "companion")}


def test_summary_reconciles(run: tuple[dict[str, Any], dict[str, Trajectory], Path]) -> None:
    summary, cleaned, out = run
    assert summary["records_in"] == 3 == summary["accepted"] + summary["quarantined"]
    assert list(cleaned) == [_key(TERMINUS / "agent" / "trajectory.json")]
    rows = pl.read_parquet(sorted((out / "quarantine" / "parts").glob("*.parquet"))).to_dicts()
    exception = _json(FAILED / "result.json")["exception_info"]
    assert {(r["record_key"], r["reason"]) for r in rows} == {
        (_key(SILENT / "agent" / "trajectory.json"), "no_turns"),  # the agent never answered
        (_key(FAILED / "result.json"), "no_turns"),
    }
    (failed,) = [r for r in rows if r["record_key"] == _key(FAILED / "result.json")]
    assert exception["exception_type"] in failed["detail"] and "no agent/trajectory.json" in failed["detail"]


def test_a_trial_keeps_its_provenance_and_steps(
    run: tuple[dict[str, Any], dict[str, Trajectory], Path],
) -> None:
    _, cleaned, _ = run
    traj = cleaned[_key(TERMINUS / "agent" / "trajectory.json")]
    result = _json(TERMINUS / "result.json")
    doc = _json(TERMINUS / "agent" / "trajectory.json")
    assert traj.domain == Domain.TERMINAL and traj.metadata["format"] == Format.HARBOR
    assert traj.metadata["benchmark"] == result["source"]
    assert traj.metadata["task_id"] == result["task_name"]
    assert traj.metadata["trial_name"] == result["trial_name"] == TERMINUS.name
    assert traj.metadata["harbor_job"] == TERMINUS.parent.name
    assert traj.metadata["reward"] == result["verifier_result"]["rewards"]["reward"]
    assert traj.metadata["session_id"] == doc["session_id"]
    assert traj.metadata["schema_version"] == doc["schema_version"] == "ATIF-v1.6"
    assert traj.metadata["atif_agent_extra"] == doc["agent"]["extra"]
    assert traj.metadata["final_metrics"] == doc["final_metrics"]
    assert (traj.source.agent, traj.source.model) == (doc["agent"]["name"], doc["agent"]["model_name"])
    # Harbor's AgentTimeoutError cut the run short.
    assert result["exception_info"]["exception_type"] == "AgentTimeoutError"
    assert traj.status == TrajectoryStatus.TRUNCATED
    assert traj.status_reason == result["exception_info"]["exception_message"]
    steps = [s for s in doc["steps"] if s["source"] == "agent"]
    assert [t.action.kind for t in traj.turns] == [ActionKind.KEYSTROKES] * len(steps)
    for turn, step in zip(traj.turns, steps, strict=True):
        assert json.loads(turn.action.text) == [c["arguments"] for c in step["tool_calls"]]
        assert turn.metadata["atif_metrics"] == step["metrics"]
        assert turn.metadata["model_name"] == step["model_name"]


def test_the_benchmark_is_matched_by_the_exclusion_list(
    run: tuple[dict[str, Any], dict[str, Trajectory], Path],
) -> None:
    """A harbor dataset named like a held-out benchmark is excluded through the `benchmark` key."""
    _, cleaned, _ = run
    (traj,) = cleaned.values()
    matcher = ExclusionMatcher(("terminal-bench-2.0",))
    assert matcher.match(traj) is None  # this job ran a private dataset ("sample_simple")
    traj.metadata["benchmark"] = "terminal-bench@2.0"  # what a `harbor run -d terminal-bench@2.0` trial says
    assert matcher.match(traj) is not None
