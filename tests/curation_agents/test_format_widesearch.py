"""WideSearch response rows (tests/fixtures/widesearch/README.md: written with WideSearch's own writer
classes), cleaned through the cleaning run; the source is read here with json alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.model import CleanConfig
from pipelines.benchmarks_exclusion import DEFAULT_EXCLUDED, ExclusionMatcher
from schemas import Domain, Trajectory, iter_trajectories

FILE = Path(__file__).resolve().parents[1] / "fixtures" / "widesearch" / "gpt-4.1_ws_en_001_0_response.jsonl"


def _row() -> dict[str, Any]:
    (line,) = FILE.read_text(encoding="utf-8").splitlines()
    row: dict[str, Any] = json.loads(line)
    return row


def _clean(paths: list[Path], out: Path) -> tuple[dict[str, Any], list[Trajectory]]:
    summary = CleanRun([str(p) for p in paths], out, CleanConfig()).run()
    assert summary["records_in"] == summary["accepted"] + summary["quarantined"]
    return summary, list(iter_trajectories(out))


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory: pytest.TempPathFactory) -> Trajectory:
    summary, trajs = _clean([FILE], tmp_path_factory.mktemp("widesearch") / "out")
    assert summary["records_in"] == 1 == summary["accepted"]
    (traj,) = trajs
    return traj


def test_tool_calls_and_answer_become_turns(cleaned: Trajectory) -> None:
    row = _row()
    steps = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
    calls = [(c, r) for s in steps for c, r in zip(s["tool_calls"], s["tool_call_results"], strict=True)]
    assert len(cleaned.turns) == len(calls) + 1
    for t, (call, result) in zip(cleaned.turns, calls, strict=False):
        args = call["arguments"] if isinstance(call["arguments"], dict) else json.loads(call["arguments"])
        assert json.loads(t.action.text) == {"name": call["tool_name"], "arguments": args}
        assert t.action.tool_name == call["tool_name"] and t.action.kind.value == "tool_call"
        expected = result["content"] if result["content"] is not None else result["error_marker"]["message"]
        assert t.observation.text == expected
        assert t.observation.is_error is (result["content"] is None)
    final = cleaned.turns[-1]
    assert (
        final.action.kind.value == "message" and final.action.text == row["response"] == steps[-1]["content"]
    )
    assert cleaned.turns[0].metadata["reasoning"] == steps[0]["reasoning_content"]
    assert cleaned.turns[0].metadata["thought"] == steps[0]["content"]


def test_provenance_names_the_benchmark(cleaned: Trajectory) -> None:
    row = _row()
    assert cleaned.domain == Domain.SEARCH
    assert cleaned.task == row["messages"][0]["content"]
    assert cleaned.metadata["benchmark"] == "WideSearch"
    assert cleaned.metadata["task_id"] == row["instance_id"]
    assert cleaned.metadata["trial_idx"] == row["trial_idx"]
    assert cleaned.status.value == "complete"
    assert {t.name for t in cleaned.action_space.tools} == {"search_global", "text_browser_view"}
    hit = ExclusionMatcher(DEFAULT_EXCLUDED).match(cleaned)
    assert hit is not None and hit[0] == "widesearch"


def test_unmappable_rows_are_quarantined_with_a_reason(tmp_path: Path) -> None:
    row = _row()
    orphan = json.loads(json.dumps(row))
    orphan["messages"][1]["content"]["tool_call_results"] = []  # a call without its result
    failed = json.loads(json.dumps(row))
    failed["messages"] = [
        row["messages"][0],
        {
            "role": "assistant",
            "content": {
                **row["messages"][1]["content"],
                "tool_calls": [],
                "tool_call_results": [],
                "error_marker": {"message": "No output from model."},
            },
        },
    ]
    path = tmp_path / "m_ws_en_001_0_response.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (row, orphan, failed)) + "\n")
    summary, trajs = _clean([path], tmp_path / "out")
    assert (summary["records_in"], summary["accepted"], summary["quarantined"]) == (3, 1, 2)
    rows = pl.read_parquet(sorted((tmp_path / "out" / "quarantine" / "parts").glob("*.parquet"))).to_dicts()
    assert sorted((r["locator"], r["reason"]) for r in rows) == [
        ("line-2", "parse_error"),
        ("line-3", "no_turns"),
    ]
