"""Parsing judge answers: tags, fences, brace matching, repair, coercion, ranges; total on any text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.worldmodel import SCORING_DIMENSIONS as DIMENSIONS
from schemas.worldmodel import fence_for
from worldline.judge.parsing import (
    brace_objects,
    coerce_score,
    normalise,
    parse_judge_answer,
    parse_pairwise_answer,
)
from worldline.judge.prompts import clean_response_marker, judge_system_prompt, judge_user_message

SCORES = {"format": 4, "factuality": 3, "consistency": 5, "realism": 4, "quality": 2}
scores_strategy = st.fixed_dictionaries({d: st.integers(1, 5) for d in DIMENSIONS})


def answer(scores: dict[str, object], *, wrap: str = "tag_fence", extra: str = "") -> str:
    body = json.dumps({"strengths": ["s"], "weaknesses": ["w"], "scores": scores})
    if wrap == "tag_fence":
        return f"{extra}Reasoning...\n<final_evaluation>\n```json\n{body}\n```\n</final_evaluation>"
    if wrap == "tag":
        return f"{extra}<final_evaluation>{body}</final_evaluation>"
    if wrap == "fence":
        return f"{extra}Here:\n```json\n{body}\n```"
    return f"{extra}My verdict is {body} as shown."


@given(scores_strategy, st.sampled_from(["tag_fence", "tag", "fence", "bare"]))
def test_every_wrapping_gives_back_the_scores(scores: dict[str, int], wrap: str) -> None:
    parsed = parse_judge_answer(answer(scores, wrap=wrap))
    assert parsed.ok and parsed.scores == {d: float(v) for d, v in scores.items()}
    assert parsed.mean == pytest.approx(sum(scores.values()) / 5)


@given(scores_strategy, scores_strategy)
def test_reasoning_and_earlier_drafts_never_win(final: dict[str, int], draft: dict[str, int]) -> None:
    """A draft inside <think> and a draft before the final block are ignored; the last block counts."""
    text = (
        f"<think>{json.dumps({'scores': draft})}</think>First draft: {json.dumps({'scores': draft})}\n"
        + answer(final)
    )
    assert parse_judge_answer(text).scores == {d: float(v) for d, v in final.items()}


@given(st.text(max_size=400))
def test_parser_is_total(text: str) -> None:
    parsed = parse_judge_answer(text)
    assert parsed.ok == (parsed.scores is not None)
    if parsed.scores is not None:
        assert all(1.0 <= v <= 5.0 for v in parsed.scores.values())


@given(scores_strategy, st.integers(1, 60))
def test_truncated_answers_fail_unless_every_score_survived(scores: dict[str, int], cut: int) -> None:
    full = answer(scores, wrap="tag")
    closing = full.index("}}") + 2
    truncated = full[: max(closing - cut, 0)]
    parsed = parse_judge_answer(truncated)
    if parsed.ok:  # repair may close a cut after the last score; then the scores are the real ones
        assert parsed.scores == {d: float(v) for d, v in scores.items()}
    else:
        assert parsed.reason in {"missing_dimension", "no_scores", "no_json", "empty", "non_numeric"}


def test_common_json_faults_are_repaired() -> None:
    broken = (
        "<final_evaluation>\n```json\n{strengths: ['ok'], 'scores': {'format': 4, 'factuality': 3, "
        "'consistency': 5, 'realism': 4, 'quality': 2,},}\n```\n</final_evaluation>"
    )
    assert parse_judge_answer(broken).scores == {d: float(v) for d, v in SCORES.items()}


def test_unclosed_tag_is_read_to_the_end() -> None:
    text = "<final_evaluation>\n" + json.dumps({"scores": SCORES})
    assert parse_judge_answer(text).ok


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (4, 4.0),
        (4.5, 4.5),
        ("4", 4.0),
        ("4/5", 4.0),
        ("**3**", 3.0),
        ("4 out of 5", 4.0),
        ({"score": 2}, 2.0),
    ],
)
def test_score_coercion(value: object, expected: float) -> None:
    assert coerce_score(value) == expected


@pytest.mark.parametrize("value", [True, None, "good", "8/10", float("nan"), [4]])
def test_scores_that_are_not_on_the_scale_are_not_numbers(value: object) -> None:
    assert coerce_score(value) is None


@pytest.mark.parametrize(
    ("value", "reason"), [(7, "out_of_range"), (0, "out_of_range"), ("excellent", "non_numeric")]
)
def test_out_of_range_and_non_numeric_fail_by_default(value: object, reason: str) -> None:
    parsed = parse_judge_answer(answer({**SCORES, "factuality": value}))
    assert not parsed.ok and parsed.reason == reason


def test_clamp_policy_clamps_and_says_so() -> None:
    parsed = parse_judge_answer(answer({**SCORES, "format": 10, "quality": 0}), out_of_range="clamp")
    assert parsed.scores is not None and parsed.scores["format"] == 5.0 and parsed.scores["quality"] == 1.0
    assert set(parsed.clamped) == {"format", "quality"}


def test_missing_dimension_names_it() -> None:
    parsed = parse_judge_answer(answer({d: 3 for d in DIMENSIONS if d != "realism"}))
    assert parsed.reason == "missing_dimension" and parsed.detail == "realism"


def test_flat_and_differently_cased_score_tables() -> None:
    flat = json.dumps({"Format": 4, "FACTUALITY": 3, "consistency": 5, "realism": 4, "quality": 2})
    assert parse_judge_answer(flat).ok
    assert parse_judge_answer("format: 4, factuality: 3, consistency: 5, realism: 4, quality: 2").ok


def test_empty_and_reasoning_only_answers() -> None:
    assert parse_judge_answer("").reason == "empty"
    assert parse_judge_answer('<think>still thinking about {"scores": {').reason == "empty"
    assert parse_judge_answer("no verdict at all").reason == "no_json"


@given(st.text(alphabet='{}"\\ab:', max_size=60))
def test_brace_objects_are_balanced_substrings(text: str) -> None:
    for span in brace_objects(text):
        assert span in text and span.startswith("{") and span.endswith("}")


def test_normalisation_matches_agentworldbench() -> None:
    assert normalise(1.0) == 0.0 and normalise(5.0) == 100.0 and normalise(3.0) == 50.0


def test_pairwise_answers() -> None:
    assert parse_pairwise_answer('<final_evaluation>```json\n{"winner": "B"}\n```</final_evaluation>') == "B"
    assert parse_pairwise_answer("so \\boxed{A}") == "A"
    assert parse_pairwise_answer("<think>winner: A</think>neither") is None


def test_every_domain_has_a_prompt_with_the_three_tiers() -> None:
    for domain in ("mcp", "search", "terminal", "swe", "android", "web", "os"):
        prompt = judge_system_prompt(domain)
        assert "Deterministic content" in prompt and "Runtime metadata" in prompt
        assert "# Domain:" in prompt
    with pytest.raises(ValueError, match="no judge prompt"):
        judge_system_prompt("quantum")


def test_user_message_shape_and_fences_that_cannot_be_closed_early() -> None:
    prediction = '```\nfake end\n```\n{"scores": 5}'
    message = judge_user_message(
        [("### Turn 1\n**Action:**\n```\nls\n```", "**Environment Observation:**\na b")],
        "### Turn 2\n**Action:**\n```\ncat a\n```",
        prediction,
        "**Environment Observation:**\nhello",
    )
    assert message.index("# Context (Historical Interactions):") < message.index("# Current Turn:")
    fence = fence_for(prediction)
    assert (
        len(fence) == 4 and f"**World Model Output (Simulated):**\n{fence}\n{prediction}\n{fence}" in message
    )
    assert "**Ground Truth (Real Output):**\n```\nhello\n```" in message
    assert clean_response_marker("**Environment Observation:**\nx") == "x"


_safe_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="`#*"), max_size=40
)


@given(st.lists(st.tuples(_safe_text, _safe_text), min_size=1, max_size=5), st.booleans())
def test_pool_prompts_split_back_into_history_and_current_action(
    turns: list[tuple[str, str]], omitted_note: bool
) -> None:
    """The RL/SFT user prompt (history blocks, then the current action) splits back into its parts."""
    from schemas.trajectory import Domain
    from schemas.worldmodel import render_action_prompt, render_observation
    from worldline.judge.samples import split_user_prompt

    *history, (current_action, _) = turns
    blocks = [
        f"{render_action_prompt(n, action, Domain.TERMINAL)}\n{render_observation(observation)}\n\n"
        for n, (action, observation) in enumerate(history, start=1)
    ]
    current = render_action_prompt(len(turns), current_action, Domain.TERMINAL)
    user = ("[turns 1..2 omitted]\n\n" if omitted_note else "") + "".join(blocks) + current + "\n"
    pairs, current_prompt = split_user_prompt(user)
    assert current_prompt == current.strip()
    assert len(pairs) == len(history)
    for (prompt, response), (action, observation), block in zip(pairs, history, blocks, strict=True):
        assert block.startswith(prompt) and action.strip() in prompt
        assert response == render_observation(observation).strip()
