"""An MCP-Universe running log (tests/fixtures/mcp_universe/README.md: written with MCP-Universe's own
tracer classes), cleaned through the cleaning run; the log is read here with json alone."""

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
from schemas import Domain, Trajectory, iter_trajectories

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_universe" / "log" / "dummy_weather.log"
SEPARATOR = "-" * 66


def _records() -> list[dict[str, Any]]:
    blocks = LOG.read_text(encoding="utf-8").split(SEPARATOR + "\n")
    return [json.loads(b) for b in blocks if b.strip()]


def _traces() -> dict[str, list[dict[str, Any]]]:
    traces: dict[str, list[dict[str, Any]]] = {}
    for record in _records():
        traces.setdefault(record["trace_id"], []).append(record)
    return traces


def _data(trace: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    found = [(d["timestamp"], d["data"]) for r in trace for d in r["records"] if d["data"]["type"] == kind]
    return [data for _, data in sorted(found, key=lambda x: x[0])]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Trajectory], Path]:
    out = tmp_path_factory.mktemp("mcp_universe") / "out"
    summary = CleanRun([str(LOG.parent)], out, CleanConfig()).run()
    return summary, {str(t.metadata["trace_id"]): t for t in iter_trajectories(out)}, out


def test_each_trace_is_a_record_and_the_summary_reconciles(
    run: tuple[dict[str, Any], dict[str, Trajectory], Path],
) -> None:
    assert sniff(LOG) == (Format.MCP_UNIVERSE, "traces")
    summary, cleaned, out = run
    traces = _traces()
    finished = {t for t, records in traces.items() if _data(records, "agent")}
    assert summary["records_in"] == len(traces) == 3 == summary["accepted"] + summary["quarantined"]
    assert set(cleaned) == finished and len(finished) == 2
    rows = pl.read_parquet(sorted((out / "quarantine" / "parts").glob("*.parquet"))).to_dicts()
    (unfinished,) = set(traces) - finished
    assert [(r["record_key"], r["reason"]) for r in rows] == [
        (f"log/dummy_weather.log#trace-{unfinished}", "parse_error")
    ]


def test_tool_spans_become_calls_and_the_answer_a_message(
    run: tuple[dict[str, Any], dict[str, Trajectory], Path],
) -> None:
    for trace_id, traj in run[1].items():
        trace = _traces()[trace_id]
        tools, (agent,) = _data(trace, "tool"), _data(trace, "agent")
        assert [t.action.tool_name for t in traj.turns[:-1]] == [d["tool_name"] for d in tools]
        for t, data in zip(traj.turns, tools, strict=False):
            assert json.loads(t.action.text) == {"name": data["tool_name"], "arguments": data["arguments"]}
            if data["error"]:
                assert t.observation.text == "" and t.observation.is_error is True
                assert t.metadata["tool_error"] == data["error"]
            else:
                (block,) = data["response"]["content"]
                assert json.loads(t.observation.text) == block  # the block, not the whole result
                assert t.observation.is_error is data["response"]["isError"] is False
                assert t.metadata["server"] == data["server"]
        llm = _data(trace, "llm")
        assert traj.turns[0].metadata["thought"] == json.loads(llm[0]["response"])["thought"]
        final = traj.turns[-1]
        assert final.action.kind.value == "message" and final.action.text == agent["response"]
        assert traj.task == agent["messages"]
        assert traj.domain == Domain.MCP and traj.status.value == "complete"


def test_provenance_names_the_benchmark_and_model(
    run: tuple[dict[str, Any], dict[str, Trajectory], Path],
) -> None:
    for traj in run[1].values():
        assert traj.metadata["benchmark"] == "MCP-Universe"
        assert traj.source.model == "gpt-4o" and traj.source.agent == "ReAct"
        assert traj.metadata["agent_name"] == "ReAct-agent"


def test_a_torn_record_quarantines_the_log(tmp_path: Path) -> None:
    text = LOG.read_text(encoding="utf-8")
    (tmp_path / "torn.log").write_text(text[: len(text) // 2], encoding="utf-8")
    summary = CleanRun([str(tmp_path / "torn.log")], tmp_path / "out", CleanConfig()).run()
    assert summary["records_in"] == summary["accepted"] + summary["quarantined"]
    assert summary["per_reason"].get("parse_error", 0) >= 1
