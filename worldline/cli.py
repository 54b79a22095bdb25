"""The `worldline` command line: one entry point that mounts each package's commands."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import typer
from typer.core import TyperGroup

HELP = (
    "Build training data for language world models: collect trajectories in sandboxes, clean "
    "public traces, and build disjoint CPT / SFT / RL pools from Parquet trajectory shards."
)

# Each package contributes its commands through `register(app)`; the order is the order in --help.
# The names are what each module registers: a command line naming one of them imports only that
# module, so `worldline pools ...` does not pay for the collectors' container client.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "worldline.cli_core": ("schema", "validate", "stats"),
    "worldline.cli_data": ("show", "export", "import"),
    "collectors.cli": ("collect", "collect-merge", "sandbox"),
    "curation_agents.cli": ("clean",),
    "pipelines.cli": ("pools",),
    "worldline.cli_judge": ("judge", "sft"),
    "worldline.cli_report": ("report",),
    "worldline.cli_schedule": ("schedule",),
    "worldline.cli_demo": ("demo",),
    "worldline.cli_tasks": ("tasks", "coverage"),
    "worldline.cli_replay": ("replay",),
}


class _QuietOptionalCloudDeps(logging.Filter):
    """Beam warns at import time that Google Cloud client libraries are absent; local runs never need them."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "apitools not found" not in record.getMessage()


# Exceptions whose message already names the path and the problem: a user's mistake (a mistyped
# path, a folder for a file), printed as one line instead of a traceback.
_USER_ERRORS: tuple[type[BaseException], ...] = (
    FileNotFoundError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
)


class _Commands(TyperGroup):
    """The root command group: a user mistake that escaped a command is one line and exit 2."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            from schemas.shards import ShardError

            if not isinstance(exc, (*_USER_ERRORS, ShardError)):
                raise
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None


def make_app(modules: Iterable[str] = COMMAND_MODULES) -> typer.Typer:
    """The `worldline` app with the commands of `modules` (all of them by default)."""
    app = typer.Typer(
        name="worldline",
        cls=_Commands,
        help=HELP,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )

    @app.callback()
    def commands() -> None:
        # A callback keeps the app a group of commands even when one module mounts one command
        # (Typer would otherwise run that command directly, taking its name for an argument).
        pass

    for name in modules:
        importlib.import_module(name).register(app)
    return app


def app_for(args: Sequence[str]) -> typer.Typer:
    """The app a command line needs: only the module that owns its command, or every command when
    the line names none (`--help`, no arguments, a mistyped command: the full list is shown)."""
    if args:
        for module, commands in COMMAND_MODULES.items():
            if args[0] in commands:
                return make_app([module])
    return make_app()


logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
for _handler in logging.getLogger().handlers:
    _handler.addFilter(_QuietOptionalCloudDeps())


def __getattr__(name: str) -> typer.Typer:
    """`worldline.cli.app`: the app with every command, built on first use."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    app = make_app()
    globals()["app"] = app
    return app


def main() -> None:
    app_for(sys.argv[1:])()
