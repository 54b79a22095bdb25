"""`worldline judge` accounting against the scripted server: one results line per sample however
often its call failed and was retried, and `--budget` caps the requests the endpoint receives,
retries included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers.fakellm import FakeLLMServer, FakeReply
from tests.helpers.judge_data import comparing_judge
from tests.worldline.test_judge_cli import write_predictions
from worldline.cli import app

runner = CliRunner()


@pytest.fixture
def env(fake_llm: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    monkeypatch.setenv("WORLDLINE_LLM_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("WORLDLINE_LLM_API_KEY", "test")
    monkeypatch.setenv("WORLDLINE_LLM_MODEL", "fake-model")
    monkeypatch.setenv("WORLDLINE_LLM_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("WORLDLINE_LLM_CONCURRENCY", "1")
    monkeypatch.setenv("WORLDLINE_LLM_MAX_RETRIES", "1")
    return fake_llm


def result_lines(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_retried_call_failures_leave_one_line_per_sample(env: FakeLLMServer, tmp_path: Path) -> None:
    predictions, reference = write_predictions(tmp_path)
    out = tmp_path / "out"
    args = ["judge", str(predictions), "--reference", str(reference), "--out", str(out)]
    env.set_default(lambda request: FakeReply.server_error(503))
    runner.invoke(app, args)
    failed = result_lines(out)
    assert sum(r["failure"] == "call_failed" for r in failed) >= 3  # the others need no call
    env.set_default(comparing_judge)
    for _ in range(2):  # the retry run, then a run with nothing left to do
        assert runner.invoke(app, args).exit_code == 0
        lines = result_lines(out)
        ids = [r["sample_id"] for r in lines]
        assert len(ids) == len(set(ids)) == len(failed)
        assert not any(r["failure"] == "call_failed" for r in lines)


def test_budget_counts_every_request_retries_included(env: FakeLLMServer, tmp_path: Path) -> None:
    predictions, reference = write_predictions(tmp_path)
    out = tmp_path / "out"
    env.script(FakeReply.server_error(503), FakeReply.server_error(503), FakeReply.server_error(503))
    env.set_default(comparing_judge)
    args = ["judge", str(predictions), "--reference", str(reference), "--out", str(out), "--budget", "3"]
    stopped = runner.invoke(app, args)
    assert stopped.exit_code == 3, stopped.output
    assert len(env.requests) <= 3
    report = json.loads((out / "report.json").read_text())
    assert report["usage"]["totals"]["requests"] == len(env.requests)
