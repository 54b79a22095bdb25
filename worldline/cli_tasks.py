"""Task and coverage commands: `worldline tasks generate` (seeded task files for every local domain)
and `worldline coverage DIR` (what a collected dataset covers, per domain)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import typer
from rich.console import Console

console = Console(stderr=True, soft_wrap=True)
tasks_app = typer.Typer(help="Make task files for `worldline collect`.", no_args_is_help=True)


@tasks_app.command("generate")
def generate_command(
    env: str = typer.Option(..., "--env", help="Domain: terminal | swe | mcp | search | web | os."),
    n: int = typer.Option(..., "--n", min=0, help="How many tasks."),
    seed: int = typer.Option(0, "--seed", help="Generator seed: the same seed gives the same file."),
    out: Path = typer.Option(..., "--out", dir_okay=False, help="Task file to write (JSONL)."),
) -> None:
    """Generate N tasks of a domain, deterministically and without an LLM: each task is a drawn initial
    state (files, repositories, server state, start page) and goal, valid for `worldline collect`."""
    from collectors.generators import GeneratorError, generate, write_tasks
    from collectors.search_index import SearchIndexMissing

    try:
        tasks = generate(env, n, seed)
    except (GeneratorError, SearchIndexMissing) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    write_tasks(out, tasks)
    states = len({t["metadata"]["state_hash"] for t in tasks})
    families = Counter(t["metadata"]["generator"].rsplit("/", 1)[1] for t in tasks)
    listing = ", ".join(f"{k}={v}" for k, v in sorted(families.items())) or "none"
    console.print(
        f"wrote {len(tasks)} {env} tasks to {out}: {states} distinct initial states; families: {listing}"
    )


def coverage_command(
    dataset: list[Path] = typer.Argument(
        ..., exists=True, help="Dataset folder(s) of collected trajectories."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Per domain: action kinds and the tools / commands / elements used, distinct states reached, the
    share of error observations and no-op turns, observation and action lengths, near-duplicate
    trajectories; and what is thin."""
    from schemas.shards import ShardError
    from worldline.coverage import coverage_report, render_report

    try:
        report = coverage_report(dataset)
    except ShardError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(report, indent=1, ensure_ascii=False))
    else:
        typer.echo(render_report(report))


def register(app: typer.Typer) -> None:
    """Mount `tasks` and `coverage` on the `worldline` CLI."""
    app.add_typer(tasks_app, name="tasks")
    app.command("coverage")(coverage_command)
