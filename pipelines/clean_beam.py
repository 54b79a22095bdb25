# Beam's transforms carry no type annotations; calling them is the point of this module.
# mypy: disable-error-code="no-untyped-call"
"""The curation graph as an Apache Beam job: the same ingest -> denoise -> segment -> align -> score
over many files, spread across workers (DirectRunner locally; Dataflow, Flink or Spark at scale).

Files are the unit of distribution (records inside a file stream in order). Accepted trajectories are
written as Parquet under the explicit trajectory schema to OUT/trajectories/, quarantined records under
the quarantine schema to OUT/quarantine/parts/, and the reconciled counts to OUT/summary.json.

    python -m pipelines.clean_beam PATH... --out DIR [--source-name N] [Beam pipeline options]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import combiners

from curation_agents.model import CleanConfig
from curation_agents.reader import discover, iter_records
from curation_agents.runner import (
    QUARANTINE_DIR,
    QUARANTINE_PARTS,
    QUARANTINE_SCHEMA,
    GraphRunner,
    record_ref,
)
from pipelines.runners import runner_for
from schemas import TRAJECTORY_SCHEMA, Trajectory
from schemas.shards import TRAJECTORY_DIR, atomic_write_json

ACCEPTED = "accepted"
QUARANTINED = "quarantined"
COUNTS = "counts"


class CleanFileFn(beam.DoFn):
    """Consumes (file path, dataset path); produces trajectory rows (main output), quarantine rows and
    per-record outcome counts (tagged outputs). The graph is compiled once per worker."""

    def __init__(self, config: CleanConfig) -> None:
        self.config = config
        self.runner: GraphRunner | None = None

    def setup(self) -> None:
        self.runner = GraphRunner(self.config, None)

    def process(self, element: tuple[str, str]) -> Iterator[Any]:
        assert self.runner is not None
        path, dataset_path = element
        for raw in iter_records(Path(path), self.config.limits):
            ref = record_ref(raw, Path(path), dataset_path)
            outcome = self.runner.run(raw, ref)
            verdict = ACCEPTED if outcome.accepted else QUARANTINED
            for traj in outcome.accepted:
                yield Trajectory.from_json(traj).to_record()
            for q in outcome.quarantine:
                yield beam.pvalue.TaggedOutput(
                    QUARANTINED,
                    {
                        "record_key": ref["key"],
                        "source_path": ref["source_path"],
                        "locator": ref["locator"],
                        "format": ref["format"],
                        "stage": q["stage"],
                        "reason": q["reason"],
                        "detail": q["detail"],
                        "episode": q.get("episode"),
                        "record_outcome": verdict,
                    },
                )
            reason = outcome.quarantine[0]["reason"] if verdict == QUARANTINED else ""
            yield beam.pvalue.TaggedOutput(COUNTS, (verdict, reason))


def summarise(outcomes: list[tuple[str, str]]) -> dict[str, Any]:
    """The summary.json body from per-record (verdict, reason) pairs; counts reconcile by construction."""
    verdicts = Counter(v for v, _ in outcomes)
    reasons = Counter(r for v, r in outcomes if v == QUARANTINED)
    return {
        "records_in": len(outcomes),
        "accepted": verdicts[ACCEPTED],
        "quarantined": verdicts[QUARANTINED],
        "per_reason": dict(sorted(reasons.items())),
        "runner": "beam",
    }


def build(pipeline: beam.Pipeline, paths: list[str], out: str, config: CleanConfig) -> None:
    files = [(str(f), d) for f, d in discover(paths)]
    results = (
        pipeline
        | "Files" >> beam.Create(files)
        | "Spread" >> beam.Reshuffle()
        | "Clean" >> beam.ParDo(CleanFileFn(config)).with_outputs(QUARANTINED, COUNTS, main=ACCEPTED)
    )
    _ = results[ACCEPTED] | "WriteAccepted" >> beam.io.WriteToParquet(
        str(Path(out) / TRAJECTORY_DIR / "part"), TRAJECTORY_SCHEMA, codec="zstd", file_name_suffix=".parquet"
    )
    _ = results[QUARANTINED] | "WriteQuarantine" >> beam.io.WriteToParquet(
        str(Path(out) / QUARANTINE_DIR / QUARANTINE_PARTS / "part"),
        QUARANTINE_SCHEMA,
        codec="zstd",
        file_name_suffix=".parquet",
    )
    _ = (
        results[COUNTS]
        | "Gather" >> combiners.ToList()
        | "Summary"
        >> beam.Map(lambda outcomes: atomic_write_json(Path(out) / "summary.json", summarise(outcomes)))
    )


def run(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--out", required=True)
    parser.add_argument("--source-kind", default="public", choices=["public", "inhouse"])
    parser.add_argument("--source-name", default="public-traces")
    parser.add_argument("--licence", default=None)
    args, beam_args = parser.parse_known_args(argv)
    config = CleanConfig(source_kind=args.source_kind, source_name=args.source_name, licence=args.licence)
    options = PipelineOptions(beam_args)
    with beam.Pipeline(runner=runner_for(options), options=options) as pipeline:
        build(pipeline, args.paths, args.out, config)
    print(json.dumps(json.loads((Path(args.out) / "summary.json").read_text()), indent=2))


if __name__ == "__main__":
    run()
