"""The demo's LLM steps: world-model predictions and the judge, against the local OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.fakellm import FakeLLMServer


def test_predictions_come_from_the_eval_set_when_the_build_has_no_eval_pool(
    fake_llm: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's config pools its collected tasks into SFT / RL only: the world-model predictions the
    judge scores then answer the evaluation set the build decontaminated against."""
    from typer.testing import CliRunner

    from worldline.cli import app
    from worldline.demo import EVAL_SET, eval_samples, write_predictions

    for name, value in {
        "WORLDLINE_LLM_BASE_URL": fake_llm.base_url,
        "WORLDLINE_LLM_API_KEY": "test",
        "WORLDLINE_LLM_MODEL": "fake-model",
        "WORLDLINE_LLM_CACHE": str(tmp_path / "cache.sqlite"),
    }.items():
        monkeypatch.setenv(name, value)
    pools = tmp_path / "pools"
    (pools / "exports" / "agentworldbench").mkdir(parents=True)
    (pools / "exports" / "agentworldbench" / "terminal_test.jsonl").write_text("")  # an empty eval pool
    assert eval_samples(pools) == []
    reference = pools if eval_samples(pools) else EVAL_SET
    with pytest.raises(ValueError, match="no AgentWorldBench evaluation samples"):
        write_predictions(pools, tmp_path / "never.jsonl", limit=2)
    predictions = tmp_path / "judge" / "predictions.jsonl"
    assert write_predictions(reference, predictions, limit=3) == 3
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert len(rows) == 3 and all(row["gen"].startswith("echo: ") for row in rows)
    fake_llm.set_default(
        lambda request: '{"format": 4, "factuality": 4, "consistency": 4, "realism": 4, "quality": 4}'
    )
    done = CliRunner().invoke(
        app, ["judge", str(predictions), "--reference", str(reference), "--out", str(tmp_path / "judged")]
    )
    assert done.exit_code == 0, done.output
    results = (tmp_path / "judged" / "results.jsonl").read_text().splitlines()
    assert len(results) == 3
