"""Records without a task (cleaned recordings have none) are grouped per record under the default
`group_by: task`, so a task-less source spreads over the pools; the build says how many were grouped
which way."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from pipelines.build import resolve_inputs, run_build
from pipelines.config import PoolsConfig
from pipelines.finalize import finalize
from pipelines.stages.assign import NO_TASK, grouping_note, record_group
from schemas.shards import write_trajectories
from schemas.trajectory import Source, SourceKind
from tests.helpers.pools_data import terminal
from worldline.cli import app

BLANK = st.text(alphabet=" \t\n\r", max_size=5)


@given(task=BLANK, ids=st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=6, unique=True))
def test_records_without_a_task_are_their_own_groups(task: str, ids: list[str]) -> None:
    source = Source(kind=SourceKind.INHOUSE, name="team-shell-logs")
    groups = [record_group(source, task, rid, "task") for rid in ids]
    assert len({g for g, _ in groups}) == len(ids) and {way for _, way in groups} == {NO_TASK}
    # A task still keeps its records together, and an explicit group still wins.
    same = {record_group(source, f"{task}fix the build{task}", rid, "task")[0] for rid in ids}
    assert len(same) == 1
    explicit = Source(kind=SourceKind.INHOUSE, name="team-shell-logs", group="g1")
    assert {record_group(explicit, task, rid, "task") for rid in ids} == {("g1", None)}


@pytest.mark.slow  # a whole Beam build (about half a minute)
def test_seven_taskless_sessions_spread_over_the_pools(tmp_path: Path) -> None:
    sessions = [terminal(f"rec-{i}", "team-shell-logs", SourceKind.INHOUSE, 900 + i) for i in range(7)]
    for traj in sessions:
        traj.task = ""  # what `worldline clean` gives a recording
    with_task = [terminal(f"task-{i}", "team-shell-logs", SourceKind.INHOUSE, 950 + i) for i in range(2)]
    for traj in with_task:
        traj.task = "fix the failing build"
    write_trajectories(tmp_path / "in", sessions + with_task)
    cfg = PoolsConfig()  # in-house data: half SFT, half RL, by source group
    ins = [str(tmp_path / "in")]
    run_build(resolve_inputs(ins, [], [], cfg), str(tmp_path / "out"), cfg, [])
    manifest = finalize(tmp_path / "out", cfg, ins, [], [])

    assignments = [
        r
        for f in sorted((tmp_path / "out" / "assignments").glob("*.parquet"))
        for r in pq.read_table(f).to_pylist()
    ]
    pool_of = {r["trajectory_id"]: r["pool"] for r in assignments}
    group_of = {r["trajectory_id"]: r["source_id"] for r in assignments}
    assert len({group_of[t.id] for t in sessions}) == 7
    assert len({pool_of[t.id] for t in sessions}) == 2  # not all seven in one pool
    assert len({group_of[t.id] for t in with_task}) == 1 and len({pool_of[t.id] for t in with_task}) == 1

    stats = manifest["stats"]
    assert stats["groups_defaulted"] == 9
    assert stats[f"groups_defaulted_by.{NO_TASK}"] == 7 and stats["groups_defaulted_by.task"] == 2
    note = grouping_note(stats, cfg.assignment.group_by)
    assert note and "9 trajectories" in note and "7 one group per record (they have no task)" in note
    assert "2 by task" in note

    code = CliRunner().invoke(app, ["pools", "build", "--in", ins[0], "--out", str(tmp_path / "out2")])
    output = " ".join(code.output.split())
    assert code.exit_code == 0 and note in output
