"""kill -9 and SIGTERM at seeded random points of `worldline judge` against the local OpenAI-compatible
server (each judge call slowed so the signal lands mid-run), then a rerun: the results equal an
uninterrupted run's (one line per sample, the same scores), no superseded lines, and the rerun sends a
request only for samples the killed run had not finished."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from schemas.agentworldbench import write_samples
from tests.helpers.fakellm import FakeLLMServer, FakeReply
from tests.helpers.judge_data import awb_sample, comparing_judge, prediction
from tests.reliability.harness import Trial, run, trial, worldline
from tests.reliability.test_kill_rerun import SIGNALS, TRIALS, check, rng_for

pytestmark = pytest.mark.slow

SAMPLES = 24
DELAY_S = 0.15  # per judge call; with concurrency 2 the run takes ~2 s


def slow_judge(request: dict[str, Any]) -> FakeReply:
    reply = comparing_judge(request)
    return FakeReply(text=reply.text, delay_s=DELAY_S)


def write_inputs(root: Path) -> tuple[Path, Path]:
    reference = root / "ref"
    reference.mkdir(parents=True)
    samples = [awb_sample(i, "terminal") for i in range(SAMPLES)]
    write_samples(reference / "terminal_test.jsonl", samples)
    # Every third prediction is wrong, the rest right: scores differ per sample.
    lines = [
        json.dumps({**s.to_json(), "gen": prediction(f"content {i} 2" if i % 3 else "something else")})
        for i, s in enumerate(samples)
    ]
    predictions = root / "predictions.jsonl"
    predictions.write_text("\n".join(lines) + "\n")
    return predictions, reference


def results(out: Path) -> list[dict[str, Any]]:
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def scores(out: Path) -> dict[str, Any]:
    return {r["sample_id"]: (r.get("normalised"), r.get("failure")) for r in results(out)}


@pytest.fixture
def judge_env(fake_llm: FakeLLMServer, tmp_path: Path) -> dict[str, str]:
    fake_llm.set_default(slow_judge)
    return {
        **os.environ,
        "WORLDLINE_LLM_BASE_URL": fake_llm.base_url,
        "WORLDLINE_LLM_API_KEY": "test",
        "WORLDLINE_LLM_MODEL": "fake-model",
        "WORLDLINE_LLM_CONCURRENCY": "2",
        # No response cache: a rerun's requests are then exactly the work the killed run left.
        "WORLDLINE_LLM_CACHE": "off",
    }


@pytest.mark.parametrize("sig", ["kill", "term"])
def test_judge_survives(sig: str, fake_llm: FakeLLMServer, judge_env: dict[str, str], tmp_path: Path) -> None:
    predictions, reference = write_inputs(tmp_path)

    def command(out: Path) -> list[str]:
        return worldline("judge", str(predictions), "--reference", str(reference), "--out", str(out))

    ref_out = tmp_path / "uninterrupted"
    code, seconds, log = run(command(ref_out), judge_env)
    assert code == 0, log
    want = scores(ref_out)
    assert len(want) == SAMPLES and len(fake_llm.requests) == SAMPLES

    out = tmp_path / "out"
    baseline = [0]

    def reset() -> None:
        shutil.rmtree(out, ignore_errors=True)
        baseline[0] = len(fake_llm.requests)

    def compare() -> tuple[bool, int, int]:
        got = results(out)
        ids = Counter(r["sample_id"] for r in got)
        same = scores(out) == want and all(n == 1 for n in ids.values())
        return same, len(set(want) - set(ids)), sum(n - 1 for n in ids.values())

    def debris(_: int) -> list[str]:
        left = [f"temporary file {p.name}" for p in out.glob("*.tmp")] if out.is_dir() else []
        # Requests of the killed run plus the rerun: each sample judged once, plus at most the calls
        # that were in flight when the signal landed (they had not been answered, so nothing kept them).
        sent = len(fake_llm.requests) - baseline[0]
        if sent > SAMPLES + 2:
            left.append(f"{sent} judge requests for {SAMPLES} samples")
        return left

    rng = rng_for(f"judge-{sig}")
    outcomes: list[Trial] = []
    for _ in range(TRIALS):
        outcomes.append(
            trial(
                "judge",
                command(out),
                SIGNALS[sig],
                rng,
                seconds,
                compare=compare,
                debris=debris,
                env=judge_env,
                reset=reset,
            )
        )
    check(outcomes)
    report = json.loads((out / "report.json").read_text())
    assert report["report"] == json.loads((ref_out / "report.json").read_text())["report"]
