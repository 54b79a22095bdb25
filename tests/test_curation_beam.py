"""The Beam job runs the same graph: same accepted ids and counts as `worldline clean`."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curation_agents.model import CleanConfig
from curation_agents.runner import CleanRun
from pipelines.clean_beam import run
from schemas import TRAJECTORY_SCHEMA, iter_trajectories

FIXTURES = Path(__file__).parent / "fixtures"


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
