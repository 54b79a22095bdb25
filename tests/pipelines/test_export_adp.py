"""`worldline export adp`: cleaned ADP fixtures -> ADP -> the cleaner again keeps every field ADP has."""

from __future__ import annotations

import json
from pathlib import Path

from curation_agents.clean_run import CleanRun
from curation_agents.formats import adp
from curation_agents.model import CleanConfig
from pipelines.interchange.adp import trajectory_to_adp, write_adp
from schemas import iter_trajectories

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "adp"
ITEM_KEYS = {
    "api_action": {
        "reasoning_content",
        "reward",
        "class_",
        "function",
        "kwargs",
        "description",
        "tool_call_id",
    },
    "code_action": {
        "reasoning_content",
        "reward",
        "class_",
        "language",
        "content",
        "description",
        "tool_call_id",
    },
    "message_action": {"reasoning_content", "reward", "class_", "content", "description"},
    "text_observation": {"class_", "content", "name", "source", "tool_call_id"},
    "web_observation": {
        "class_",
        "html",
        "axtree",
        "url",
        "image_observation",
        "viewport_size",
        "tool_call_id",
    },
}
"""The fields ADP's pydantic models declare per class (schema/action/*.py, schema/observation/*.py)."""


def test_round_trip_keeps_every_adp_field(tmp_path: Path) -> None:
    first = tmp_path / "first"
    CleanRun([str(ROOT / "toucan_1_5m.json"), str(ROOT / "swe-smith.json")], first, CleanConfig()).run()
    originals = list(iter_trajectories(first))
    assert len(originals) == 2
    out = tmp_path / "adp.jsonl"
    report = write_adp(originals, out)
    assert report.trajectories == 2
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    for record in records:
        assert adp.looks_like(record)
        calls = [
            i.get("tool_call_id") for i in record["content"] if i["class_"] in ("api_action", "code_action")
        ]
        results = [
            i.get("tool_call_id")
            for i in record["content"]
            if i["class_"].endswith("observation") and "tool_call_id" in i
        ]
        assert calls == results and len(set(calls)) == len(calls)  # ADP's tool-call link rule
        for item in record["content"]:
            assert set(item) <= ITEM_KEYS[item["class_"]], item["class_"]
    for original, record in zip(originals, records, strict=True):
        back = adp.parse(record)
        assert back["task"] == original.task
        assert back["domain"] == original.domain.value
        assert [(t["action"], t["action_kind"], t["observation"]) for t in back["turns"]] == [
            (t.action.text, t.action.kind.value, t.observation.text) for t in original.turns
        ]
        assert [t["metadata"].get("thought") for t in back["turns"]] == [
            t.metadata.get("thought") for t in original.turns
        ]


def test_code_languages_match_the_code_actions(tmp_path: Path) -> None:
    CleanRun([str(ROOT / "swe-smith.json")], tmp_path / "o", CleanConfig()).run()
    (traj,) = iter_trajectories(tmp_path / "o")
    record = trajectory_to_adp(traj)
    assert record["available_code_languages"] == ["bash"]
    assert record["schema_version"] == "1.5.0"


def test_cli_exports_a_dataset_and_clean_reads_it_back(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from worldline.cli import app

    CleanRun(
        [str(ROOT / "toucan_1_5m.json"), str(ROOT / "swe-smith.json")], tmp_path / "ds", CleanConfig()
    ).run()
    out = tmp_path / "adp.jsonl"
    result = CliRunner().invoke(
        app, ["export", "adp", str(tmp_path / "ds"), "--out", str(out), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert "wrote 2 ADP records" in result.output
    summary = CleanRun([str(out)], tmp_path / "again", CleanConfig()).run()
    assert summary["records_in"] == 2 == summary["accepted"] + summary["quarantined"]
    assert summary["accepted"] == 2


def test_reasoning_and_reward_travel_in_the_action(tmp_path: Path) -> None:
    CleanRun([str(ROOT / "toucan_1_5m.json")], tmp_path / "o", CleanConfig()).run()
    (traj,) = iter_trajectories(tmp_path / "o")
    traj.turns[0].metadata.update({"reasoning": "compare the sources first", "reward": 0.5})
    record = trajectory_to_adp(traj)
    call = record["content"][1]
    assert (call["reasoning_content"], call["reward"]) == ("compare the sources first", 0.5)
    back = adp.parse(record)["turns"][0]["metadata"]
    assert (back["reasoning"], back["reward"]) == ("compare the sources first", 0.5)
