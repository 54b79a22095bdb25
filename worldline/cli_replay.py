"""`worldline replay`: run collected trajectories again and label what replays identically."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


def replay(
    source: Annotated[Path, typer.Argument(help="A trajectory dataset `worldline collect` wrote.")],
    out: Annotated[Path, typer.Option("--out", help="Where to write span_labels.parquet and the replays.")],
    times: Annotated[int, typer.Option("--times", min=1, help="Replays per trajectory.")] = 2,
    tasks: Annotated[
        Path | None, typer.Option("--tasks", help="The tasks file (default: the one each trajectory names).")
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Trajectories replayed at once.")
    ] = 1,
    ground: Annotated[
        Path | None,
        typer.Option(
            "--ground",
            help="Re-ground public traces: a tasks file giving their initial state; writes grounding.parquet.",
        ),
    ] = None,
    task_id: Annotated[
        str | None,
        typer.Option("--task-id", help="With --ground: the one task every trajectory starts from."),
    ] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
) -> None:
    """Replay each trajectory's recorded actions TIMES times from its initial state in fresh sandboxes
    and label every observation's spans deterministic, runtime or variable."""
    from collectors.environment import TaskError
    from collectors.replay import ReplayConfig, replay_report
    from collectors.replay import replay as run_replay

    console = Console(stderr=True)
    if ground is not None:
        from collectors.grounding import ground as run_ground
        from collectors.grounding import ground_report
        from schemas.grounding import GROUNDING_NAME

        try:
            results = run_ground(source, out, ground, task_id)
        except (TaskError, ValueError) as exc:
            console.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
            raise typer.Exit(2) from exc
        for line in ground_report(results):
            typer.echo(line)
        typer.echo(f"grounding: {out / GROUNDING_NAME}")
        return
    bar = Progress(
        TextColumn("[bold]replay[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not progress,
    )
    state: dict[str, TaskID] = {}
    try:
        with bar:
            summary = run_replay(
                ReplayConfig(source=source, out=out, times=times, tasks_path=tasks, concurrency=concurrency),
                on_start=lambda total: state.setdefault("id", bar.add_task("", total=total)),
                on_progress=lambda _result: bar.advance(state["id"]),
            )
    except (TaskError, ValueError) as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(2) from exc
    for line in replay_report(summary):
        typer.echo(line)
    typer.echo(f"span labels: {out / 'span_labels.parquet'}")


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)
