"""MCPMark task folders (tests/fixtures/mcpmark/README.md names their origin), cleaned through the
cleaning run; the source files are read here with json alone, apart from worldline's reader."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.formats import Format
from curation_agents.formats.mcpmark import tool_observation
from curation_agents.model import CleanConfig
from curation_agents.reader import sniff
from pipelines.benchmarks_exclusion import DEFAULT_EXCLUDED, ExclusionMatcher
from schemas import Domain, Trajectory, iter_trajectories

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "mcpmark"
SDK = ROOT / "mcp_servers/github/official/run-1/easyr1__qwen3_issue_management"
CHAT = ROOT / "mcp_servers/postgres/supabase/run-1/employees__management_structure_analysis"
EMPTY = ROOT / "mcp_servers/postgres/insforge/run-2/security__user_permission_audit"


def _load(folder: Path, name: str) -> Any:
    return json.loads((folder / name).read_text(encoding="utf-8"))


def _uri(folder: Path) -> str:
    return f"{(folder / 'messages.json').relative_to(ROOT).as_posix()}#file"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Trajectory], Path]:
    out = tmp_path_factory.mktemp("mcpmark") / "out"
    summary = CleanRun([str(ROOT / "mcp_servers")], out, CleanConfig()).run()
    return summary, {str(t.source.uri): t for t in iter_trajectories(out)}, out


def test_messages_are_records_and_their_companions_are_not() -> None:
    for folder in (SDK, CHAT, EMPTY):
        assert sniff(folder / "messages.json") == (Format.MCPMARK, "whole")
        assert sniff(folder / "meta.json") == (Format.MCPMARK, "companion")


def test_summary_reconciles_and_the_empty_run_is_quarantined(
    run: tuple[dict[str, Any], dict[str, Trajectory], Path],
) -> None:
    summary, cleaned, out = run
    assert summary["records_in"] == 3 == summary["accepted"] + summary["quarantined"]
    assert set(cleaned) == {_uri(SDK), _uri(CHAT)}
    rows = pl.read_parquet(sorted((out / "quarantine" / "parts").glob("*.parquet"))).to_dicts()
    assert [(r["record_key"], r["reason"]) for r in rows] == [(_uri(EMPTY), "no_turns")]
    assert "State Duplication Error" in rows[0]["detail"]


def test_sdk_items_become_calls_observed_by_the_mcp_convention(
    run: tuple[dict[str, Any], dict[str, Trajectory], Path],
) -> None:
    traj = run[1][_uri(SDK)]
    items = _load(SDK, "messages.json")
    calls = [i for i in items if i.get("type") == "function_call"]
    outputs = {i["call_id"]: i["output"] for i in items if i.get("type") == "function_call_output"}
    assert len(traj.turns) == len(calls) + 1
    for t, call in zip(traj.turns, calls, strict=False):
        assert t.action.kind.value == "tool_call" and t.action.tool_name == call["name"]
        assert json.loads(t.action.text) == {"name": call["name"], "arguments": json.loads(call["arguments"])}
        assert t.metadata["tool_call_id"] == call["call_id"]
        # One content block, written by the convention (compact, keys in the schema's order).
        assert json.loads(t.observation.text) == json.loads(outputs[call["call_id"]])
        assert t.observation.text.startswith('{"type":"text","text":')
    texts = [i["content"][0]["text"] for i in items if i.get("type") == "message"]
    assert traj.turns[0].metadata["thought"] == texts[0]
    assert traj.turns[-1].action.kind.value == "message" and traj.turns[-1].action.text == texts[-1]
    assert traj.task == items[0]["content"]
    assert traj.status.value == "complete"


def test_chat_messages_unwrap_the_whole_tool_result(
    run: tuple[dict[str, Any], dict[str, Trajectory], Path],
) -> None:
    traj = run[1][_uri(CHAT)]
    messages = _load(CHAT, "messages.json")
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in messages if m["role"] == "tool"}
    calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert [t.action.tool_name for t in traj.turns] == [c["function"]["name"] for c in calls]
    assert traj.metadata["source_system_prompt"] == messages[0]["content"]
    assert traj.task == messages[1]["content"]
    unanswered = [c for c in calls if c["id"] not in results]
    assert unanswered  # the harness failed while the last calls ran
    for t, call in zip(traj.turns, calls, strict=True):
        if call in unanswered:
            assert t.observation.text == "" and t.metadata["no_output"] is True
            continue
        result = results[call["id"]]
        (block,) = result["content"]
        assert json.loads(t.observation.text) == block  # the block, not the whole CallToolResult
        assert t.observation.is_error is result["isError"]
    meta = _load(CHAT, "meta.json")
    assert traj.status.value == "env_failure"
    assert traj.status_reason == meta["execution_result"]["error_message"]
    assert traj.metadata["success"] is True


def test_provenance_names_the_benchmark_task_and_model(
    run: tuple[dict[str, Any], dict[str, Trajectory], Path],
) -> None:
    for folder in (SDK, CHAT):
        traj, meta = run[1][_uri(folder)], _load(folder, "meta.json")
        assert traj.domain == Domain.MCP
        assert traj.metadata["benchmark"] == "MCPMark"
        assert traj.metadata["task_id"] == meta["task_name"] == folder.name
        assert traj.metadata["mcp_service"] == meta["mcp"]
        assert traj.metadata["run"] == "run-1"
        assert traj.source.model == meta["model_name"]
        assert traj.metadata["model_version"] == meta["litellm_run_model_name"]
        hit = ExclusionMatcher(DEFAULT_EXCLUDED).match(traj)
        assert hit is not None and hit[0] == "mcpmark"


def test_the_sdk_wrapper_of_a_chat_tool_message_is_unwrapped() -> None:
    # `_convert_to_sdk_format` wraps a LiteLLM tool message's content (the CallToolResult as JSON)
    # in a text block with `annotations` and `meta`: the observation is the result's content.
    tool = next(m for m in _load(CHAT, "messages.json") if m["role"] == "tool")
    wrapped = json.dumps({"type": "text", "text": tool["content"], "annotations": None, "meta": None})
    assert tool_observation(wrapped) == tool_observation(tool["content"])
    assert tool_observation("Error: Tool call 'x' timed out after 60 seconds")[0].startswith("Error: ")


def test_a_messages_file_without_meta_is_not_taken_for_mcpmark(tmp_path: Path) -> None:
    shutil.copy(SDK / "messages.json", tmp_path / "messages.json")
    assert sniff(tmp_path / "messages.json")[0] != Format.MCPMARK


def test_an_output_for_no_call_quarantines_the_run(tmp_path: Path) -> None:
    folder = tmp_path / "run-1" / "easyr1__qwen3_issue_management"
    shutil.copytree(SDK, folder)
    items = _load(SDK, "messages.json")
    (folder / "messages.json").write_text(
        json.dumps([i for i in items if i.get("type") != "function_call"]), encoding="utf-8"
    )
    summary = CleanRun([str(tmp_path / "run-1")], tmp_path / "out", CleanConfig()).run()
    assert (summary["records_in"], summary["accepted"], summary["quarantined"]) == (1, 0, 1)
    assert summary["per_reason"] == {"parse_error": 1}
