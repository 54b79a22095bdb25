"""The `worldline` command line: one entry point that mounts each package's commands."""

from __future__ import annotations

import importlib

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
)


def _mount() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # the package has no commands (yet); a broken import still fails loudly
                continue
            raise
        module.register(app)


_mount()


def main() -> None:
    app()
