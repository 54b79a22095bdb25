"""The LLM-backed align and score, through the shared client against the fake OpenAI server, plus the
durable per-stage checkpoints that let an interrupted record resume mid-graph."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from curation_agents.clean_run import GraphSession, checkpoint_thread_id, record_ref
from curation_agents.graph import build_graph
from curation_agents.llm_stages import LLMCurator
from curation_agents.model import CleanConfig
from curation_agents.reader import iter_records
from schemas import Domain, Trajectory
from worldline.llm import SyncLLMClient


def _generic_tool_log(path: Path, calls: int = 3, observation: str = "result {i} with some words") -> Path:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "find the population of Lyon"}]
    for i in range(calls):
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": json.dumps({"q": i})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": observation.format(i=i)})
    path.write_text(json.dumps({"messages": messages}))
    return path


def _run(path: Path, config: CleanConfig, curator: Any) -> dict[str, Any]:
    graph = build_graph(config, curator=curator)
    (raw,) = list(iter_records(path, config.limits))
    return graph.invoke(
        {"record": record_ref(raw, path, path.name), "payload": raw.payload, "quarantine": []}
    )


def test_llm_align_decides_an_unsure_domain(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.add_rule(
        '{"domain": "search", "why": "lookups of facts"}',
        user_contains="Tools: lookup",
        match=lambda req: "classify" in json.dumps(req["messages"][0]),
    )
    fake_llm.set_default(lambda req: '{"score": 0.9, "reasons": ["fine"]}')
    curator = LLMCurator(SyncLLMClient(fake_llm.config()))
    state = _run(_generic_tool_log(tmp_path / "log.json"), CleanConfig(), curator)
    (traj,) = state["accepted"]
    assert traj.domain == Domain.SEARCH and traj.metadata["llm_align"] == "lookups of facts"
    assert "align_unsure" not in traj.metadata


def test_llm_score_decides_near_the_threshold_and_failures_fall_back(tmp_path: Path, fake_llm: Any) -> None:
    # Deterministic score 0.7 (empty observations) is within the band of threshold 0.65.
    path = _generic_tool_log(tmp_path / "log.json", calls=4, observation="")
    config = CleanConfig(accept_threshold=0.65, unsure_band=0.1)
    fake_llm.add_rule(
        '{"score": 0.1, "reasons": ["observations are empty"]}',
        match=lambda req: "rate whether" in json.dumps(req["messages"][0]),
    )
    fake_llm.set_default(lambda req: '{"domain": "mcp", "why": "tool server"}')
    curator = LLMCurator(SyncLLMClient(fake_llm.config()))
    state = _run(path, config, curator)
    assert state["accepted"] == []
    (entry,) = state["quarantine"]
    assert entry["reason"] == "low_quality" and "observations are empty" in entry["detail"]

    # An unparseable judge answer keeps the deterministic verdict (accepted at 0.7) and says why.
    fake_llm.reset()
    fake_llm.set_default(lambda req: "no idea")
    state = _run(path, config, LLMCurator(SyncLLMClient(fake_llm.config(cache_path=None))))
    (traj,) = state["accepted"]
    assert traj.metadata["quality_score"] == 0.7
    assert traj.metadata["llm_quality"]["reasons"][0].startswith("llm_score_unparsed")


def test_checkpointed_record_resumes_after_the_failed_stage(tmp_path: Path, fake_llm: Any) -> None:
    """A record killed inside align resumes from its checkpoint: ingest..align do not run again."""
    fake_llm.set_default(lambda req: '{"domain": "mcp", "why": "x"}')
    calls = {"n": 0}

    class FlakyCurator(LLMCurator):
        def classify_domain(self, traj: Trajectory) -> tuple[Domain | None, str]:
            calls["n"] += 1
            if calls["n"] == 1:
                raise KeyboardInterrupt  # stands in for the process dying mid-stage
            return super().classify_domain(traj)

    path = _generic_tool_log(tmp_path / "log.json")
    (raw,) = list(iter_records(path, CleanConfig().limits))
    ref = record_ref(raw, path, path.name)
    session = GraphSession(
        CleanConfig(), tmp_path / "ck.sqlite", FlakyCurator(SyncLLMClient(fake_llm.config()))
    )
    try:
        session.run(raw, ref)
    except KeyboardInterrupt:
        pass
    # The record's ingest..segment results are checkpointed; resuming needs no payload at all.
    session2 = GraphSession(
        CleanConfig(), tmp_path / "ck.sqlite", FlakyCurator(SyncLLMClient(fake_llm.config()))
    )
    snapshot = session2.graph.get_state({"configurable": {"thread_id": checkpoint_thread_id(ref["key"])}})
    assert snapshot.next == ("align",)
    outcome = session2.run(dataclasses.replace(raw, payload=None), ref)
    assert len(outcome.accepted) == 1 and calls["n"] == 2
