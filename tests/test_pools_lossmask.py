"""Property tests for the CPT loss-mask categoriser and the kept-token decisions."""

from __future__ import annotations

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


@given(texts, texts)
def test_category_is_first_matching_signature(action: str, observation: str) -> None:
    category, share = loss_mask_category(action, observation, CFG)
    matches = matching_categories(action, observation, CFG)
    assert category == (matches[0] if matches else "other")
    assert share == CFG.shares[category]
    stats = turn_overlap(action, observation)
    sigs = signatures(CFG)
    if category != "other":
        assert sigs[category](stats)
    for earlier in (
        CFG.precedence[: CFG.precedence.index(category)] if category != "other" else CFG.precedence
    ):
        assert not sigs[earlier](stats)


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
