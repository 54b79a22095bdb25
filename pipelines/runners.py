"""Which Beam runner a job runs on when the user names none."""

from __future__ import annotations

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
    """The arguments no Beam pipeline option (of any runner loaded so far) recognises.

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
    return [a for a in unknown if a.startswith("-")]
