"""Published Toolathlon runs (tests/fixtures/toolathlon/README.md names their origin), cleaned through
the cleaning run; the source files are read here with json alone, apart from worldline's reader."""

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

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "toolathlon" / "trajs"
FILES = sorted(ROOT.glob("*.json"))
ANSWERLESS = "deepseek-v3.2-exp_sales-accounting.json"


def _run(path: Path) -> dict[str, Any]:
    run: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return run


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Trajectory], Path]:
    out = tmp_path_factory.mktemp("toolathlon") / "out"
    summary = CleanRun([str(ROOT)], out, CleanConfig()).run()
    return summary, {Path(str(t.source.uri).split("#")[0]).name: t for t in iter_trajectories(out)}, out


def test_every_file_is_detected_as_toolathlon() -> None:
    assert len(FILES) == 4
    assert {sniff(p) for p in FILES} == {(Format.TOOLATHLON, "whole")}


def test_summary_reconciles(cleaned: tuple[dict[str, Any], dict[str, Trajectory], Path]) -> None:
    summary, trajs, out = cleaned
    assert summary["records_in"] == len(FILES) == summary["accepted"] + summary["quarantined"]
    assert set(trajs) == {p.name for p in FILES} - {ANSWERLESS}
    rows = pl.read_parquet(sorted((out / "quarantine" / "parts").glob("*.parquet"))).to_dicts()
    # An answer without a single call is one turn: the paper's minimum is two.
    assert [(Path(r["record_key"].split("#")[0]).name, r["reason"]) for r in rows] == [
        (ANSWERLESS, "too_few_turns")
    ]


def test_calls_become_turns_observed_by_the_mcp_convention(
    cleaned: tuple[dict[str, Any], dict[str, Trajectory], Path],
) -> None:
    for name, traj in cleaned[1].items():
        messages = _run(ROOT / name)["messages"]
        results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
        calls = {c["id"]: c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []}
        call_turns = [t for t in traj.turns if t.action.kind.value == "tool_call"]
        ids = [t.metadata["tool_call_id"] for t in call_turns]
        # In source order; the cleaner's retry rule skips calls the SDK refused (`Tool X not found`).
        assert ids == [i for i in calls if i in ids]
        assert len(calls) - len(ids) == traj.metadata["retry_pairs_skipped"]
        for t in call_turns:
            call, source = calls[t.metadata["tool_call_id"]], results[t.metadata["tool_call_id"]]
            assert t.action.tool_name == call["function"]["name"]
            if "[REDACTED" not in t.action.text:
                assert json.loads(t.action.text)["arguments"] == json.loads(call["function"]["arguments"])
            if "[REDACTED" in t.observation.text:
                continue  # an e-mail address in the answer: redacted (tests of redaction cover it)
            if source.startswith(("{", "[")):
                # The SDK's text of the MCP result: the same blocks, written by the convention.
                assert json.loads(t.observation.text) == json.loads(source)
                assert t.observation.text.startswith(('{"type":"text"', '[{"type":"text"'))
            else:
                assert t.observation.text == source  # Toolathlon's local tools answer in plain text
        assert traj.task == messages[0]["content"]


def test_block_arrays_stay_arrays(cleaned: tuple[dict[str, Any], dict[str, Trajectory], Path]) -> None:
    traj = cleaned[1]["deepseek-v3.2-exp_git-bug-hunt.json"]
    arrays = [t for t in traj.turns if t.observation.text.startswith("[")]
    assert arrays and all(isinstance(json.loads(t.observation.text), list) for t in arrays)


def test_status_and_provenance(cleaned: tuple[dict[str, Any], dict[str, Trajectory], Path]) -> None:
    for name, traj in cleaned[1].items():
        run = _run(ROOT / name)
        model, task = name.removesuffix(".json").split("_", 1)
        assert traj.domain == Domain.MCP
        assert traj.source.model == model == "deepseek-v3.2-exp"
        assert traj.metadata["task_id"] == task
        assert traj.metadata["benchmark"] == "Toolathlon"
        assert traj.metadata["success"] is run["pass"]
        output = traj.metadata.get("evaluation_output")
        assert (output is None) == (run.get("failure") is None)
        if output is not None and "[REDACTED" not in output:
            assert output == run["failure"]
        assert traj.status.value == "complete"
        hit = ExclusionMatcher(DEFAULT_EXCLUDED).match(traj)
        assert hit is not None and hit[0] == "toolathlon"
    claimed = cleaned[1]["deepseek-v3.2-exp_git-milestone.json"]
    assert claimed.turns[-1].action.tool_name == "local-claim_done"  # Toolathlon's stop tool ends the run
    answered = cleaned[1]["deepseek-v3.2-exp_set-conf-cr-ddl.json"]
    assert answered.turns[-1].action.kind.value == "message"


def test_a_run_cut_mid_task_is_truncated_and_a_result_for_no_call_quarantined(tmp_path: Path) -> None:
    run = _run(ROOT / "deepseek-v3.2-exp_set-conf-cr-ddl.json")
    run["messages"] = run["messages"][:5]  # the task and two calls with their results
    (tmp_path / "m_cut-task.json").write_text(json.dumps(run), encoding="utf-8")
    orphan = _run(ROOT / "deepseek-v3.2-exp_set-conf-cr-ddl.json")
    orphan["messages"] = [m for m in orphan["messages"] if "tool_calls" not in m]
    (tmp_path / "m_orphan-task.json").write_text(json.dumps(orphan), encoding="utf-8")
    summary = CleanRun([str(tmp_path)], tmp_path / "out", CleanConfig()).run()
    assert (summary["records_in"], summary["accepted"], summary["quarantined"]) == (2, 1, 1)
    assert summary["per_reason"] == {"parse_error": 1}
    (traj,) = iter_trajectories(tmp_path / "out")
    assert traj.metadata["task_id"] == "cut-task" and traj.source.model == "m"
    assert traj.status.value == "truncated" and len(traj.turns) == 2
