"""Any valid trajectory survives Arrow -> model -> Arrow, Parquet, and JSON unchanged."""

from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import TRAJECTORY_SCHEMA, Trajectory, from_table, to_table
from schemas.jsonschema import trajectory_json_schema
from schemas.trajectory import _dump_json
from schemas.validate import check_record
from tests.helpers.strategies import trajectories


@given(trajectories)
def test_arrow_model_arrow_is_identity(traj: Trajectory) -> None:
    table = to_table([traj])
    assert table.schema.equals(TRAJECTORY_SCHEMA)
    back = from_table(table)[0]
    assert back == traj
    assert to_table([back]).equals(table)


@given(trajectories)
def test_json_round_trip_is_identity(traj: Trajectory) -> None:
    line = traj.to_json_line()
    back = Trajectory.from_json(json.loads(line))
    assert back == traj
    assert back.to_json_line() == line


@given(trajectories)
def test_generated_trajectories_pass_validation_and_json_schema(traj: Trajectory) -> None:
    import jsonschema

    assert check_record(traj.to_record()) == []
    assert check_record(traj.to_json()) == []
    jsonschema.validate(json.loads(traj.to_json_line()), trajectory_json_schema())


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(trajectories, min_size=1, max_size=6))
def test_parquet_round_trip(tmp_path_factory, trajs: list[Trajectory]) -> None:  # type: ignore[no-untyped-def]
    from schemas import iter_trajectories, write_trajectories

    root = tmp_path_factory.mktemp("ds")
    write_trajectories(root, trajs, row_group_rows=2, max_file_rows=3)
    assert list(iter_trajectories(root)) == trajs


def test_schema_is_explicit_and_versioned() -> None:
    assert TRAJECTORY_SCHEMA.metadata[b"worldline.schema_version"] == b"1.0.0"
    assert not TRAJECTORY_SCHEMA.field("id").nullable
    assert isinstance(TRAJECTORY_SCHEMA.field("turns").type, pa.ListType)


_flat_values = (
    st.text()
    | st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([2**64, -(2**63) - 1, 10**30, "\ud800 lone surrogate"])
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text(), _flat_values, max_size=6)
    | st.dictionaries(
        st.text(max_size=3), _flat_values | st.floats() | st.lists(st.text(max_size=2)), max_size=4
    )
)
def test_metadata_json_is_json_dumps_canonical_form(obj: dict[str, object]) -> None:
    """The metadata columns hold json.dumps's canonical text, whichever encoder wrote it."""
    assert _dump_json(obj) == json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
