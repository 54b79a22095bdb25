"""The pools build on a real distributed engine: Beam's DaskRunner on a dask.distributed LocalCluster
writes the same pools as the local FnApiRunner."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.runners import with_dask_partitions
from tests.pipelines.test_pools_build import build

DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


@pytest.mark.slow
def test_dask_runner_builds_the_same_pools(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed", reason="apache-beam[dask] is a dev dependency")
    reference = build(tmp_path / "in-local", tmp_path / "local", [])
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        args = [f"--runner={DASK_RUNNER}", f"--dask_client_address={cluster.scheduler_address}"]
        # One bag partition per worker thread of the cluster, so both workers take part.
        assert with_dask_partitions(args)[-1] == "--dask_npartitions=2"
        on_dask = build(tmp_path / "in-dask", tmp_path / "dask", args)
        # The runner's client is closed with the job: no thread of it outlives the build.
        assert all(c.status == "closed" for c in distributed.Client._instances)
    assert on_dask["stats"] == reference["stats"] and on_dask["counts"]["reconciles"]
    for name in ("cpt", "sft", "rl", "eval", "assignments", "removed"):
        a = [pq.read_table(f) for f in sorted((tmp_path / "local" / name).glob("part-*.parquet"))]
        b = [pq.read_table(f) for f in sorted((tmp_path / "dask" / name).glob("part-*.parquet"))]
        assert len(a) == len(b) > 0, name
        for x, y in zip(a, b, strict=True):
            if name == "removed":  # input paths differ between the two temp folders
                x, y = x.drop_columns(["input_file"]), y.drop_columns(["input_file"])
            assert x.equals(y), name


@pytest.mark.slow
def test_verify_job_on_the_dask_runner_reports_what_the_in_process_verify_reports(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed", reason="apache-beam[dask] is a dev dependency")
    from typer.testing import CliRunner

    from tests.pipelines.test_pools_verify import edit_part, hide
    from worldline.cli import app

    build(tmp_path / "in", tmp_path / "out", [])
    bad = tmp_path / "bad"
    shutil.copytree(tmp_path / "out", bad)
    edit_part(bad, "rl", lambda rs: rs[1:])
    hide(bad, summaries=False)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        args = ["--", f"--runner={DASK_RUNNER}", f"--dask_client_address={cluster.scheduler_address}"]
        results = [
            CliRunner().invoke(app, ["pools", "verify", str(out), *extra])
            for out in (tmp_path / "out", bad)
            for extra in ([], args)
        ]
    assert [r.exit_code for r in results] == [0, 0, 1, 1], [r.output for r in results]
    assert "stats" in results[3].output and results[2].output == results[3].output
