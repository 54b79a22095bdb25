"""`worldline schedule`: the scheduled cycle (collect -> clean -> incremental build -> verify -> report)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

err_console = Console(stderr=True, soft_wrap=True)

schedule_app = typer.Typer(
    help="Run the scheduled cycle on new data only: collect, clean, link the new parts, build the pools "
    "incrementally, verify them and write the report. Timers, cron and Airflow call these commands "
    "(infra/schedules/).",
    no_args_is_help=True,
)

ScheduleFile = Annotated[
    Path, typer.Argument(help="The schedule YAML (see infra/schedules/schedule.example.yaml).")
]


@schedule_app.command("run")
def run(schedule: ScheduleFile) -> None:
    """Run every step in order under the schedule's lock; a cycle with nothing new skips the build."""
    from pipelines.schedule import ScheduleError, run_cycle

    try:
        run_cycle(schedule, log=typer.echo)
    except ScheduleError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None


@schedule_app.command("step")
def step(
    name: Annotated[str, typer.Argument(help="collect | clean | increment | build | verify | report")],
    schedule: ScheduleFile,
) -> None:
    """Run one step (an orchestrator runs the steps as separate tasks, in the order above)."""
    from pipelines.schedule import ScheduleError, run_step

    try:
        run_step(schedule, name, log=typer.echo)
    except ScheduleError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    app.add_typer(schedule_app, name="schedule")
