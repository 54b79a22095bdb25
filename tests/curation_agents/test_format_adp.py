"""ADP standardised records (tests/fixtures/adp/README.md names their origin) through the cleaning run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.formats import Format, adp
from curation_agents.model import CleanConfig, StageFailure
from curation_agents.reader import classify
from schemas import Trajectory, iter_trajectories

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "adp"
FILES = sorted(ROOT.glob("*.json"))


def _record(name: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((ROOT / f"{name}.json").read_text(encoding="utf-8"))[0]
    return record


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Trajectory], Path]:
    out = tmp_path_factory.mktemp("adp") / "out"
    summary = CleanRun([str(f) for f in FILES], out, CleanConfig()).run()
    return summary, {t.metadata["adp_id"]: t for t in iter_trajectories(out)}, out


def test_records_are_classified_as_adp() -> None:
    assert len(FILES) == 3
    assert {classify(_record(f.stem)) for f in FILES} == {Format.ADP}


def test_summary_reconciles(run: tuple[dict[str, Any], dict[str, Trajectory], Path]) -> None:
    summary, cleaned, out = run
    assert summary["records_in"] == 3 == summary["accepted"] + summary["quarantined"]
    assert set(cleaned) == {"toucan_sample_0", "arrow-py__arrow.1d70d009.lm_rewrite__nuzjfyur.l13ggwmx_1"}
    rows = pl.read_parquet(sorted((out / "quarantine" / "parts").glob("*.parquet"))).to_dicts()
    assert [(r["reason"]) for r in rows] == ["too_few_turns"]  # go-browse-wa's cut keeps one action


def test_domains_follow_the_items() -> None:
    assert adp.parse(_record("toucan_1_5m"))["domain"] == "mcp"
    assert adp.parse(_record("swe-smith"))["domain"] == "swe"
    web = adp.parse(_record("go-browse-wa"))
    assert web["domain"] == "web"
    assert web["turns"][0]["action"] == 'click(bid="149")'
    assert web["turns"][0]["action_kind"] == "gui"
    assert web["metadata"]["adp_initial_observation"].startswith("RootWebArea 'OpenStreetMap'")
    assert (web["metadata"]["adp_id"], web["metadata"]["adp_schema_version"]) == ("0", "1.2.0")


def test_actions_and_observations_become_turns() -> None:
    raw = _record("swe-smith")
    parsed = adp.parse(raw)
    assert parsed["task"] == raw["content"][0]["content"]
    first, second = parsed["turns"]
    assert (first["action"], first["action_kind"]) == (raw["content"][1]["content"], "command")
    assert first["observation"] == raw["content"][2]["content"]
    assert first["metadata"]["thought"] == raw["content"][1]["description"]
    assert json.loads(second["action"]) == {
        "name": "str_replace_editor",
        "arguments": raw["content"][3]["kwargs"],
    }
    toucan = adp.parse(_record("toucan_1_5m"))
    assert [t["action_kind"] for t in toucan["turns"]] == ["tool_call", "message"]
    assert toucan["tools"][0]["name"] == "web_search_exa"


def test_unknown_item_class_is_quarantined_with_its_index() -> None:
    raw = _record("toucan_1_5m")
    raw["content"].insert(1, {"class_": "audio_observation", "content": "x"})
    with pytest.raises(StageFailure, match=r"content\[1\]: ADP class_ 'audio_observation'"):
        adp.parse(raw)
