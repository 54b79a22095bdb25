"""Replay span labels in the judge's content tiers and the RL rule verifier."""

from __future__ import annotations

import asyncio

from schemas.span_labels import SpanLabel, TurnLabels, label_observation
from tests.helpers.fakellm import FakeLLMServer
from tests.helpers.judge_data import awb_sample, prediction, verdict
from worldline.judge import JudgeSample, from_agentworldbench
from worldline.judge.judge import Judge
from worldline.judge.tiers import content_tiers
from worldline.llm import LLMClient
from worldline.rewards.rules import derive_rules, verify

# `echo $$; cat notes.txt` run twice: the PID differs, the file content does not.
ORIGINAL = "48213\nalpha beta\ngamma 42\n"
REPLAY = "51877\nalpha beta\ngamma 42\n"
ONLY_RUNTIME_DIFFERS = "90412\nalpha beta\ngamma 42\n"
DETERMINISTIC_DIFFERS = "48213\nalpha beta\ngamma 43\n"


def labels(original: str = ORIGINAL, replays: tuple[str, ...] = (REPLAY,)) -> TurnLabels:
    return TurnLabels(
        "traj-1", 1, tuple(label_observation(original, list(replays))), len(replays), False, None
    )


def test_the_labels_mark_the_pid_runtime_and_the_file_content_deterministic() -> None:
    spans = labels().spans
    assert [(s.start, s.end, s.label) for s in spans if s.label != SpanLabel.DETERMINISTIC] == [
        (0, 5, SpanLabel.RUNTIME)
    ]


def test_rules_with_labels_accept_a_prediction_differing_only_in_a_runtime_span() -> None:
    rules = derive_rules("terminal", "echo $$; cat notes.txt", ORIGINAL, labels=labels())
    assert [r["kind"] for r in rules] == ["span_match"]
    passed = verify(ONLY_RUNTIME_DIFFERS, rules)
    assert passed is not None and passed.score == 1, passed
    failed = verify(DETERMINISTIC_DIFFERS, rules)
    assert failed is not None and failed.score == 0
    assert "deterministic text" in failed.reason
    assert verify("abc\nalpha beta\ngamma 42\n", rules).score == 0  # type: ignore[union-attr]


def test_a_runtime_pid_must_keep_its_range() -> None:
    turn = labels("pid 48213 started\n", ("pid 51877 started\n",))
    assert any(s.pattern == "pid" for s in turn.spans)
    rules = derive_rules("terminal", "./serve &", "pid 48213 started\n", labels=turn)
    assert verify("pid 90412 started", rules).score == 1  # type: ignore[union-attr]
    assert verify("pid 0 started", rules).score == 0  # type: ignore[union-attr]


def test_without_labels_the_patterns_stay_the_rules() -> None:
    """No labels: the action list decides (a `cat` is exact), as before."""
    plain = derive_rules("terminal", "cat notes.txt", ORIGINAL)
    assert plain == derive_rules("terminal", "cat notes.txt", ORIGINAL, labels=None)
    assert [r["kind"] for r in plain] == ["exact_match"]
    assert verify(ONLY_RUNTIME_DIFFERS, plain).score == 0  # type: ignore[union-attr]
    assert derive_rules("terminal", "./serve", ORIGINAL) == []


def test_labels_of_another_text_or_a_diverged_replay_fall_back_to_the_patterns() -> None:
    other = labels("something else entirely\n", ("something else entirely\n",))
    assert derive_rules("terminal", "cat notes.txt", ORIGINAL, labels=other) == derive_rules(
        "terminal", "cat notes.txt", ORIGINAL
    )
    diverged = TurnLabels("traj-1", 1, labels().spans, 1, True, "error appeared")
    assert derive_rules("terminal", "./x", ORIGINAL, labels=diverged) == []


def test_a_turn_that_replays_identically_is_an_exact_match() -> None:
    rules = derive_rules("terminal", "./build.sh", ORIGINAL, labels=labels(replays=(ORIGINAL,)))
    assert [r["kind"] for r in rules] == ["exact_match"]


def test_judge_tiers_with_labels() -> None:
    turn = labels()
    exact = content_tiers(ONLY_RUNTIME_DIFFERS, ORIGINAL, turn)
    assert exact.exact and exact.source == "labels"
    wrong = content_tiers(DETERMINISTIC_DIFFERS, ORIGINAL, turn)
    assert not wrong.exact and wrong.source == "labels"


def test_judge_tiers_fall_back_to_the_metadata_patterns() -> None:
    truth = "started at 2026-12-02 11:35:45\nok\n"
    assert content_tiers("started at 2025-01-03 09:00:01\nok", truth).source == "patterns"
    assert content_tiers("started at 2025-01-03 09:00:01\nok", truth).exact
    assert not content_tiers("started at 2025-01-03 09:00:01\nfailed", truth).exact
    assert not content_tiers(ONLY_RUNTIME_DIFFERS, ORIGINAL).exact  # no labels: the PID line is content


def _labelled_sample(output: str) -> JudgeSample:
    base = from_agentworldbench(awb_sample(0, "terminal"), output)
    return JudgeSample(
        base.sample_id,
        base.domain,
        base.history,
        base.current_prompt,
        ORIGINAL,
        output,
        {"trajectory_id": "traj-1", "turn": 1},
    )


def test_the_judge_records_the_tiers_of_a_labelled_sample(fake_llm: FakeLLMServer) -> None:
    scores = {"format": 5, "factuality": 5, "consistency": 5, "realism": 5, "quality": 5}
    fake_llm.script(verdict(scores), verdict(scores), verdict(scores))
    table = {("traj-1", 1): labels()}

    async def run() -> list[dict[str, object]]:
        client = LLMClient(fake_llm.config())
        try:
            judge = Judge(client, span_labels=table)
            runtime = await judge.judge(_labelled_sample(prediction(ONLY_RUNTIME_DIFFERS)))
            content = await judge.judge(_labelled_sample(prediction(DETERMINISTIC_DIFFERS)))
            unlabelled = await Judge(client).judge(_labelled_sample(prediction(DETERMINISTIC_DIFFERS)))
        finally:
            await client.aclose()
        assert "content_tiers" not in unlabelled.meta
        return [runtime.meta["content_tiers"], content.meta["content_tiers"]]

    runtime, content = asyncio.run(run())
    assert runtime["exact"] is True and runtime["source"] == "labels"
    assert content["exact"] is False


def test_span_segments_keep_deterministic_text_exact_after_normalisation() -> None:
    from worldline.rewards.spans import span_segments

    segments = span_segments(ORIGINAL, labels())
    assert segments[0]["label"] == "runtime" and segments[1] == {"exact": "\nalpha beta\ngamma 42"}
    assert span_segments("x\ue001\n", labels("x\ue001\n", ("y\ue001\n",))) == []
