"""Runners and where the job reads and writes: the Dataflow Flex Template entry point hands every
template parameter and every extra pipeline option to the pool build, the build reads and writes
through a non-local Beam FileSystem, and a local build never starts Prism."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import DebugOptions, GoogleCloudOptions, PipelineOptions

import pipelines.build
from pipelines.build import resolve_inputs, run_build
from pipelines.config import PoolsConfig
from tests.helpers import memfs
from tests.helpers.pools_data import build_fixture

LAUNCHER = Path("infra/dataflow/main.py")
METADATA = Path("infra/dataflow/metadata.json")
POOLS = ("cpt", "sft", "rl", "eval")
CONFIG = """
assignment:
  seed: 5
  by_kind: {infra: cpt, public: cpt, knowledge: cpt, inhouse: {sft: 1, rl: 1, eval: 1}}
"""
# Options the Dataflow launcher adds to the template parameters (one of each kind).
BEAM_OPTIONS = ["--job_name=worldline-pools-nightly", "--experiments=use_runner_v2"]


def launch(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> list[PipelineOptions]:
    """Run the Flex Template entry point as the launcher does; return the options each pipeline got."""
    seen: list[PipelineOptions] = []
    real_runner_for = pipelines.build.runner_for

    def spy(options: PipelineOptions):  # type: ignore[no-untyped-def]
        seen.append(options)
        return real_runner_for(options)

    monkeypatch.setattr(pipelines.build, "runner_for", spy)
    monkeypatch.setattr("sys.argv", [str(LAUNCHER), *argv])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(LAUNCHER), run_name="__main__")
    assert done.value.code in (0, None), f"the template exited with {done.value.code}"
    return seen


def template_values(root: Path) -> dict[str, str]:
    """A value for every template parameter, from the fixture under `root`."""
    fx = build_fixture(root)
    (root / "pools.yaml").write_text(CONFIG)
    shards = fx["inputs"][0]  # type: ignore[index]
    return {
        "in": str(shards),
        "out": str(root / "out"),
        "config": str(root / "pools.yaml"),
        "knowledge": str(fx["knowledge"]),
        "eval": str(fx["eval"]),
    }


def test_flex_template_parameters_and_options_reach_the_pool_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = template_values(tmp_path)
    meta = json.loads(METADATA.read_text())
    assert {p["name"] for p in meta["parameters"]} == set(values), "a template parameter without a test value"
    # Dataflow passes parameters as --name=value, followed by the pipeline options.
    seen = launch([f"--{k}={v}" for k, v in values.items()] + BEAM_OPTIONS, monkeypatch)

    assert len(seen) == 1
    options = seen[0]
    assert options.view_as(GoogleCloudOptions).job_name == "worldline-pools-nightly"
    assert "use_runner_v2" in (options.view_as(DebugOptions).experiments or [])
    out = Path(values["out"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["assignment"]["seed"] == 5  # --config
    assert [Path(i["path"]) for i in manifest["inputs"]] == [Path(values["in"])]  # --in
    assert manifest["stats"]["records_in"] == 24  # the shards, not the quarantine-only folder
    assert manifest["stats"]["knowledge_in"] == 3  # --knowledge
    assert manifest["stats"]["dropped.eval_overlap"] == 1  # --eval
    assert all((out / pool / "manifest.json").exists() for pool in POOLS)  # --out


def test_build_job_reads_and_writes_through_a_non_local_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Beam job itself (input expansion, reads, spills, part files) uses only Beam FileSystems."""
    fx = build_fixture(tmp_path / "fixture")
    shards = Path(fx["inputs"][0])  # type: ignore[index]
    rules = {"infra": "cpt", "public": "cpt", "knowledge": "cpt", "inhouse": {"sft": 1, "rl": 1, "eval": 1}}
    cfg = PoolsConfig.from_dict({"assignment": {"by_kind": rules}})
    run_build(resolve_inputs([str(shards)], [], [], cfg), str(tmp_path / "local"), cfg, [])

    url = f"{memfs.SCHEME}://bucket-{tmp_path.name}"
    memfs.upload_tree(shards, f"{url}/shards")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)  # a URL handled as a local path would create folders here
    try:
        run_build(resolve_inputs([f"{url}/shards"], [], [], cfg), f"{url}/pools", cfg, [])
        written = memfs.listing(f"{url}/pools")
    finally:
        memfs.clear(url)
    assert list(work.iterdir()) == []
    for pool in ("cpt", "sft", "rl", "removed", "assignments"):
        local_parts = sorted((tmp_path / "local" / pool).glob("part-*.parquet"))
        remote_parts = sorted(k for k in written if k.startswith(f"{pool}/part-"))
        assert [f"{pool}/{p.name}" for p in local_parts] == remote_parts, pool
        for part in local_parts:
            remote = pq.read_table(pa.BufferReader(written[f"{pool}/{part.name}"])).to_pylist()
            local = pq.read_table(part).to_pylist()
            for row in local:  # removed rows name their input file: the same part, read from the bucket
                if row.get("input_file"):
                    row["input_file"] = row["input_file"].replace(str(shards), f"{url}/shards")
            assert remote == local, f"{pool}/{part.name} differs from the local build"
    assert sum(k.startswith(("cpt/", "sft/", "rl/")) for k in written) >= 3


def test_flex_template_builds_pools_from_and_to_a_non_local_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = template_values(tmp_path)
    url = f"{memfs.SCHEME}://bucket-{tmp_path.name}"
    remote = {
        "in": f"{url}/shards",
        "out": f"{url}/pools",
        "config": values["config"],  # inside the image
        "knowledge": f"{url}/knowledge.jsonl",
        "eval": f"{url}/eval/terminal_test.jsonl",
    }
    memfs.upload_tree(Path(values["in"]), remote["in"])
    memfs.upload_tree(Path(values["knowledge"]).parent, url)
    try:
        launch([f"--{k}={v}" for k, v in remote.items()] + BEAM_OPTIONS, monkeypatch)
        written = memfs.listing(remote["out"])
    finally:
        memfs.clear(url)
    manifest = json.loads(written["manifest.json"])
    assert manifest["stats"]["records_in"] == 24 and manifest["stats"]["knowledge_in"] == 3
    assert manifest["stats"]["dropped.eval_overlap"] == 1
    assert all(f"{pool}/manifest.json" in written for pool in POOLS)
    assert not any(k.startswith("_build/") and "/runs/" in k for k in written), "spill files left behind"


def download_tree(url: str, local: Path) -> None:
    for rel, data in memfs.listing(url).items():
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(data)


def test_verify_reads_pools_and_inputs_from_a_non_local_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pools verify URL` proves a clean remote build and catches a violation planted there (with
    the manifest's checksums and statistics rewritten to hide it)."""
    from typer.testing import CliRunner

    from tests.pipelines.test_pools_verify import assign, edit_part, hide, pooled_row
    from worldline.cli import app

    values = template_values(tmp_path)
    url = f"{memfs.SCHEME}://bucket-{tmp_path.name}"
    remote = {
        "in": f"{url}/shards",
        "out": f"{url}/pools",
        "config": values["config"],
        "knowledge": f"{url}/knowledge.jsonl",
        "eval": f"{url}/eval/terminal_test.jsonl",
    }
    memfs.upload_tree(Path(values["in"]), remote["in"])
    memfs.upload_tree(Path(values["knowledge"]).parent, url)
    work = tmp_path / "cwd"
    work.mkdir()
    try:
        launch([f"--{k}={v}" for k, v in remote.items()], monkeypatch)
        monkeypatch.chdir(work)  # a URL handled as a local path would create folders here
        for beam in ([], ["--beam"]):
            clean = CliRunner().invoke(app, ["pools", "verify", remote["out"], *beam])
            assert clean.exit_code == 0, clean.output
            assert "verified" in clean.output

        bad = tmp_path / "bad"
        download_tree(remote["out"], bad)
        edit_part(bad, "cpt", lambda rs: [*rs, pooled_row(bad, "cpt", "contaminated")])
        assign(bad, "contaminated", "cpt")
        edit_part(bad, "removed", lambda rs: [r for r in rs if r["record_id"] != "contaminated"])
        hide(bad)
        memfs.clear(remote["out"] + "/")
        memfs.upload_tree(bad, remote["out"])
        planted = [CliRunner().invoke(app, ["pools", "verify", remote["out"], *b]) for b in ([], ["--beam"])]
        left = [k for k in memfs.listing(remote["out"]) if "/verify-" in k]
    finally:
        memfs.clear(url)
    assert list(work.iterdir()) == []
    assert left == [], "the verify job left its work files"
    for result in planted:
        assert result.exit_code == 1, result.output
        assert "eval_overlap" in result.output and "checksum" not in result.output
    assert planted[0].output == planted[1].output


def test_default_runner_is_the_local_fn_api_runner_never_prism(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Without --runner a build runs on the FnApiRunner, whatever the network: Beam's own default would
    try to download and start Prism first."""
    from apache_beam.runners.portability import prism_runner
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from typer.testing import CliRunner

    from pipelines.runners import local_runner
    from worldline.cli import app

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the Prism runner must not be started for a local build")

    monkeypatch.setattr(prism_runner.PrismRunner, "__init__", refuse)
    multi = PipelineOptions(["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"])
    assert isinstance(local_runner(multi), fn_runner.FnApiRunner)
    build_fixture(tmp_path)
    result = CliRunner().invoke(
        app, ["pools", "build", "--in", str(tmp_path / "shards"), "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    assert "reconciles" in result.output


def test_dask_jobs_get_one_partition_per_worker_thread_unless_the_user_chose() -> None:
    import os

    from pipelines.runners import with_dask_partitions

    dask = "--runner=apache_beam.runners.dask.dask_runner.DaskRunner"
    assert with_dask_partitions([]) == []
    assert with_dask_partitions(["--direct_num_workers", "2"]) == ["--direct_num_workers", "2"]
    assert with_dask_partitions([dask]) == [dask, f"--dask_npartitions={os.cpu_count()}"]
    for chosen in ("--dask_npartitions=3", "--dask_partition_size=50"):
        assert with_dask_partitions([dask, chosen]) == [dask, chosen]
