"""`worldline demo`: the main job on this machine (what `make demo` runs after set-up)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

console = Console(soft_wrap=True)


def demo(
    out: Annotated[Path, typer.Option("--out", help="Output folder, rebuilt from scratch.")] = Path(
        "out/demo"
    ),
    domains: Annotated[
        str,
        typer.Option(help="Comma-separated domains to collect (android runs only with a connected device)."),
    ] = "terminal,swe,mcp,search,web,os,android",
    tasks_per_domain: Annotated[
        int | None,
        typer.Option(
            "--tasks-per-domain", min=1, help="Generated tasks per domain (default: per-domain sizes)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the task generators and the exploration policy.")] = 0,
    policy: Annotated[
        str, typer.Option(help="explore (generated tasks) or scripted (the bundled example tasks).")
    ] = "explore",
    clean: Annotated[
        bool, typer.Option("--clean/--no-clean", help="Clean the bundled public traces.")
    ] = True,
) -> None:
    """Collect in every domain that can run here, clean the bundled public traces, build the CPT / SFT /
    RL pools on the Beam runner with the AgentWorldBench samples as the evaluation set, verify them and
    write the HTML report. With WORLDLINE_LLM_BASE_URL set it also runs the LLM steps (openai policy,
    LLM scoring, rejection sampling, the judge, one autoresearch iteration). A failing step is reported
    and the rest goes on; the exit code is 1 when a step failed."""
    from worldline.demo import ALL_DOMAINS, DEFAULT_TASKS, Demo, DemoPlan, fresh_out, llm_configured

    chosen = tuple(d.strip() for d in domains.split(",") if d.strip())
    unknown = [d for d in chosen if d not in ALL_DOMAINS]
    if unknown or not chosen:
        console.print(
            f"[red]error:[/red] --domains: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(ALL_DOMAINS)}"
        )
        raise typer.Exit(2)
    if policy not in ("explore", "scripted"):
        console.print(f"[red]error:[/red] --policy {policy!r}: choose explore or scripted")
        raise typer.Exit(2)
    try:
        fresh_out(out)
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    tasks = {d: tasks_per_domain or DEFAULT_TASKS[d] for d in ALL_DOMAINS}
    plan = DemoPlan(
        out=out, domains=chosen, tasks=tasks, seed=seed, policy=policy, clean=clean, llm=llm_configured()
    )
    steps = Demo(plan, echo=typer.echo).run_all()

    table = Table(title="worldline demo")
    for column in ("step", "status", "seconds", "detail"):
        table.add_column(column)
    colours = {"ok": "green", "failed": "red", "skipped": "yellow"}
    for step in steps:
        table.add_row(
            step.name,
            f"[{colours.get(step.status, 'white')}]{step.status}[/]",
            f"{step.seconds:.1f}",
            step.detail[:100],
        )
    console.print(table)
    from worldline.demo import pool_counts

    counts = pool_counts(out / "pools")
    if counts:
        pools = ", ".join(
            f"{name} {p['samples']} samples / {p['trajectories']} trajectories"
            for name, p in counts["pools"].items()
        )
        console.print(
            f"pools: {pools}; records in {counts['counts'].get('records_in')}, reconcile: {counts['counts'].get('reconciles')}"
        )
    console.print(
        f"next: open {out / 'pools' / 'report.html'} in a browser; pool cards in {out / 'pools'}/{{cpt,sft,rl,eval}}/README.md; "
        f"one trajectory: worldline show {out / 'collected' / 'terminal'} --max-chars 600; step log: {out / 'demo-summary.json'}"
    )
    if any(step.status == "failed" for step in steps):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
