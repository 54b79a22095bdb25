"""`worldline export adp` against the Agent Data Protocol's own rules, and ours -> ADP -> ours.

Every record is checked against the rules of ADP's pydantic schema 1.5.0 (neulab/agent-data-protocol,
`schema/trajectory.py` and the action and observation models beside it): the fields each item class
declares and nothing else, their types, `source` and `language` values ADP accepts, the tool-call
links `Trajectory.validate_tool_call_links` enforces and `available_code_languages` equal to the
code actions' languages. ADP's own models are not vendored here (the repository publishes no
licence); with ADP_SCHEMA_ROOT naming a checkout of it (the folder holding `schema/`), every record
is also validated with its `schema.trajectory.Trajectory.model_validate`.

The round trips: any trajectory (Hypothesis), and real cleaned trajectories of the ADP, terminal, MCP,
SWE and web fixtures through the CLI and `worldline clean`, come back whole; and the ADP items alone
(without `details.worldline`) give back every field ADP has.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from curation_agents.clean_run import CleanRun
from curation_agents.formats import adp
from curation_agents.model import CleanConfig
from pipelines.interchange.adp import CODE_LANGUAGES, EXTENSION, trajectory_to_adp
from schemas import Trajectory, iter_trajectories
from tests.helpers.strategies import trajectories
from worldline.cli import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SOURCES = ["adp", "public", "mcp", "terminal", "atif"]
"""Fixture folders whose cleaned trajectories are exported: ADP's own samples (MCP, SWE), WebArena
axtree trajectories (web), chat and SWE-agent logs, MCP server logs, terminal casts, ATIF files."""

_ACTION = {"tool_call_id": str, "reasoning_content": str, "reward": (int, float)}
_OBSERVATION = {"tool_call_id": str, "reward": (int, float)}
FIELDS: dict[str, tuple[dict[str, Any], set[str]]] = {
    "api_action": (
        {**_ACTION, "class_": str, "function": str, "kwargs": dict, "description": str},
        {"function", "kwargs"},
    ),
    "code_action": (
        {**_ACTION, "class_": str, "language": str, "content": str, "description": str},
        {"language", "content", "description"},
    ),
    "message_action": (
        {"reasoning_content": str, "reward": (int, float), "class_": str, "content": str, "description": str},
        {"content"},
    ),
    "text_observation": (
        {**_OBSERVATION, "class_": str, "content": str, "name": str, "source": str},
        {"content", "source"},
    ),
    "web_observation": (
        {
            **_OBSERVATION,
            "class_": str,
            "html": str,
            "axtree": str,
            "url": str,
            "image_observation": dict,
            "viewport_size": list,
        },
        {"html", "axtree", "url", "image_observation", "viewport_size"},
    ),
}
"""Per item class: each field ADP's model declares with its JSON type (None allowed where the model
says `| None`), and the fields it requires."""
OPTIONAL_NONE = {"description", "name", "html", "axtree", "url", "image_observation", "viewport_size"}
SOURCES_ALLOWED = {"user", "agent", "environment"}


def _adp_model() -> Any:
    root = os.environ.get("ADP_SCHEMA_ROOT")
    if not root:
        return None
    sys.path.insert(0, root)
    from schema.trajectory import Trajectory as AdpTrajectory  # type: ignore[import-not-found]

    return AdpTrajectory


ADP_MODEL = _adp_model()


def assert_valid_adp(record: dict[str, Any]) -> None:
    """ADP 1.5.0's rules on one record, as it is on disk; with ADP_SCHEMA_ROOT, ADP's model too."""
    record = json.loads(json.dumps(record, ensure_ascii=False))
    assert set(record) <= {
        "schema_version",
        "id",
        "content",
        "available_custom_tools",
        "available_code_languages",
        "details",
    }
    assert record["schema_version"] == "1.5.0" and isinstance(record["id"], str)
    assert isinstance(record["details"], dict) and isinstance(record["content"], list)
    for item in record["content"]:
        types, required = FIELDS[item["class_"]]
        assert set(item) <= set(types) and required <= set(item), item
        for key, value in item.items():
            assert isinstance(value, types[key]) or (value is None and key in OPTIONAL_NONE), (key, value)
            if key == "reward":
                assert not isinstance(value, bool)
        if item["class_"] == "text_observation":
            assert item["source"] in SOURCES_ALLOWED
        if item["class_"] == "code_action":
            assert item["language"] in CODE_LANGUAGES
        if item["class_"] == "web_observation":
            image, size = item["image_observation"], item["viewport_size"]
            assert image is None or (
                image["class_"] == "image_observation"
                and isinstance(image["content"], str)
                and image["source"] in SOURCES_ALLOWED
            )
            assert size is None or (len(size) == 2 and all(type(v) is int for v in size))
    # Trajectory.validate_tool_call_links
    content, calls, answered = record["content"], {}, set()
    for index, item in enumerate(content):
        call_id = item.get("tool_call_id")
        following = content[index + 1] if index + 1 < len(content) else None
        if item["class_"] in ("api_action", "code_action"):
            if following is not None and following["class_"].endswith("_observation"):
                assert call_id is not None, index
            if call_id is not None:
                assert call_id not in calls
                calls[call_id] = index
        elif item["class_"] == "message_action":
            assert call_id is None
        elif call_id is not None:
            assert call_id in calls and call_id not in answered
            answered.add(call_id)
    assert answered == set(calls)
    languages = {i["language"] for i in content if i["class_"] == "code_action"}
    assert record.get("available_code_languages", sorted(languages) or None) == (sorted(languages) or None)
    functions = {i["function"] for i in content if i["class_"] == "api_action"}
    assert functions <= set(record.get("available_custom_tools") or functions)
    if ADP_MODEL is not None:
        ADP_MODEL.model_validate(record)


def _assert_read_back(parsed: dict[str, Any], traj: Trajectory) -> None:
    assert (parsed["task"], parsed["domain"], parsed["status"]) == (
        traj.task,
        traj.domain.value,
        traj.status.value,
    )
    assert (parsed["status_reason"], parsed["model"], parsed["agent"]) == (
        traj.status_reason,
        traj.source.model,
        traj.source.agent,
    )
    collected = traj.source.collected_at
    assert parsed["collected_at"] == (None if collected is None else collected.isoformat())
    assert parsed["tools"] == [t.to_json() for t in traj.action_space.tools]
    assert len(parsed["turns"]) == len(traj.turns)
    for raw, turn in zip(parsed["turns"], traj.turns, strict=True):
        assert (raw["action"], raw["action_kind"], raw["tool_name"]) == (
            turn.action.text,
            turn.action.kind.value,
            turn.action.tool_name,
        )
        assert (raw["observation"], raw["observation_format"], raw["is_error"]) == (
            turn.observation.text,
            turn.observation.format.value,
            turn.observation.is_error,
        )
        assert (raw["exit_code"], raw["duration_s"]) == (turn.exit_code, turn.duration_s)
        started = raw["started_at"]
        assert (datetime.fromisoformat(started) if started else None) == turn.started_at
        meta = dict(raw["metadata"])
        assert meta.pop("state_changed", None) == turn.state_changed
        assert meta == turn.metadata


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trajectories)
def test_any_trajectory_is_valid_adp_and_reads_back_whole(traj: Trajectory) -> None:
    record = trajectory_to_adp(traj)
    assert_valid_adp(record)
    if not traj.turns:  # no action: the reader quarantines the record (ADP holds no turn)
        return
    parsed = adp.parse(json.loads(json.dumps(record, ensure_ascii=False)))
    _assert_read_back(parsed, traj)
    for key in ("initial_state", "demonstrations", "simulation_instruction"):
        if key not in traj.metadata:  # the cleaner takes these from the metadata
            assert parsed["metadata"].get(key) == getattr(traj, key)


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("adp-schema") / "cleaned"
    summary = CleanRun([str(FIXTURES / name) for name in SOURCES], out, CleanConfig(min_turns=1)).run()
    assert summary["records_in"] == summary["accepted"] + summary["quarantined"]
    return out


def test_cleaned_trajectories_of_every_domain_export_as_valid_adp(cleaned: Path, tmp_path: Path) -> None:
    out = tmp_path / "adp.jsonl"
    result = CliRunner().invoke(app, ["export", "adp", str(cleaned), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    originals = {t.id: t for t in iter_trajectories(cleaned)}
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == list(originals)
    assert {t.domain.value for t in originals.values()} >= {"mcp", "swe", "terminal", "web"}
    classes = set()
    for record in records:
        assert_valid_adp(record)
        classes |= {i["class_"] for i in record["content"]}
        _assert_read_back(adp.parse(record), originals[record["id"]])
    assert classes == set(FIELDS)


CLEANER_COUNTS = frozenset({"empty_actions_stripped", "retry_pairs_skipped", "redaction_kinds"})
"""Metadata each `worldline clean` run writes anew (curation_agents/score.py, clean_run.py)."""


def _key(traj: Trajectory) -> str:
    """What names a trajectory across a clean (which gives the read-back one a new id)."""
    actions = [t.action.text for t in traj.turns]
    return json.dumps([traj.task, actions, traj.source.agent, traj.source.model], ensure_ascii=False)


def test_clean_reads_the_export_back_to_the_same_trajectories(cleaned: Path, tmp_path: Path) -> None:
    out = tmp_path / "adp.jsonl"
    result = CliRunner().invoke(app, ["export", "adp", str(cleaned), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    originals = list(iter_trajectories(cleaned))
    summary = CleanRun([str(out)], tmp_path / "back", CleanConfig(min_turns=1)).run()
    assert summary["records_in"] == len(originals) == summary["accepted"]
    back = list(iter_trajectories(tmp_path / "back"))
    assert sorted(map(_key, back)) == sorted(map(_key, originals))
    by_key = {_key(t): t for t in back}
    for original in originals:
        again = by_key[_key(original)]
        assert (again.domain, again.status, again.status_reason) == (
            original.domain,
            original.status,
            original.status_reason,
        )
        assert again.action_space.tools == original.action_space.tools
        assert again.source.collected_at == original.source.collected_at
        assert (again.initial_state, again.demonstrations, again.simulation_instruction) == (
            original.initial_state,
            original.demonstrations,
            original.simulation_instruction,
        )
        assert [t.to_json() for t in again.turns] == [t.to_json() for t in original.turns]
        kept = {k: v for k, v in original.metadata.items() if k not in CLEANER_COUNTS}
        assert {k: again.metadata.get(k) for k in kept} == kept


def test_adp_items_alone_give_back_every_field_adp_has(cleaned: Path) -> None:
    """Without `details.worldline`, what an ADP consumer sees is what the reader gives back."""
    for traj in iter_trajectories(cleaned):
        record = trajectory_to_adp(traj)
        record["details"].pop(EXTENSION)
        parsed = adp.parse(json.loads(json.dumps(record, ensure_ascii=False)))
        assert parsed["task"] == traj.task == record["content"][0]["content"]
        assert parsed["metadata"]["adp_id"] == traj.id
        assert [t["name"] for t in parsed["tools"]] == record.get("available_custom_tools", [])
        actions = [i for i in record["content"] if i["class_"].endswith("_action")]
        assert len(actions) == len(parsed["turns"]) == len(traj.turns)
        observations: dict[int, list[dict[str, Any]]] = {}
        turn_index = -1
        for item in record["content"][1:]:
            if item["class_"].endswith("_action"):
                turn_index += 1
            elif turn_index >= 0:
                observations.setdefault(turn_index, []).append(item)
        for index, (item, raw, turn) in enumerate(zip(actions, parsed["turns"], traj.turns, strict=True)):
            meta = raw["metadata"]
            assert meta.get("thought") == (item["description"] or None)
            assert meta.get("reasoning") == (item.get("reasoning_content") or None)
            assert meta.get("reward") == item.get("reward")
            assert meta.get("tool_call_id") == item.get("tool_call_id")
            if item["class_"] == "api_action":
                assert raw["tool_name"] == item["function"]
                if raw["action_kind"] == "tool_call":
                    assert json.loads(raw["action"]) == {
                        "name": item["function"],
                        "arguments": item["kwargs"],
                    }
                else:  # a web record: BrowserGym's call, as ADP's web datasets write it
                    assert raw["action"] == turn.action.text
            else:
                assert raw["action"] == item["content"] == turn.action.text
            if item["class_"] == "code_action":
                assert meta["language"] == item["language"]
            shown = observations.get(index, [])
            assert raw["observation"] == (turn.observation.text if shown else "")
            for obs in shown:
                assert obs.get("tool_call_id") == item.get("tool_call_id")
                if obs["class_"] == "web_observation":
                    assert raw["observation_format"] == ("axtree" if obs["axtree"] is not None else "html")
                    assert meta.get("observation_url") == obs["url"]


def test_web_fields_and_observation_extras_are_adp_fields() -> None:
    traj = Trajectory.from_json(
        {
            "id": "wl-web-1",
            "domain": "web",
            "source": {"kind": "public", "name": "t"},
            "task": "Open the admin dashboard",
            "turns": [
                {
                    "action": {"kind": "gui", "text": "click(bid='149', button='left')"},
                    "observation": {"text": "RootWebArea 'Dashboard'", "format": "axtree"},
                    "metadata": {
                        "observation_url": "http://luma.com/admin",
                        "observation_viewport_size": [1280, 720],
                        "observation_screenshot": "shots/0.png",
                        "observation_reward": 0.25,
                    },
                },
                {
                    "action": {"kind": "code", "text": "fn main() {}"},
                    "observation": {"text": "ok", "format": "text"},
                    "metadata": {"language": "rust", "observation_name": "cargo"},
                },
                {
                    "action": {"kind": "command", "text": "ls"},
                    "observation": {"text": "a b", "format": "terminal"},
                    "metadata": {"language": "fish"},
                },
            ],
        }
    )
    record = trajectory_to_adp(traj)
    assert_valid_adp(record)
    click, page, code, output, command = record["content"][1:6]
    assert (click["function"], click["kwargs"]) == ("click", {"bid": "'149'", "button": "'left'"})
    assert (page["url"], page["viewport_size"], page["reward"]) == (
        "http://luma.com/admin",
        [1280, 720],
        0.25,
    )
    assert page["image_observation"]["content"] == "shots/0.png"
    assert (code["language"], output["name"], command["language"]) == ("rust", "cargo", "shell")
    assert record["available_code_languages"] == ["rust", "shell"]
    _assert_read_back(adp.parse(json.loads(json.dumps(record))), traj)


def test_the_rules_accept_adp_own_sample() -> None:
    """The checks above pass on a whole record ADP's toucan_1_5m converter wrote (tests/fixtures/adp)."""
    (record,) = json.loads((FIXTURES / "adp" / "toucan_1_5m.json").read_text(encoding="utf-8"))
    assert_valid_adp(record)
    broken = json.loads(json.dumps(record))
    broken["content"][2].pop("tool_call_id")
    with pytest.raises(AssertionError):
        assert_valid_adp(broken)
