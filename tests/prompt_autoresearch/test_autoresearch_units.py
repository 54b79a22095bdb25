"""autoresearch pieces: optimizer-answer parsing (properties), the world model's eval.py conversation,
the noise floor, style bands and data splits."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prompt_autoresearch.data import EvalData, EvalItem, split_of, world_model_messages
from prompt_autoresearch.optimizer import parse_proposal
from prompt_autoresearch.scoring import Evaluation, noise_floor
from prompt_autoresearch.styles import STYLES, style_for_run
from schemas.templates import REQUIRED_PLACEHOLDERS, SEED_TEMPLATES_DIR, load_template_set
from tests.helpers.autoresearch_world import drop_placeholder, terminal_trajectories, write_data
from tests.helpers.judge_data import awb_sample

SEED = load_template_set(str(SEED_TEMPLATES_DIR))
prose = st.text(
    alphabet=st.characters(blacklist_characters="<>{}", blacklist_categories=("Cs",)), max_size=80
)


@settings(deadline=None)  # a loaded CI machine stalls single examples; timing is not the property
@given(version=st.sampled_from(sorted(SEED.templates)), before=prose, after=prose, description=prose)
def test_a_wellformed_answer_parses_to_its_template(
    version: int, before: str, after: str, description: str
) -> None:
    text = SEED.get(version).text
    answer = f"{before}<description>{description}</description>\n<template>\n{text}</template>{after}"
    proposal = parse_proposal(answer)
    assert proposal.ok and proposal.text.strip() == text.strip()
    assert proposal.description == (" ".join(description.split())[:300] or "(no description)")


@settings(deadline=None)  # a loaded CI machine stalls single examples; timing is not the property
@given(version=st.sampled_from(sorted(SEED.templates)), name=st.sampled_from(REQUIRED_PLACEHOLDERS))
def test_a_template_without_a_required_placeholder_is_rejected_naming_it(version: int, name: str) -> None:
    text = drop_placeholder(SEED.get(version).text, name)
    proposal = parse_proposal(f"<description>x</description><template>\n{text}</template>")
    assert not proposal.ok and name in proposal.rejection and proposal.rejection.startswith("rejected:")


@settings(deadline=None)  # a loaded CI machine stalls single examples; timing is not the property
@given(answer=st.text(max_size=300))
def test_any_answer_parses_or_is_rejected_with_a_reason(answer: str) -> None:
    proposal = parse_proposal(answer)
    assert proposal.ok or proposal.rejection.startswith("rejected:")


def test_unknown_variable_is_rejected() -> None:
    text = SEED.get(0).text + "{{favourite_colour}}\n"
    proposal = parse_proposal(f"<template>\n{text}</template>")
    assert not proposal.ok and "favourite_colour" in proposal.rejection


@pytest.mark.parametrize("turn", [1, 2, 3])
def test_world_model_messages_follow_agentworldbench_eval(turn: int) -> None:
    """eval.py: system_str, then (prompt[i], response[i]) for i < turn_idx-1, then prompt[turn_idx-1]."""
    sample = awb_sample(4, turn_idx=turn)
    messages = world_model_messages(sample)
    expected = [{"role": "system", "content": sample.system_str}]
    for i in range(turn - 1):
        expected += [
            {"role": "user", "content": sample.prompt[i]},
            {"role": "assistant", "content": sample.response[i]},
        ]
    expected.append({"role": "user", "content": sample.prompt[turn - 1]})
    assert messages == expected


def test_eval_item_renders_the_template_with_the_trajectory_parts() -> None:
    traj = terminal_trajectories(1)[0]
    item = EvalItem(traj, 2)
    messages = item.messages(SEED.get(0))
    assert messages[0]["role"] == "system" and traj.task in messages[0]["content"]
    assert "files: notes0.txt" in messages[0]["content"] and "{{" not in messages[0]["content"]
    assert messages[1]["content"].startswith("### Turn 1\n**Action:**")
    assert messages[2]["content"].startswith("**Environment Observation:**\n")
    assert messages[-1]["content"].startswith("### Turn 2\n") and len(messages) == 4
    judged = item.judge_sample(SEED.get(0), "<predicted_observation>x</predicted_observation>")
    assert judged.ground_truth == "**Environment Observation:**\n" + traj.turns[1].observation.text


def _evaluation(scores: list[float | None]) -> Evaluation:
    judged = [s for s in scores if s is not None]
    return Evaluation(
        statistics.fmean(judged) if judged else None, {}, len(judged), 0, 0, len(scores), scores, []
    )


def test_noise_floor_is_the_larger_of_observed_gap_and_paired_standard_error() -> None:
    same = _evaluation([50.0, 60.0, 70.0])
    assert noise_floor(same, same) == 0.0
    shifted = _evaluation([60.0, 70.0, 80.0])
    assert noise_floor(same, shifted) == pytest.approx(10.0)
    # The means agree but turns disagree a lot: the standard error of the differences sets the floor.
    swapped = _evaluation([70.0, 60.0, 50.0])
    assert noise_floor(same, swapped) == pytest.approx(statistics.stdev([-20.0, 0.0, 20.0]) / 3**0.5)
    assert noise_floor(same, _evaluation([None, None, None])) == 0.0


def test_style_bands_span_thirty_to_eleven_hundred_lines() -> None:
    assert len(STYLES) == 12 and len({s.name for s in STYLES}) == 12
    assert {s.seed_version for s in STYLES} == set(range(12))
    assert STYLES[0].min_lines <= 30 and STYLES[-1].max_lines >= 1100
    assert all(a.max_lines < b.max_lines for a, b in zip(STYLES, STYLES[1:], strict=False))
    assert style_for_run(13) is STYLES[1]


def test_splits_are_disjoint_and_stable(tmp_path: Path) -> None:
    data = EvalData.load([write_data(tmp_path, count=30)], "terminal", seed=3)
    ids = {name: {t.id for t in trajs} for name, trajs in data.splits.items()}
    assert not (ids["optimizer"] & ids["eval"]) and not (ids["eval"] & ids["recheck"])
    assert sum(len(v) for v in ids.values()) == 30 and all(ids.values())
    for name, members in ids.items():
        assert all(split_of(i, 3) == name for i in members) or len(members) == 1
    items = data.eval_items("eval", 5, seed=3, run=0)
    assert items == data.eval_items("eval", 5, seed=3, run=0) and len(items) == 5
    assert {i.trajectory.id for i in items} <= ids["eval"]
    assert len({i.key for i in items}) == 5


def test_agentworldbench_jsonl_is_read_as_trajectories(tmp_path: Path) -> None:
    from schemas.agentworldbench import write_samples

    samples = [awb_sample(i, turn_idx=t) for i in range(6) for t in (1, 3)]
    write_samples(tmp_path / "terminal_test.jsonl", samples)
    data = EvalData.load([tmp_path], "terminal", seed=0)
    trajectories = [t for trajs in data.splits.values() for t in trajs]
    assert len(trajectories) == 6 and all(len(t.turns) == 3 for t in trajectories)
    with pytest.raises(ValueError, match="needs at least 3"):
        EvalData.load([tmp_path], "mcp", seed=0)
    with pytest.raises(ValueError, match="not a worldline domain"):
        EvalData.load([tmp_path], "cooking", seed=0)


def test_large_inputs_keep_a_bounded_order_independent_sample(tmp_path: Path) -> None:
    from schemas.shards import write_trajectories

    trajectories = terminal_trajectories(30)
    write_trajectories(tmp_path / "forward", trajectories)
    write_trajectories(tmp_path / "backward", list(reversed(trajectories)))
    forward = EvalData.load([tmp_path / "forward"], "terminal", seed=1, keep_per_split=2)
    backward = EvalData.load([tmp_path / "backward"], "terminal", seed=1, keep_per_split=2)
    assert all(len(v) == 2 for v in forward.splits.values())
    assert {k: [t.id for t in v] for k, v in forward.splits.items()} == {
        k: [t.id for t in v] for k, v in backward.splits.items()
    }
