"""`worldline report`: the HTML page of a finished pools build."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

err_console = Console(stderr=True, soft_wrap=True)


def report(
    pools_out: Annotated[
        Path, typer.Argument(help="The --out folder of a finished `worldline pools build`.")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", help="Where to write the page (default POOLS_OUT/report.html).")
    ] = None,
) -> None:
    """Write one self-contained HTML page of a pools build: the filter funnel, token lengths against
    the caps, turns per trajectory, the domain x source mix, dedup clusters, decontamination hits,
    loss-mask categories, template spread and the coverage of collected inputs. It opens offline."""
    from worldline.report import ReportError, write_report

    try:
        path = write_report(pools_out, out)
    except ReportError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    typer.echo(f"report: {path}")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
