"""The `worldline` command line: one entry point that mounts each package's commands."""

from __future__ import annotations

import importlib
import logging

import typer

app = typer.Typer(
    name="worldline",
    help=(
        "Build training data for language world models: collect trajectories in sandboxes, clean "
        "public traces, and build disjoint CPT / SFT / RL pools from Parquet trajectory shards."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Each package contributes its commands through `register(app)`; the order is the order in --help.
COMMAND_MODULES = (
    "worldline.cli_core",
    "worldline.cli_data",
    "collectors.cli",
    "curation_agents.cli",
    "pipelines.cli",
    "worldline.cli_judge",
)


class _QuietOptionalCloudDeps(logging.Filter):
    """Beam warns at import time that Google Cloud client libraries are absent; local runs never need them."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "apitools not found" not in record.getMessage()


def _mount() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)


logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
for _handler in logging.getLogger().handlers:
    _handler.addFilter(_QuietOptionalCloudDeps())
_mount()


def main() -> None:
    app()
