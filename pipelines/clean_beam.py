# Beam's transforms carry no type annotations; calling them is the point of this module.
# mypy: disable-error-code="no-untyped-call"
"""The curation graph as an Apache Beam job: the same ingest -> denoise -> segment -> align -> score
over many files, spread across workers (DirectRunner locally; Dataflow, Flink or Spark at scale).

Files are the unit of distribution (records inside a file stream in order). Accepted trajectories are
written as Parquet under the explicit trajectory schema to OUT/trajectories/, quarantined records under
the quarantine schema to OUT/quarantine/parts/, and the reconciled counts to OUT/summary.json.

Inputs and OUT may be local paths or URLs of any Beam FileSystem (gs://, s3://, hdfs://, ...): URLs are
listed with FileSystems.match, read by copying each file (and a `script` timing file beside it) to a
local temporary folder, and written through FileSystems; paths are never handled as local paths
unless they are. The summary is a combine over per-record outcomes, so no worker holds them all.

    python -m pipelines.clean_beam PATH... --out DIR [--source-name N] [--redact-pii email,phone,ip|none]
        [Beam pipeline options]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from curation_agents.clean_run import (
    QUARANTINE_DIR,
    QUARANTINE_PARTS,
    GraphSession,
    record_ref,
)
from curation_agents.formats.terminal import timing_header
from curation_agents.model import CleanConfig
from curation_agents.reader import discover, iter_records, root_labels
from pipelines.runners import runner_for, unknown_beam_options
from schemas import TRAJECTORY_SCHEMA, Trajectory
from schemas.atomic import atomic_write_json
from schemas.quarantine import CLEAN_QUARANTINE_SCHEMA
from schemas.shards import TRAJECTORY_DIR
from worldline.redaction.detect import parse_pii_classes, redact

ACCEPTED = "accepted"
QUARANTINED = "quarantined"
COUNTS = "counts"


TIMING_SUFFIXES = (".timing", ".tm")


def is_url(path: str) -> bool:
    """Whether PATH names a file on a non-local Beam FileSystem (a scheme such as gs://)."""
    return FileSystems.get_scheme(path) not in (None, "file")


def discover_files(paths: list[str]) -> list[tuple[str, str]]:
    """(file, dataset path) for every input, sorted within each input; local folders as `worldline clean`
    walks them, URLs through FileSystems.match (a URL that is not a file is listed as a folder)."""
    labels = root_labels(paths)
    files: list[tuple[str, str]] = []
    for arg in paths:
        if not is_url(arg):
            files += [(str(f), d) for f, d in discover([arg], labels)]
            continue
        if FileSystems.exists(arg) and not arg.endswith("/"):
            files.append((arg, labels[arg]))
            continue
        root = arg.rstrip("/")
        matched = FileSystems.match([FileSystems.join(root, "**")])[0].metadata_list
        found = []
        for meta in matched:
            relative = meta.path[len(root) :].lstrip("/")
            if relative and not any(part.startswith(".") for part in relative.split("/")):
                found.append((meta.path, f"{labels[arg]}/{relative}"))
        if not found:
            raise FileNotFoundError(f"{arg}: no files found; pass trace files or folders of them")
        files += sorted(found)
    return files


def _local_copy(url: str, folder: str) -> str:
    """Copy URL (and a `script` timing file beside it, if any) into FOLDER; the local path of the copy."""
    base = url.rstrip("/").rsplit("/", 1)[-1] or "record"
    local = os.path.join(folder, base)
    companions = [url + suffix for suffix in TIMING_SUFFIXES]
    stem = url.rsplit(".", 1)[0] if "." in base else url
    companions += [stem + suffix for suffix in TIMING_SUFFIXES]
    companions.append(url.rsplit("/", 1)[0] + "/timing")
    _copy(url, local)
    for companion in companions:
        target = os.path.join(folder, companion.rsplit("/", 1)[-1])
        if not FileSystems.exists(companion) or os.path.exists(target):
            continue
        _copy(companion, target)
        # `script -I`: the keystrokes are in a log of their own that the timing log names.
        keys = timing_header(target).get("INPUT_LOG", "").rsplit("/", 1)[-1]
        keys_url = url.rsplit("/", 1)[0] + "/" + keys
        if keys and not os.path.exists(os.path.join(folder, keys)) and FileSystems.exists(keys_url):
            _copy(keys_url, os.path.join(folder, keys))
    return local


def _copy(source: str, target: str) -> None:
    with (
        FileSystems.open(source, compression_type=CompressionTypes.UNCOMPRESSED) as src,
        open(target, "wb") as dst,
    ):
        shutil.copyfileobj(src, dst, 1 << 20)


class CleanFileFn(beam.DoFn):
    """Consumes (file path or URL, dataset path); produces trajectory rows (main output), quarantine rows
    and per-record (verdict, reason) pairs (tagged outputs). The graph is compiled once per worker."""

    def __init__(self, config: CleanConfig) -> None:
        self.config = config
        self.runner: GraphSession | None = None

    def setup(self) -> None:
        self.runner = GraphSession(self.config, None)

    def process(self, element: tuple[str, str]) -> Iterator[Any]:
        path, dataset_path = element
        if not is_url(path):
            yield from self._clean(path, path, dataset_path)
            return
        folder = tempfile.mkdtemp(prefix="worldline-clean-")
        try:
            yield from self._clean(_local_copy(path, folder), path, dataset_path)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _clean(self, local: str, source: str, dataset_path: str) -> Iterator[Any]:
        assert self.runner is not None
        for raw in iter_records(Path(local), self.config.limits):
            ref = record_ref(raw, Path(local), dataset_path)
            ref["source_path"] = source
            outcome = self.runner.run(raw, ref)
            verdict = ACCEPTED if outcome.accepted else QUARANTINED
            for traj in outcome.accepted:
                yield Trajectory.from_json(traj).to_record()
            for q in outcome.quarantine:
                yield beam.pvalue.TaggedOutput(
                    QUARANTINED,
                    {
                        "record_key": ref["key"],
                        "source_path": source,
                        "locator": ref["locator"],
                        "format": ref["format"],
                        "stage": q["stage"],
                        "reason": q["reason"],
                        "detail": redact(q["detail"], None, frozenset(self.config.pii)),
                        "episode": q.get("episode"),
                        "record_outcome": verdict,
                    },
                )
            reason = outcome.quarantine[0]["reason"] if verdict == QUARANTINED else ""
            yield beam.pvalue.TaggedOutput(COUNTS, (verdict, reason))


class SummaryFn(beam.CombineFn):
    """Per-record (verdict, reason) pairs combined into summary.json's counts; reconciles by construction."""

    def create_accumulator(self) -> Counter[str]:
        return Counter()

    def add_input(self, acc: Counter[str], outcome: tuple[str, str]) -> Counter[str]:
        verdict, reason = outcome
        acc["records_in"] += 1
        acc[verdict] += 1
        if verdict == QUARANTINED:
            acc["reason:" + reason] += 1
        return acc

    def merge_accumulators(self, accumulators: Any) -> Counter[str]:
        merged: Counter[str] = Counter()
        for acc in accumulators:
            merged.update(acc)
        return merged

    def extract_output(self, acc: Counter[str]) -> dict[str, Any]:
        return summarise(acc)


def summarise(acc: Counter[str]) -> dict[str, Any]:
    """The summary.json body from combined counts."""
    reasons = {k.split(":", 1)[1]: v for k, v in acc.items() if k.startswith("reason:")}
    return {
        "records_in": acc["records_in"],
        "accepted": acc[ACCEPTED],
        "quarantined": acc[QUARANTINED],
        "per_reason": dict(sorted(reasons.items())),
        "runner": "beam",
    }


def write_json(path: str, body: dict[str, Any]) -> None:
    """Write JSON to a local path (atomically) or a FileSystems URL."""
    if not is_url(path):
        atomic_write_json(Path(path), body)
        return
    with FileSystems.create(path, mime_type="application/json") as fh:
        fh.write(json.dumps(body, indent=2, sort_keys=True).encode())


def build(pipeline: beam.Pipeline, paths: list[str], out: str, config: CleanConfig) -> None:
    files = discover_files(paths)
    results = (
        pipeline
        | "Files" >> beam.Create(files)
        | "Spread" >> beam.Reshuffle()
        | "Clean" >> beam.ParDo(CleanFileFn(config)).with_outputs(QUARANTINED, COUNTS, main=ACCEPTED)
    )
    _ = results[ACCEPTED] | "WriteAccepted" >> beam.io.WriteToParquet(
        FileSystems.join(out, TRAJECTORY_DIR, "part"),
        TRAJECTORY_SCHEMA,
        codec="zstd",
        file_name_suffix=".parquet",
    )
    _ = results[QUARANTINED] | "WriteQuarantine" >> beam.io.WriteToParquet(
        FileSystems.join(out, QUARANTINE_DIR, QUARANTINE_PARTS, "part"),
        CLEAN_QUARANTINE_SCHEMA,
        codec="zstd",
        file_name_suffix=".parquet",
    )
    summary_path = FileSystems.join(out, "summary.json")
    _ = (
        results[COUNTS]
        | "Summarise" >> beam.CombineGlobally(SummaryFn())
        | "WriteSummary" >> beam.Map(lambda summary: write_json(summary_path, summary))
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
    parser.add_argument(
        "--redact-pii",
        dest="pii",
        default="email,card,iban,phone",
        type=_pii_option,
        help="Personal-data classes to redact besides secrets: any of email, card, iban, phone, ip (comma-separated; "
        "'none' for none). As `worldline clean --redact-pii`.",
    )
    args, beam_args = parser.parse_known_args(argv)
    unknown = unknown_beam_options(beam_args)
    if unknown:  # Beam would drop them with a log line: a typo'd option or a stray path
        parser.error(
            f"unrecognised argument(s) {' '.join(unknown)}: neither an option of this job nor a Beam "
            "pipeline option (give paths before the options)"
        )
    config = CleanConfig(
        source_kind=args.source_kind, source_name=args.source_name, licence=args.licence, pii=args.pii
    )
    options = PipelineOptions(beam_args)
    with beam.Pipeline(runner=runner_for(options), options=options) as pipeline:
        build(pipeline, args.paths, args.out, config)
    with FileSystems.open(
        FileSystems.join(args.out, "summary.json"), compression_type=CompressionTypes.UNCOMPRESSED
    ) as fh:
        print(json.dumps(json.loads(fh.read()), indent=2))


def _pii_option(text: str) -> tuple[str, ...]:
    try:
        return parse_pii_classes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


if __name__ == "__main__":
    run()
