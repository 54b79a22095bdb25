"""Runner configurations: Dataflow Flex Template metadata and portable-runner options parse as documented."""

from __future__ import annotations

import json
from pathlib import Path

from apache_beam.options.pipeline_options import (
    DebugOptions,
    GoogleCloudOptions,
    PipelineOptions,
    PortableOptions,
    StandardOptions,
)
from typer.main import get_command

from worldline.cli import app


def test_flex_template_parameters_are_build_options() -> None:
    meta = json.loads(Path("infra/dataflow/metadata.json").read_text())
    build = get_command(app).commands["pools"].commands["build"]  # type: ignore[attr-defined]
    options = {o.lstrip("-") for p in build.params for o in p.opts}
    assert {p["name"] for p in meta["parameters"]} <= options


def test_dataflow_and_portable_options_parse() -> None:
    df = PipelineOptions(
        [
            "--runner",
            "DataflowRunner",
            "--project",
            "p",
            "--region",
            "us-central1",
            "--temp_location",
            "gs://b/tmp",
            "--experiments",
            "use_runner_v2",
        ]
    )
    assert df.view_as(StandardOptions).runner == "DataflowRunner"
    assert df.view_as(GoogleCloudOptions).region == "us-central1"
    assert "use_runner_v2" in df.view_as(DebugOptions).experiments
    flink = PipelineOptions(
        ["--runner", "PortableRunner", "--job_endpoint", "localhost:8099", "--environment_type", "DOCKER"]
    )
    assert flink.view_as(PortableOptions).job_endpoint == "localhost:8099"


def test_default_runner_is_the_local_fn_api_runner_never_prism(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Without --runner a build runs on the FnApiRunner, whatever the network: Beam's own default would
    try to download and start Prism first."""
    from apache_beam.runners.portability import prism_runner
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from typer.testing import CliRunner

    from pipelines.runners import local_runner
    from tests.pools_data import build_fixture

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
