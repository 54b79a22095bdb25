# Beam's transforms carry no type annotations.
# mypy: disable-error-code="no-untyped-call,misc"
"""Which Beam runner a job runs on when the user names none."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineRunner


def local_runner(options: PipelineOptions) -> PipelineRunner:
    """The local runner used when `--runner` is not given: Beam's FnApiRunner.

    Beam's default DirectRunner first tries to download and start the Prism runner, so the same
    command would run on different runners depending on network access. Naming the FnApiRunner
    keeps local builds on one runner, in-process or with `--direct_num_workers N
    --direct_running_mode multi_processing`.
    """
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    info = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
    return fn_runner.FnApiRunner(provision_info=info)


def runner_for(options: PipelineOptions) -> PipelineRunner | None:
    """The runner `--runner` names (None lets Beam construct it), else the local FnApiRunner."""
    return None if options.view_as(StandardOptions).runner else local_runner(options)


def unknown_beam_options(args: list[str]) -> list[str]:
    """The arguments no Beam pipeline option (of any runner loaded so far) recognises: unknown
    options, and values that follow no option taking one (Beam itself discards both with a log line).

    A runner given as a dotted path (e.g. `apache_beam.runners.dask.dask_runner.DaskRunner`) is
    imported first, so its own options (`--dask_client_address`) count as known.
    """
    import importlib

    from apache_beam.options.pipeline_options import _BeamArgumentParser

    runner = PipelineOptions(args).view_as(StandardOptions).runner
    if runner and "." in runner:
        try:
            importlib.import_module(runner.rsplit(".", 1)[0])
        except ImportError:
            pass
    parser = _BeamArgumentParser(allow_abbrev=False)
    seen: set[str] = set()
    for cls in PipelineOptions.__subclasses__():
        if str(cls) not in seen:
            seen.add(str(cls))
            cls._add_argparse_args(parser)
    _, unknown = parser.parse_known_args(args)
    return list(unknown)


def drops_output_tags(options: PipelineOptions) -> bool:
    """Whether the runner loses the tags of a multi-output ParDo (Beam 2.77's DaskRunner puts every
    output into one bag), so stages must emit (tag, value) pairs and split them with filters."""
    return is_dask(options)


def is_dask(options: PipelineOptions) -> bool:
    """Whether the options name Beam's DaskRunner."""
    runner = options.view_as(StandardOptions).runner or ""
    return runner.rsplit(".", 1)[-1] == "DaskRunner"


class TagPairs(beam.DoFn):
    """Runs `inner` and emits its outputs as (tag, value) pairs; untagged outputs get tag `main`."""

    def __init__(self, inner: beam.DoFn, main: str) -> None:
        self.inner = inner
        self.main = main

    def setup(self) -> None:
        self.inner.setup()

    def process(self, element, **side):  # type: ignore[no-untyped-def]  # no hints: Beam would check them
        for out in self.inner.process(element, **side) or ():
            if isinstance(out, beam.pvalue.TaggedOutput):
                yield (out.tag, out.value)
            else:
                yield (self.main, out)


def _select(pair: tuple[str, Any], tag: str) -> Iterator[Any]:
    if pair[0] == tag:
        yield pair[1]


def multi_output(
    pcoll: Any, label: str, dofn: beam.DoFn, tags: list[str], main: str, pairs: bool, **side: Any
) -> dict[str, Any]:
    """`pcoll | ParDo(dofn).with_outputs(*tags, main=main)` as {tag: PCollection}; with `pairs`, the
    same through (tag, value) pairs and one filter per tag (for runners that drop output tags)."""
    if not pairs:
        res = pcoll | label >> beam.ParDo(dofn, **side).with_outputs(*tags, main=main)
        return {t: res[t] for t in tags} | {main: res[main]}
    both = pcoll | label >> beam.ParDo(TagPairs(dofn, main), **side)
    return {t: both | f"{label}.{t}" >> beam.FlatMap(_select, t) for t in [*tags, main]}


def release(result: Any) -> None:
    """Let go of what a finished job's result holds open. The DaskRunner connects a
    `distributed.Client` per job and never closes it: its threads would outlive the job, retrying a
    scheduler that may be gone, in whatever process ran the job."""
    client = getattr(result, "client", None)
    close = getattr(client, "close", None)
    if callable(close):
        close()


def with_dask_partitions(args: list[str]) -> list[str]:
    """On the DaskRunner, split the job's bags into one partition per worker thread unless the user
    chose (`--dask_npartitions`, `--dask_partition_size`).

    Beam's guess gives a small input (the build's work items: one per input split) one partition, so
    every stage runs on one worker whatever the cluster's size; more partitions than worker threads
    repeat each partition's fixed work. The cluster is asked for its thread count; without an address
    (Beam then starts a local cluster) it is this machine's CPU count.
    """
    if not is_dask(PipelineOptions(args)):
        return args
    import apache_beam.runners.dask.dask_runner  # noqa: F401  (registers the Dask options parsed below)

    options = PipelineOptions(args)
    given = options.get_all_options(drop_default=True)
    if given.get("npartitions") or given.get("partition_size"):
        return args
    return [*args, f"--dask_npartitions={dask_threads(given)}"]


def dask_threads(given: dict[str, Any]) -> int:
    """Worker threads of the Dask cluster the options name (this machine's CPUs when they name none)."""
    import os

    address, scheduler_file = given.get("address"), given.get("scheduler_file")
    if not address and not scheduler_file:
        return os.cpu_count() or 1
    import distributed

    with distributed.Client(
        address=address, scheduler_file=scheduler_file, timeout=given.get("timeout") or 30
    ) as client:
        return max(1, int(sum(client.nthreads().values())))
