"""`worldline export atif`: every document follows ATIF-v1.7's rules (tests/helpers/atif_rules.py, the
specification's and harbor's model's constraints in our own code; harbor's own model too with
ATIF_MODEL_ROOT), and ours -> ATIF -> ours keeps every field, on any trajectory (Hypothesis) and on
real cleaned traces."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from curation_agents.clean_run import CleanRun
from curation_agents.formats import atif
from curation_agents.model import CleanConfig
from pipelines.interchange.atif import file_name, trajectory_to_atif
from schemas import Trajectory, iter_trajectories
from tests.helpers.atif_rules import assert_valid_atif
from tests.helpers.strategies import trajectories
from worldline.cli import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

runner = CliRunner()


def _assert_turns_kept(parsed_turns: list[dict[str, Any]], traj: Trajectory) -> None:
    assert len(parsed_turns) == len(traj.turns)
    for raw, turn in zip(parsed_turns, traj.turns, strict=True):
        assert (raw["action"], raw["action_kind"], raw.get("tool_name")) == (
            turn.action.text,
            turn.action.kind.value,
            turn.action.tool_name,
        )
        assert (raw["observation"], raw.get("observation_format"), raw.get("is_error")) == (
            turn.observation.text,
            turn.observation.format.value,
            turn.observation.is_error,
        )
        assert (raw.get("exit_code"), raw.get("duration_s")) == (turn.exit_code, turn.duration_s)
        started = raw.get("started_at")
        assert (datetime.fromisoformat(started) if started else None) == turn.started_at
        meta = dict(raw.get("metadata") or {})
        assert meta.pop("state_changed", None) == turn.state_changed
        assert meta == turn.metadata


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trajectories)
def test_any_trajectory_is_valid_atif_and_reads_back_whole(traj: Trajectory) -> None:
    doc = assert_valid_atif(trajectory_to_atif(traj))
    assert doc["schema_version"] == "ATIF-v1.7" and doc["trajectory_id"] == traj.id
    assert [s["step_id"] for s in doc["steps"]] == list(range(1, len(doc["steps"]) + 1))
    parsed = atif.parse(doc)
    assert parsed["task"] == traj.task
    assert parsed["tools"] == [t.to_json() for t in traj.action_space.tools]
    assert (parsed["agent"], parsed["model"]) == (traj.source.agent, traj.source.model)
    assert (parsed["domain"], parsed["status"]) == (traj.domain.value, traj.status.value)
    assert parsed.get("status_reason") == traj.status_reason
    meta = parsed["metadata"]
    assert (meta["initial_state"], meta["demonstrations"], meta["simulation_instruction"]) == (
        traj.initial_state,
        traj.demonstrations,
        traj.simulation_instruction,
    )
    own = meta["worldline"]
    assert own["id"] == traj.id and Trajectory.from_json({**traj.to_json(), "source": own["source"]}) == traj
    system = traj.metadata.get("source_system_prompt")
    if isinstance(system, str) and system:
        assert parsed["system_prompt"] == system
        assert {**own["metadata"], "source_system_prompt": system} == traj.metadata
    else:
        assert own["metadata"] == traj.metadata
    _assert_turns_kept(parsed["turns"], traj)


def test_reasoning_thought_and_calls_use_atif_fields() -> None:
    """The model's reasoning, thought and tool call are ATIF's own fields, not only worldline's extra."""
    traj = Trajectory.from_json(
        {
            "id": "wl-1",
            "domain": "mcp",
            "source": {"kind": "public", "name": "t", "agent": "fast-agent", "model": "m"},
            "task": "Inspect the workspace",
            "turns": [
                {
                    "action": {
                        "kind": "tool_call",
                        "text": '{"arguments": {"command": "pwd"}, "name": "shell"}',
                    },
                    "observation": {"text": "/workspace", "format": "text"},
                    "metadata": {"thought": "I will look.", "reasoning": "Use the shell."},
                }
            ],
        }
    )
    (step,) = [s for s in trajectory_to_atif(traj)["steps"] if s["source"] == "agent"]
    assert (step["message"], step["reasoning_content"]) == ("I will look.", "Use the shell.")
    assert step["tool_calls"][0]["function_name"] == "shell"
    assert step["tool_calls"][0]["arguments"] == {"command": "pwd"}
    assert step["observation"]["results"][0]["content"] == "/workspace"
    assert step["extra"]["worldline"]["metadata"] == {}


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real ATIF files and harbor job folders, cleaned into a dataset."""
    out = tmp_path_factory.mktemp("atif-export") / "cleaned"
    summary = CleanRun(
        [str(FIXTURES / "atif"), str(FIXTURES / "harbor" / "jobs")], out, CleanConfig(min_turns=1)
    ).run()
    assert summary["accepted"] >= 5, summary
    return out


def _reclean(folder: Path, out: Path) -> dict[str, Trajectory]:
    summary = CleanRun([str(folder)], out, CleanConfig(min_turns=1)).run()
    assert summary["records_in"] == summary["accepted"] + summary["quarantined"]
    back = {str(t.metadata["worldline"]["id"]): t for t in iter_trajectories(out)}
    assert len(back) == summary["accepted"]
    return back


def test_export_folder_validates_and_cleans_back_to_the_same_trajectories(
    cleaned: Path, tmp_path: Path
) -> None:
    result = runner.invoke(
        app, ["export", "atif", str(cleaned), "--out", str(tmp_path / "atif"), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    originals = {t.id: t for t in iter_trajectories(cleaned)}
    files = sorted((tmp_path / "atif").glob("*.json"))
    assert sorted(p.name for p in files) == sorted(file_name(i) for i in originals)
    for path in files:
        assert_valid_atif(json.loads(path.read_text(encoding="utf-8")))
    back = _reclean(tmp_path / "atif", tmp_path / "back")
    assert back.keys() == originals.keys()
    for tid, original in originals.items():
        again = back[tid]
        assert (again.task, again.domain, again.status, again.status_reason) == (
            original.task,
            original.domain,
            original.status,
            original.status_reason,
        )
        assert again.action_space.tools == original.action_space.tools
        assert (again.source.agent, again.source.model, again.source.collected_at) == (
            original.source.agent,
            original.source.model,
            original.source.collected_at,
        )
        assert [t.to_json() for t in again.turns] == [t.to_json() for t in original.turns]
        assert again.metadata["worldline"]["metadata"] == {
            k: v for k, v in original.metadata.items() if k != "source_system_prompt"
        }
        assert again.metadata.get("source_system_prompt") == original.metadata.get("source_system_prompt")


def test_export_jsonl_holds_one_valid_document_per_line(cleaned: Path, tmp_path: Path) -> None:
    out = tmp_path / "atif.jsonl"
    result = runner.invoke(app, ["export", "atif", str(cleaned), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    lines = out.read_text(encoding="utf-8").splitlines()
    ids = {t.id for t in iter_trajectories(cleaned)}
    assert {assert_valid_atif(json.loads(line))["trajectory_id"] for line in lines} == ids and len(
        lines
    ) == len(ids)
    assert f"wrote {len(ids)} ATIF trajectories" in result.output


def test_export_of_no_dataset_fails_with_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["export", "atif", str(tmp_path / "missing"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and "error:" in result.output and not (tmp_path / "o").exists()
