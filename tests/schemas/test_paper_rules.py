"""The paper's rules, each in one place: reason codes (the strings written today), the retry-cycle
rule with its two named modes, the GUI-failure rule set and the quarantine layouts."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from curation_agents.turn_rules import is_rejected_pair, skip_retry_cycles
from schemas import trajectory as tj
from schemas.quarantine import CLEAN_QUARANTINE_SCHEMA, POOL_QUARANTINE_FIELDS
from schemas.reasons import ReasonCode

# Every reason code the cleaner and the pools write to disk today (quarantine parts, summary.json,
# _build/removed.parquet, stats.json); a value must never change.
CLEANER_CODES = [
    "unsupported_format",
    "corrupt_input",
    "parse_error",
    "too_large",
    "too_deep",
    "bad_encoding",
    "not_a_trajectory",
    "superseded_prefix",
    "no_turns",
    "too_few_turns",
    "unknown_tool",
    "env_failure",
    "low_quality",
    "internal_error",
    "worker_died",
]
POOLS_CODES = [
    "invalid_record",
    "missing_id",
    "too_few_turns",
    "undeclared_tool",
    "gui_env_failure",
    "too_few_turns_after_turn_filters",
    "empty_action_turns",
    "retry_cycle_turns",
    "gui_no_change_turns",
    "exact_duplicate",
    "near_duplicate",
    "duplicate_id",
    "eval_overlap",
    "eval_pool_overlap",
    "sft_over_cap",
    "rl_prompt_over_cap",
    # added with the harness facts (schemas/turn_facts.py): a trajectory or its turns dropped for one
    "harness_fact",
    "harness_fact_turns",
    # source-level decontamination (written since it was added; now in the enum) and grounding verdicts
    "held_out_benchmark",
    "ungrounded",
]


def test_reason_codes_are_the_strings_written_today() -> None:
    assert sorted(code.value for code in ReasonCode) == sorted(set(CLEANER_CODES + POOLS_CODES))
    for value in CLEANER_CODES + POOLS_CODES:
        assert ReasonCode(value) == value and f"{ReasonCode(value)}" == value


def test_quarantine_layouts_are_unchanged_on_disk() -> None:
    assert CLEAN_QUARANTINE_SCHEMA.names == [
        "record_key",
        "source_path",
        "locator",
        "format",
        "stage",
        "reason",
        "detail",
        "episode",
        "record_outcome",
    ]
    assert [f.name for f in POOL_QUARANTINE_FIELDS] == [
        "record_id",
        "input_file",
        "stage",
        "reason",
        "detail",
    ]
    assert all(f.type == pa.string() for f in POOL_QUARANTINE_FIELDS)
    assert (
        CLEAN_QUARANTINE_SCHEMA.field("episode").nullable
        and CLEAN_QUARANTINE_SCHEMA.field("episode").type == pa.int32()
    )


def test_the_collectors_failure_check_is_the_shared_rule() -> None:
    from collectors.gui_common import detect_page_failure as collectors_check
    from schemas.gui_failure import detect_page_failure, error_state_marker, trace_failure_marker

    assert collectors_check is detect_page_failure
    assert detect_page_failure(status=None, title="503 Service Unavailable", headings=[], text="") is not None
    assert trace_failure_marker("Please verify you are human") == "verify you are human"
    assert trace_failure_marker("all good") is None
    assert error_state_marker("RootWebArea 'CAPTCHA'", ["captcha"], 150) == "captcha"


# -- the retry-cycle rule ---------------------------------------------------------------------------


def _traj(turns: list[tj.Turn]) -> tj.Trajectory:
    return tj.Trajectory(
        id="r",
        domain=tj.Domain.MCP,
        source=tj.Source(kind=tj.SourceKind.INHOUSE, name="s"),
        task="t",
        turns=turns,
    )


def ok(kind: tj.ActionKind = tj.ActionKind.TOOL_CALL) -> tj.Turn:
    return tj.Turn(
        tj.Action(kind, '{"name": "read_file", "arguments": {}}', "read_file"), tj.Observation("contents")
    )


def rejected(kind: tj.ActionKind = tj.ActionKind.TOOL_CALL) -> tj.Turn:
    return tj.Turn(
        tj.Action(kind, '{"name": "read_file", "arguments": {"path": '),
        tj.Observation("malformed JSON in tool call", tj.ObservationFormat.TEXT, is_error=True),
    )


def test_the_modes_differ_only_where_no_retry_follows() -> None:
    trailing = _traj([ok(), rejected()])
    assert skip_retry_cycles(trailing, mode="every_rejected")[1] == 1
    assert skip_retry_cycles(trailing, mode="retried_only")[1] == 0
    moved_on = _traj([ok(), rejected(), ok(tj.ActionKind.MESSAGE)])
    assert skip_retry_cycles(moved_on, mode="every_rejected")[1] == 1
    assert skip_retry_cycles(moved_on, mode="retried_only")[1] == 0
    retried = _traj([ok(), rejected(), rejected(), ok()])
    for mode in ("every_rejected", "retried_only"):
        out, n = skip_retry_cycles(retried, mode=mode)  # type: ignore[arg-type]
        assert n == 2 and len(out.turns) == 2 and out.turns[1].metadata["retries_skipped"] == 2
    assert len(retried.turns) == 4  # the input is not modified
    assert skip_retry_cycles(retried)[1] == 2  # the cleaner's mode is the default


def _every_rejected_reference(traj: tj.Trajectory) -> tuple[list[tj.Turn], int]:
    """The cleaner's rule as it was written before the two modes shared one function."""
    kept: list[tj.Turn] = []
    skipped = pending = 0
    for turn in traj.turns:
        if is_rejected_pair(turn):
            skipped += 1
            pending += 1
            continue
        if pending:
            turn = dataclasses.replace(turn, metadata={**turn.metadata, "retries_skipped": pending})
            pending = 0
        kept.append(turn)
    return kept, skipped


def _retried_only_reference(traj: tj.Trajectory) -> tuple[list[tj.Turn], int]:
    """The pools' rule as it was written before the two modes shared one function."""
    turns = list(traj.turns)
    flags = [is_rejected_pair(t) for t in turns]
    skip = [False] * len(turns)
    i = 0
    while i < len(turns):
        if not flags[i]:
            i += 1
            continue
        j = i
        while j < len(turns) and flags[j]:
            j += 1
        if j < len(turns) and all(turns[k].action.kind == turns[j].action.kind for k in range(i, j)):
            for k in range(i, j):
                skip[k] = True
            turns[j] = dataclasses.replace(turns[j], metadata={**turns[j].metadata, "retries_skipped": j - i})
        i = j
    return [t for t, s in zip(turns, skip, strict=True) if not s], sum(skip)


KINDS = st.sampled_from([tj.ActionKind.TOOL_CALL, tj.ActionKind.MESSAGE])
TURNS = st.lists(
    st.tuples(st.booleans(), KINDS).map(lambda p: rejected(p[1]) if p[0] else ok(p[1])), max_size=12
)


@settings(max_examples=200, deadline=None)
@given(TURNS)
def test_both_modes_match_the_rules_they_replace(turns: list[tj.Turn]) -> None:
    traj = _traj(turns)
    out, n = skip_retry_cycles(traj, mode="every_rejected")
    assert (out.turns, n) == _every_rejected_reference(traj)
    out, n = skip_retry_cycles(traj, mode="retried_only")
    assert (out.turns, n) == _retried_only_reference(traj)
