"""Property tests for the CPT loss-mask categoriser and the kept-token decisions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.config import LossMaskConfig
from pipelines.lossmask import (
    kept_token_count,
    kept_token_range,
    loss_mask_category,
    matching_categories,
    signatures,
    turn_overlap,
)
from pipelines.render import kept_char_span
from worldline.tokenizer import get_token_counter

words = st.sampled_from("ls cat file error ok the a data row value output done 42 main src test".split())
texts = st.lists(words, max_size=40).map(" ".join)
CFG = LossMaskConfig()


def turn(shared: int, action_only: int, obs_only: int, action_chars: int, obs_chars: int) -> tuple[str, str]:
    """An (action, observation) pair with exact word-set sizes and character lengths.

    Words are distinct; lengths are padded with "." (not a word character), so OL, Nov and R are
    exact fractions of the given numbers.
    """
    common = [f"s{i:02d}" for i in range(shared)]
    action = " ".join(common + [f"a{i:02d}" for i in range(action_only)])
    obs = " ".join(common + [f"o{i:02d}" for i in range(obs_only)])
    assert len(action) <= action_chars and len(obs) <= obs_chars, "lengths too small for the words"
    return action.ljust(action_chars, "."), obs.ljust(obs_chars, ".")


# (name, (shared, action-only, observation-only words, action chars, observation chars), category).
# Each threshold of Table 3 is hit exactly, and one step either side; the stats are in the comments.
TABLE3_BOUNDARIES = [
    # echo: OL >= 0.7 and Nov < 0.3
    ("echo", (7, 3, 2, 100, 100), "echo"),  # OL 0.7, Nov 2/9
    ("echo OL just under 0.7", (6, 4, 2, 100, 100), "boilerplate"),  # OL 0.6, Nov 0.25
    ("echo Nov at 0.3", (7, 3, 3, 100, 100), "boilerplate"),  # OL 0.7, Nov 0.3
    # boilerplate: OL >= 0.5 and Nov < 0.5
    ("boilerplate at OL 0.5", (5, 5, 4, 100, 100), "boilerplate"),  # Nov 4/9
    ("boilerplate OL 0.4", (4, 6, 3, 100, 100), "other"),  # Nov 3/7, R 1: no signature
    ("boilerplate Nov at 0.5", (5, 5, 5, 100, 100), "action"),  # Nov 0.5, R 1
    # transform: Nov < 0.5 and R < 1
    ("transform", (4, 6, 3, 100, 99), "transform"),  # OL 0.4, Nov 3/7, R 0.99
    ("transform R at 1", (4, 6, 3, 100, 100), "other"),
    ("transform Nov at 0.5", (4, 6, 4, 100, 99), "action"),  # Nov 0.5, R 0.99
    # expansion: OL >= 0.5 and Nov >= 0.5 and R > 1.5
    ("expansion", (5, 5, 5, 100, 151), "expansion"),  # OL 0.5, Nov 0.5, R 1.51
    ("expansion R at 1.5", (5, 5, 5, 100, 150), "other"),  # Nov 0.5 < 0.6: not retrieval either
    ("expansion OL 0.4", (4, 6, 6, 100, 151), "retrieval"),  # Nov 0.6, R 1.51: the wider signature
    ("expansion Nov just under 0.5", (5, 5, 4, 100, 151), "boilerplate"),
    # action: Nov >= 0.5 and (R <= 1 or observation <= 80 characters)
    ("action at R 1", (2, 8, 3, 100, 100), "action"),  # Nov 0.6
    ("action R just over 1, long", (2, 8, 3, 100, 101), "retrieval"),
    ("action short observation", (1, 2, 2, 20, 80), "action"),  # OL 1/3, Nov 2/3, R 4, 80 chars
    ("action observation 81 chars", (1, 2, 2, 20, 81), "retrieval"),
    ("action Nov just under 0.5", (3, 7, 2, 100, 100), "other"),  # Nov 0.4, OL 0.3, R 1
    # retrieval: Nov >= 0.6 and R > 1
    ("retrieval at Nov 0.6", (2, 8, 3, 100, 200), "retrieval"),
    ("retrieval Nov 0.5", (3, 7, 3, 100, 200), "other"),  # OL 0.3: not expansion
    ("retrieval R at 1", (2, 8, 3, 100, 100), "action"),
    # other: no signature matches
    ("other", (4, 6, 3, 100, 120), "other"),  # OL 0.4, Nov 3/7, R 1.2
]


@pytest.mark.parametrize(
    ("shape", "category"), [(c[1], c[2]) for c in TABLE3_BOUNDARIES], ids=[c[0] for c in TABLE3_BOUNDARIES]
)
def test_table3_categories_at_their_thresholds(shape: tuple[int, int, int, int, int], category: str) -> None:
    action, observation = turn(*shape)
    assert loss_mask_category(action, observation, CFG) == (category, CFG.shares[category])


def test_retrieval_needs_r_above_one_even_when_tried_before_action() -> None:
    # With the default precedence, action takes every R <= 1 turn first; tried earlier, retrieval's
    # own R > 1 threshold decides.
    retrieval_first = LossMaskConfig(
        precedence=["echo", "boilerplate", "transform", "expansion", "retrieval", "action"]
    )
    assert loss_mask_category(*turn(2, 8, 3, 100, 100), retrieval_first)[0] == "action"  # R 1
    assert loss_mask_category(*turn(2, 8, 3, 100, 101), retrieval_first)[0] == "retrieval"
    assert loss_mask_category(*turn(2, 8, 3, 100, 80), retrieval_first)[0] == "action"  # short wins


def test_table3_examples_cover_all_seven_categories() -> None:
    assert (
        {c[2] for c in TABLE3_BOUNDARIES}
        == set(CFG.shares)
        == {
            "retrieval",
            "expansion",
            "action",
            "transform",
            "boilerplate",
            "echo",
            "other",
        }
    )


@given(texts, texts)
def test_default_precedence_assigns_the_smallest_matching_share(action: str, observation: str) -> None:
    _, share = loss_mask_category(action, observation, CFG)
    matches = matching_categories(action, observation, CFG)
    assert share == min((CFG.shares[m] for m in matches), default=CFG.shares["other"])


@given(texts, texts)
def test_echo_always_wins_over_boilerplate(action: str, observation: str) -> None:
    if signatures(CFG)["echo"](turn_overlap(action, observation)):
        assert loss_mask_category(action, observation, CFG)[0] == "echo"


def test_table3_examples() -> None:
    cmd = "cat /etc/hostname and print the build configuration of this host"
    assert loss_mask_category(cmd, cmd, CFG)[0] == "echo"
    long_new = " ".join(f"line{i} value{i}" for i in range(60))
    assert loss_mask_category("cat data.csv", long_new, CFG)[0] == "retrieval"
    assert loss_mask_category("rm -rf build && make all targets now please", "done", CFG) == ("action", 1.0)


def test_short_threshold_is_configurable() -> None:
    # obs longer than the action but short: action by the "short" rule, retrieval without it
    action, obs = "ls", "alpha.txt beta.txt"
    assert loss_mask_category(action, obs, CFG)[0] == "action"
    strict = LossMaskConfig(short_observation_chars=0)
    assert loss_mask_category(action, obs, strict)[0] == "retrieval"


@given(st.integers(0, 5000), st.floats(0, 1))
def test_kept_token_count(n: int, share: float) -> None:
    k = kept_token_count(n, share)
    assert 0 <= k <= n
    if n and share > 0:
        assert k >= 1 and k >= share * n - 1e-6
    start, end = kept_token_range(n, share, "tail")
    assert end == n and end - start == k
    start, end = kept_token_range(n, share, "head")
    assert start == 0 and end == k


@settings(max_examples=60, deadline=None)
@given(
    st.text(min_size=0, max_size=200),
    st.sampled_from([0.05, 0.1, 0.5, 1.0]),
    st.sampled_from(["head", "tail"]),
)
def test_kept_char_span_lies_on_character_edges(text: str, share: float, keep: str) -> None:
    counter = get_token_counter()
    start, end, kept = kept_char_span(counter, text, share, keep)
    assert 0 <= start <= end <= len(text)
    if keep == "tail":
        assert end == len(text) or kept == 0
    else:
        assert start == 0
    assert kept <= counter.count(text)
