"""The Beam job runs the same graph: same accepted ids and counts as `worldline clean`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.model import CleanConfig
from pipelines.clean_beam import run
from schemas import TRAJECTORY_SCHEMA, iter_trajectories

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["in_memory", "multi_processing"])
def test_beam_job_matches_the_cli(tmp_path: Path, mode: str) -> None:
    inputs = [str(FIXTURES / "public"), str(FIXTURES / "terminal")]
    run([*inputs, "--out", str(tmp_path / "beam"), "--direct_num_workers=2", f"--direct_running_mode={mode}"])
    reference = CleanRun(inputs, tmp_path / "cli", CleanConfig()).run()
    summary = json.loads((tmp_path / "beam" / "summary.json").read_text())
    assert {k: summary[k] for k in ("records_in", "accepted", "quarantined", "per_reason")} == {
        k: reference[k] for k in ("records_in", "accepted", "quarantined", "per_reason")
    }
    parts = sorted((tmp_path / "beam" / "trajectories").glob("*.parquet"))
    assert all(pq.read_schema(p).equals(TRAJECTORY_SCHEMA, check_metadata=False) for p in parts)
    beam_ids = {t.id for p in parts for t in iter_trajectories(p)}
    assert beam_ids == {t.id for t in iter_trajectories(tmp_path / "cli")}


@pytest.mark.slow
def test_beam_job_reads_and_writes_a_non_local_filesystem(tmp_path: Path) -> None:
    from apache_beam.io.filesystems import FileSystems

    from tests.helpers.memfs import FILES, clear, upload_tree

    clear("wltest://bucket/")
    upload_tree(FIXTURES / "public", "wltest://bucket/in/public")
    upload_tree(FIXTURES / "terminal", "wltest://bucket/in/terminal")
    upload_tree(
        FIXTURES / "public", "wltest://bucket/other/public"
    )  # same folder name: distinct dataset paths
    inputs = ["wltest://bucket/in/public", "wltest://bucket/in/terminal", "wltest://bucket/other/public"]
    run([*inputs, "--out", "wltest://bucket/out", "--direct_running_mode=in_memory"])
    summary = json.loads(FILES["wltest://bucket/out/summary.json"])
    public = CleanRun([str(FIXTURES / "public")], tmp_path / "cli-public", CleanConfig()).run()
    terminal = CleanRun([str(FIXTURES / "terminal")], tmp_path / "cli-terminal", CleanConfig()).run()
    for key in ("records_in", "accepted", "quarantined"):
        assert summary[key] == 2 * public[key] + terminal[key]
    parts = [p for p in FILES if p.startswith("wltest://bucket/out/trajectories/") and p.endswith(".parquet")]
    assert parts and not any(
        "/." in p for p in FILES if p.startswith("wltest://bucket/out/")
    )  # temp files gone
    trajs = [t for p in parts for t in iter_trajectories_bytes(FILES[p])]
    assert {t.source.uri.split("/")[0] for t in trajs} == {"in", "other", "terminal"}
    assert len({t.id for t in trajs}) == len(trajs) >= summary["accepted"]  # ids stay distinct
    with FileSystems.open("wltest://bucket/out/summary.json") as fh:
        assert json.loads(fh.read()) == summary


def iter_trajectories_bytes(data: bytes) -> list[Any]:
    import io

    from schemas import Trajectory

    table = pq.read_table(io.BytesIO(data))
    return [Trajectory.from_record(row) for row in table.to_pylist()]
