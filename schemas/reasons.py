"""Reason codes: why a record was quarantined or dropped, or why turns were removed, in one enum.

The values are the stable strings written to disk: the cleaner's `quarantine/parts/*.parquet`
(`reason`) and `summary.json` (`per_reason`), the pools' `_build/removed.parquet` (`reason`) and
`stats.json` (`quarantined.*`, `dropped.*`, `turns_removed.*`), dataset cards and tests refer to them.
Never rename a value; add a member instead.
"""

from __future__ import annotations

from enum import StrEnum


class ReasonCode(StrEnum):
    """Why a record (or one episode, or some turns of it) left the data; the value is what is written."""

    # Reading a record (the cleaner's ingest, the pools' validation).
    UNSUPPORTED_FORMAT = "unsupported_format"  # not a trace format the cleaner reads
    CORRUPT_INPUT = "corrupt_input"  # truncated or damaged compression, unreadable bytes
    PARSE_ERROR = "parse_error"
    TOO_LARGE = "too_large"
    TOO_DEEP = "too_deep"
    BAD_ENCODING = "bad_encoding"
    NOT_A_TRAJECTORY = "not_a_trajectory"
    INVALID_RECORD = "invalid_record"  # a pools input row that is not a valid Trajectory
    MISSING_ID = "missing_id"  # a pools input row without an id
    # The paper's trajectory rules (section 3.1.2), in the cleaner and in the pools.
    SUPERSEDED_PREFIX = "superseded_prefix"
    NO_TURNS = "no_turns"
    TOO_FEW_TURNS = "too_few_turns"
    TOO_FEW_TURNS_AFTER_TURN_FILTERS = "too_few_turns_after_turn_filters"
    UNKNOWN_TOOL = "unknown_tool"  # the cleaner: a call to a tool the record does not declare
    UNDECLARED_TOOL = "undeclared_tool"  # the pools: the same rule over the trajectory's action space
    ENV_FAILURE = "env_failure"  # the cleaner: a GUI episode hit an environment failure
    GUI_ENV_FAILURE = "gui_env_failure"  # the pools: the same rule, with the pools' marker list
    LOW_QUALITY = "low_quality"
    # The paper's turn rules: counted per turn (`turns_removed.*`), never a whole record.
    EMPTY_ACTION_TURNS = "empty_action_turns"
    RETRY_CYCLE_TURNS = "retry_cycle_turns"
    GUI_NO_CHANGE_TURNS = "gui_no_change_turns"
    # The pools: turns carrying a harness fact (schemas.turn_facts) under filters.harness_facts.
    HARNESS_FACT = "harness_fact"  # a fact set to drop, or every turn masked
    HARNESS_FACT_TURNS = "harness_fact_turns"  # turns removed by a fact set to drop_turn
    # The pools: deduplication, decontamination and the per-pool token caps.
    EXACT_DUPLICATE = "exact_duplicate"
    NEAR_DUPLICATE = "near_duplicate"
    DUPLICATE_ID = "duplicate_id"
    EVAL_OVERLAP = "eval_overlap"
    HELD_OUT_BENCHMARK = "held_out_benchmark"  # recorded on a benchmark decontamination excludes
    UNGROUNDED = "ungrounded"  # a real replay disagrees with the recorded observations (grounding)
    EVAL_POOL_OVERLAP = "eval_pool_overlap"
    SFT_OVER_CAP = "sft_over_cap"
    RL_PROMPT_OVER_CAP = "rl_prompt_over_cap"
    # The cleaner's own failures: a record is quarantined, never lost.
    INTERNAL_ERROR = "internal_error"
    WORKER_DIED = "worker_died"  # the worker process cleaning the file was killed (out of memory, kill -9)
