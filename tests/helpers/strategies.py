"""Hypothesis strategies that generate any valid trajectory (used by property tests across the suite)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from schemas import (
    Action,
    ActionKind,
    ActionSpace,
    Domain,
    Observation,
    ObservationFormat,
    Source,
    SourceKind,
    ToolSpec,
    Trajectory,
    TrajectoryStatus,
    Turn,
)

# Text as Arrow/JSON can carry it: any Unicode except lone surrogates (not encodable as UTF-8).
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
opt_text = st.none() | text
json_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | text
    | st.floats(allow_nan=False, allow_infinity=False)
)
json_value: st.SearchStrategy[Any] = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
json_object = st.dictionaries(text, json_value, max_size=3)
timestamps = st.none() | st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)

tools = st.builds(ToolSpec, name=text, description=opt_text, parameters=st.none() | json_object)
turns = st.builds(
    Turn,
    action=st.builds(Action, kind=st.sampled_from(ActionKind), text=text, tool_name=opt_text),
    observation=st.builds(
        Observation, text=text, format=st.sampled_from(ObservationFormat), is_error=st.none() | st.booleans()
    ),
    started_at=timestamps,
    duration_s=st.none() | st.floats(min_value=0, max_value=1e6, allow_nan=False),
    exit_code=st.none() | st.integers(-(2**31), 2**31 - 1),
    state_changed=st.none() | st.booleans(),
    metadata=json_object,
)
trajectories = st.builds(
    Trajectory,
    # validation rejects blank ids, so a valid trajectory's id has a visible character
    id=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30).filter(str.strip),
    domain=st.sampled_from(Domain),
    source=st.builds(
        Source,
        kind=st.sampled_from(SourceKind),
        name=text,
        uri=opt_text,
        licence=opt_text,
        collected_at=timestamps,
        agent=opt_text,
        model=opt_text,
        group=opt_text,
    ),
    task=text,
    action_space=st.builds(ActionSpace, description=opt_text, tools=st.lists(tools, max_size=3)),
    turns=st.lists(turns, max_size=4),
    initial_state=opt_text,
    demonstrations=opt_text,
    simulation_instruction=opt_text,
    status=st.sampled_from(TrajectoryStatus),
    status_reason=opt_text,
    metadata=json_object,
)
