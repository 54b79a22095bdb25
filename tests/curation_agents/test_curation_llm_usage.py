"""The LLM stages report what they spent, share one budget across workers, and judge a sample of the
whole trajectory rather than its first turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.llm_stages import _preview, sample_turn_indices
from curation_agents.model import CleanConfig
from schemas import Action, ActionKind, ActionSpace, Domain, Observation, Source, SourceKind, Trajectory, Turn


def _tool_logs(folder: Path, count: int) -> None:
    folder.mkdir()
    for n in range(count):
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"look up item {n}"}]
        for i in range(3):
            call = {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"q": i})},
            }
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            messages.append(
                {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i} for {n} with words"}
            )
        (folder / f"log-{n}.json").write_text(json.dumps({"messages": messages}))


def _use_fake_endpoint(monkeypatch: pytest.MonkeyPatch, fake_llm: Any, **extra: str) -> None:
    monkeypatch.setenv("WORLDLINE_LLM_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("WORLDLINE_LLM_API_KEY", "test-key")
    monkeypatch.setenv("WORLDLINE_LLM_MODEL", "fake-model")
    monkeypatch.setenv("WORLDLINE_LLM_CACHE", "off")
    monkeypatch.setenv("WORLDLINE_LLM_MAX_RETRIES", "0")
    for key, value in extra.items():
        monkeypatch.setenv(key, value)


def test_summary_reports_calls_tokens_and_fallbacks_with_reasons(
    tmp_path: Path, fake_llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tool_logs(tmp_path / "in", 3)
    _use_fake_endpoint(monkeypatch, fake_llm)
    fake_llm.add_rule(
        '{"domain": "mcp", "why": "tool server"}',
        match=lambda req: "classify" in json.dumps(req["messages"][0]),
    )
    fake_llm.set_default(lambda req: "no idea")  # the quality judge answers nonsense: a fallback
    summary = CleanRun(
        [str(tmp_path / "in")], tmp_path / "out", CleanConfig(use_llm=True, unsure_band=1.0)
    ).run()
    usage = summary["llm_usage"]
    assert usage["calls"] == len(fake_llm.requests) == 6
    assert usage["prompt_tokens"] > 0 and usage["total_tokens"] >= usage["prompt_tokens"]
    assert usage["decisions"] == {"align": 3}
    assert usage["fallbacks"] == {"score: unparsed answer": 3}
    assert usage["budget"]["calls"] == 6


@pytest.mark.slow
def test_one_budget_is_shared_by_all_workers(
    tmp_path: Path, fake_llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tool_logs(tmp_path / "in", 8)
    _use_fake_endpoint(monkeypatch, fake_llm, WORLDLINE_LLM_MAX_CALLS="5")
    fake_llm.set_default(lambda req: '{"domain": "mcp", "why": "x", "score": 0.9, "reasons": []}')
    config = CleanConfig(use_llm=True, unsure_band=1.0)
    summary = CleanRun([str(tmp_path / "in")], tmp_path / "out", config, workers=2).run()
    usage = summary["llm_usage"]
    assert len(fake_llm.requests) == usage["calls"] == 5  # not 5 per worker
    assert sum(usage["fallbacks"].values()) == 16 - 5
    assert set(usage["fallbacks"]) <= {"align: budget_calls_exhausted", "score: budget_calls_exhausted"}
    assert summary["records_in"] == summary["accepted"] + summary["quarantined"] == 8


def test_the_judge_sees_a_sample_of_the_whole_trajectory() -> None:
    assert sample_turn_indices(5) == [0, 1, 2, 3, 4]
    picked = sample_turn_indices(100)
    assert picked[0] == 0 and picked[-1] == 99 and len(picked) == 8
    turns = [
        Turn(
            Action(ActionKind.COMMAND, f"step-{i}"),
            Observation(f"output-{i}" + ("x" * 2000 if i == 39 else "")),
        )
        for i in range(40)
    ]
    traj = Trajectory(
        id="t",
        domain=Domain.TERMINAL,
        source=Source(SourceKind.PUBLIC, "test"),
        task="do it",
        action_space=ActionSpace(description="shell", tools=[]),
        turns=turns,
    )
    preview = _preview(traj)
    assert "step-0\n" in preview and "step-39\n" in preview
    assert any(f"step-{i}\n" in preview for i in range(15, 25))  # the middle too
    assert "40 in total" in preview and "turn(s) not shown" in preview
    assert preview.count("x" * 300) == 1 and "chars ..." in preview  # long observations are clipped
