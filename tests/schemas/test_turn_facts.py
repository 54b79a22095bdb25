"""Harness facts live under one metadata key and survive a Parquet round trip."""

from __future__ import annotations

import pytest

from schemas import SourceKind, turn_facts
from tests.helpers.pools_data import terminal


def test_facts_are_recorded_under_one_key_and_round_trip() -> None:
    traj = terminal("t1", "g1", SourceKind.INFRA, seed=1, turns=1)
    meta = traj.turns[0].metadata
    turn_facts.record(meta, turn_facts.TRUNCATED, {"bytes_total": 10, "bytes_kept": 4})
    turn_facts.record(meta, turn_facts.TIMED_OUT, {"after_s": 3.0})
    back = type(traj).from_record(traj.to_record())
    assert turn_facts.facts(back.turns[0].metadata) == {
        "truncated": {"bytes_total": 10, "bytes_kept": 4},
        "timed_out": {"after_s": 3.0},
    }
    assert turn_facts.has(back.turns[0].metadata, turn_facts.TIMED_OUT)
    assert not turn_facts.has(back.turns[0].metadata, turn_facts.OUT_OF_ACTION_SPACE)


def test_unknown_fact_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown harness fact"):
        turn_facts.record({}, "slow", {})
    assert turn_facts.facts({"harness": "not a dict"}) == {}
