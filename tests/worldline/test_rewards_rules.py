"""Rule verifiers: derived from the real observation, checked against a prediction, 0/1 with a reason."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.render import rule_verifier
from schemas.trajectory import Action, ActionKind, Domain, Observation, Source, SourceKind, Trajectory, Turn
from worldline.rewards.rules import derive_rules, normalise_text, verify

KEYS = json.dumps([{"keystrokes": "cat notes.txt\n", "duration": 1}])


def kinds(rules: list[dict[str, object]]) -> list[object]:
    return [rule["kind"] for rule in rules]


def test_file_read_is_an_exact_match_that_ignores_trailing_spaces() -> None:
    rules = derive_rules("terminal", KEYS, "alpha\nbeta\n$ ")
    assert kinds(rules) == ["exact_match"]
    outcome = verify("alpha   \r\nbeta\n$\n\n", rules)
    assert outcome is not None and outcome.score == 1
    wrong = verify("alpha\nbeta2\n$", rules)
    assert wrong is not None and wrong.score == 0 and "character 10" in wrong.reason


def test_runtime_metadata_is_format_checked_and_the_rest_exact() -> None:
    truth = "started at 2026-11-30 12:34:56 on worker 3\ndone"
    rules = derive_rules("terminal", "cat run.log", truth)
    assert kinds(rules) == ["masked_match"]
    assert verify("started at 2025-01-02 09:00:01 on worker 3\ndone", rules).score == 1  # type: ignore[union-attr]
    assert verify("started at 2025-01-02 29:00:01 on worker 3\ndone", rules).score == 0  # type: ignore[union-attr]
    assert verify("started at 2025-01-02 09:00:01 on worker 4\ndone", rules).score == 0  # type: ignore[union-attr]


def test_process_ids_get_a_range_check() -> None:
    rules = derive_rules("terminal", "echo pid $$", "pid 4242")
    assert kinds(rules) == ["range"]
    assert verify("pid 17", rules).score == 1  # type: ignore[union-attr]
    assert verify("pid 0", rules).score == 0  # type: ignore[union-attr]
    missing = verify("no process", rules)
    assert missing is not None and missing.score == 0 and "no value" in missing.reason


def test_tool_results_get_a_schema_check() -> None:
    truth = json.dumps({"content": [{"type": "text", "text": "3 files"}], "isError": False})
    rules = derive_rules(
        "mcp", json.dumps({"name": "list_dir", "arguments": {}}), truth, tool_name="list_dir"
    )
    assert kinds(rules) == ["json_schema"]
    ok = json.dumps({"content": [{"type": "text", "text": "4 files"}], "isError": False})
    assert verify(ok, rules).score == 1  # type: ignore[union-attr]
    flipped = verify(json.dumps({"content": [], "isError": True}), rules)
    assert flipped is not None and flipped.score == 0 and "isError" in flipped.reason
    assert verify(json.dumps({"isError": False}), rules).score == 0  # type: ignore[union-attr]
    assert "not JSON" in verify("3 files", rules).reason  # type: ignore[union-attr]


def test_read_tool_with_json_result_gets_both_checks() -> None:
    truth = json.dumps({"text": "hello"})
    rules = derive_rules("swe", "{}", truth, tool_name="Read")
    assert kinds(rules) == ["json_schema", "exact_match"]


@pytest.mark.parametrize(
    ("domain", "action", "observation", "is_error"),
    [
        ("web", "click('12')", "RootWebArea 'Home'", None),
        ("terminal", "ls -la", "a b c", None),  # listing of pre-existing content: plausibility only
        ("terminal", "cat missing", "cat: missing: No such file or directory", True),
        ("search", json.dumps({"query": "x"}), "1. result", None),
    ],
)
def test_unverifiable_turns_have_no_rules(
    domain: str, action: str, observation: str, is_error: bool | None
) -> None:
    assert derive_rules(domain, action, observation, is_error=is_error) == []
    assert verify("anything", []) is None


def test_unknown_rule_kind_fails_with_its_name() -> None:
    outcome = verify("x", [{"kind": "telepathy"}])
    assert outcome is not None and outcome.score == 0 and "telepathy" in outcome.reason


@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200),
    st.sampled_from(["cat a.txt", "wc -l a", "grep x f", KEYS]),
    st.sampled_from(
        ["", " at 2026-01-02 03:04:05", " id 0x7ffde4a1b2c0", " 123e4567-e89b-12d3-a456-426614174000"]
    ),
)
def test_the_real_observation_always_passes_its_own_rules(text: str, command: str, metadata: str) -> None:
    truth = text + metadata
    rules = derive_rules("terminal", command, truth)
    outcome = verify(truth, rules)
    assert outcome is None or outcome.score == 1, outcome.reason if outcome else ""


@given(st.text(max_size=80))
def test_normalisation_is_idempotent(text: str) -> None:
    assert normalise_text(normalise_text(text)) == normalise_text(text)


@pytest.mark.parametrize(
    ("command", "output"),
    [("cat a.txt", "hello"), ("ls", "a b"), ("wc -l f", "3 f"), ("date", "Mon 12:00:00"), ("cat x", "")],
)
def test_rule_checks_agree_with_the_pool_verifier_column(command: str, output: str) -> None:
    traj = Trajectory(
        id="t",
        domain=Domain.TERMINAL,
        source=Source(kind=SourceKind.INHOUSE, name="g"),
        task="t",
        turns=[Turn(Action(ActionKind.COMMAND, command), Observation(output))],
    )
    has_exact = "exact_match" in kinds(derive_rules("terminal", command, output))
    assert (rule_verifier(traj, 1) == "exact_match") == has_exact
