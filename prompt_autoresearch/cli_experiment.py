"""`autoresearch run | status | report | approve | export`: the experiment commands.

Heavy modules (the LLM client, the judge, Arrow) are imported inside the commands, so `--help` stays fast.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)

EXIT_FAILED, EXIT_USAGE, EXIT_BUDGET = 1, 2, 3

RunDir = Annotated[Path, typer.Argument(help="The experiment folder (RUNDIR of `autoresearch run --out`).")]


def _fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code)


def run(
    domain: Annotated[
        str, typer.Option("--domain", help="Domain to evolve templates for (terminal, mcp, ...).")
    ],
    data: Annotated[
        list[Path],
        typer.Option(
            "--data", help="Trajectory shards or AgentWorldBench *_test.jsonl (file or folder); repeat."
        ),
    ],
    rundir: Annotated[
        Path, typer.Option("--out", help="RUNDIR: state, ledger, templates, cache. Reuse to resume.")
    ],
    runs: Annotated[
        int, typer.Option(help="Independent runs, one style directive each (12 gives v0..v11).")
    ] = 12,
    iterations: Annotated[int, typer.Option(help="Optimizer proposals per run.")] = 10,
    eval_size: Annotated[int, typer.Option(help="Held-out turns each candidate is scored on.")] = 8,
    recheck_size: Annotated[
        int | None, typer.Option(help="Turns of the disjoint recheck split (default: --eval-size).")
    ] = None,
    examples: Annotated[int, typer.Option(help="Trajectories shown to the optimizer per iteration.")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of splits, eval turns and examples.")] = 0,
    optimizer_url: Annotated[
        str | None, typer.Option(help="Optimizer endpoint (default $WORLDLINE_LLM_BASE_URL).")
    ] = None,
    optimizer_model: Annotated[
        str | None, typer.Option(help="Optimizer model (default $WORLDLINE_LLM_MODEL_OPTIMIZER).")
    ] = None,
    world_model_url: Annotated[str | None, typer.Option(help="World-model endpoint.")] = None,
    world_model_model: Annotated[
        str | None, typer.Option(help="World model (default $WORLDLINE_LLM_MODEL_WORLD_MODEL).")
    ] = None,
    judge_url: Annotated[str | None, typer.Option(help="Judge endpoint.")] = None,
    judge_model: Annotated[
        str | None, typer.Option(help="Judge model (default $WORLDLINE_LLM_MODEL_JUDGE).")
    ] = None,
    max_calls: Annotated[
        int | None, typer.Option(help="Budget: LLM calls over the whole experiment.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="Budget: prompt + completion tokens, whole experiment.")
    ] = None,
    concurrency: Annotated[int, typer.Option(help="LLM calls in flight per endpoint.")] = 8,
    parallel_runs: Annotated[int, typer.Option(help="Runs executed at the same time.")] = 4,
    judge_attempts: Annotated[int, typer.Option(help="Judge calls per turn until one parses.")] = 3,
    estimate_only: Annotated[
        bool, typer.Option("--estimate-only", help="Print the estimate and exit.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No live progress display.")] = False,
) -> None:
    """Evolve templates: per run, seed from a style directive, let the optimizer revise the template
    against the judge's scores, keep a candidate only above the measured noise floor, and recheck the
    winner on a disjoint split. Rerun on the same RUNDIR to resume with zero repeated LLM calls."""
    from prompt_autoresearch.clients import RoleEndpoint, build_clients, judge_is_world_model, resolve_models
    from prompt_autoresearch.data import DataError
    from prompt_autoresearch.engine import CACHE_FILE, Autoresearch
    from prompt_autoresearch.state import AutoresearchConfig, StateMismatch
    from worldline.llm import LLMConfig, LLMError, LLMNotConfigured, Role

    endpoints = {
        Role.OPTIMIZER: RoleEndpoint(optimizer_url, optimizer_model),
        Role.WORLD_MODEL: RoleEndpoint(world_model_url, world_model_model),
        Role.JUDGE: RoleEndpoint(judge_url, judge_model),
    }
    try:
        base = LLMConfig.from_env()
        if not base.base_url:
            url = next((e.base_url for e in endpoints.values() if e.base_url), None)
            base = LLMConfig.from_env(base_url=url)
        models = resolve_models(base, endpoints)
        config = AutoresearchConfig(
            domain=domain,
            data=tuple(str(p.resolve()) for p in data),
            runs=runs,
            iterations=iterations,
            eval_size=eval_size,
            recheck_size=recheck_size or eval_size,
            seed=seed,
            examples=examples,
            judge_attempts=judge_attempts,
            models=models,
        )
        clients, ledger = build_clients(
            base, endpoints, cache_path=rundir / CACHE_FILE, concurrency=concurrency
        )
    except (LLMNotConfigured, ValueError) as error:
        raise _fail(str(error)) from None
    if judge_is_world_model(base, endpoints):
        err.print(
            f"[yellow]warning:[/yellow] the judge is the world model ({models['judge']}): it grades its own "
            "predictions, which inflates scores; pass --judge-model (or --judge-url) for an independent judge",
            highlight=False,
        )
    try:
        engine = Autoresearch(rundir, config, clients, parallel_runs=parallel_runs)
    except (DataError, StateMismatch, ValueError) as error:
        raise _fail(str(error)) from None
    engine.apply_budget(ledger, max_calls, max_tokens)
    for split, wanted in (("eval", config.eval_size), ("recheck", config.recheck_size)):
        have = len(engine.items(0, split))
        if have < wanted:
            err.print(
                f"[yellow]warning:[/yellow] the {split} split holds {have} turn(s), fewer than the {wanted} "
                f"asked for; scores rest on {have} turn(s) (give more --data for a tighter noise floor)",
                highlight=False,
            )
    estimate = engine.estimate()
    done_before = engine.state["usage"]
    err.print(
        f"estimate: {estimate.calls} LLM calls and ~{estimate.tokens:,} tokens for {estimate.runs_left} run(s) "
        f"and {estimate.proposals_left} proposal(s) left ({estimate.calls_per_proposal} calls per proposal, "
        f"{estimate.fixed_calls_per_run} per run for seed scoring and recheck; judge retries come on top)"
        + (f"; already spent {done_before['calls']} calls" if done_before["calls"] else ""),
        highlight=False,
    )
    affordable = estimate.affordable_proposals_per_run(ledger.calls_remaining, ledger.tokens_remaining)
    if affordable is not None:
        err.print(f"budget affords ~{affordable:.1f} proposal(s) per run", highlight=False)
        if affordable < 3:
            err.print(
                f"[yellow]warning:[/yellow] the budget affords fewer than 3 proposals per run "
                f"({affordable:.1f}); raise --max-calls / --max-tokens or lower --runs / --eval-size",
                highlight=False,
            )
    if estimate_only:
        return
    try:
        state = asyncio.run(_run_with_progress(engine, clients, quiet))
    except LLMError as error:
        raise _fail(
            f"{type(error).__name__}: {error}. Everything finished is saved in {rundir}; fix the endpoint "
            f"and rerun the same command to resume",
            EXIT_FAILED,
        ) from None
    _print_status(state)
    if state.get("stopped"):
        raise _fail(
            f"stopped early: {state['stopped']}. Everything finished is saved; rerun the same command with "
            f"a larger budget to continue",
            EXIT_BUDGET,
        )


async def _run_with_progress(engine: Any, clients: Any, quiet: bool) -> dict[str, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    iterations = engine.config.iterations
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=quiet,
        transient=False,
    )
    tasks: dict[int, Any] = {}

    def describe(run: int, extra: str) -> str:
        rs = engine.state["runs"][str(run)]
        best = rs.get("incumbent_score")
        return f"run {run:02d} {rs['style'][:24]:<24} best {'-' if best is None else f'{best:5.1f}'} {extra}"

    def on_event(kind: str, run: int, info: Any) -> None:
        if run not in tasks:
            rs = engine.state["runs"][str(run)]
            done = rs["iterations_done"] + (1 if rs["seed"] else 0)
            tasks[run] = progress.add_task(describe(run, ""), total=iterations + 2, completed=done)
        if kind == "seed":
            progress.update(
                tasks[run], advance=1, description=describe(run, f"noise ±{info['noise_floor']:.1f}")
            )
        elif kind == "candidate":
            progress.update(
                tasks[run], advance=1, description=describe(run, f"it {info['iteration']} {info['status']}")
            )
        elif kind == "done":
            progress.update(tasks[run], completed=iterations + 2, description=describe(run, "done"))

    engine.on_event = on_event
    try:
        with progress:
            return dict(await engine.run())
    finally:
        for client in clients.distinct():
            await client.aclose()


def _print_status(state: dict[str, Any]) -> None:
    from prompt_autoresearch.review import leaderboard, progress

    summary = progress(state)
    usage = summary["usage"]
    out.print(
        f"{summary['runs_done']}/{summary['runs']} runs done, {summary['iterations_done']}/"
        f"{summary['iterations']} iterations, {summary['candidates']} candidates; {usage['calls']} calls "
        f"({usage.get('cache_hits', 0)} cache hits), {usage['prompt_tokens'] + usage['completion_tokens']:,} "
        f"tokens, ${usage['cost_usd']:.4f}",
        highlight=False,
    )
    if summary["stopped"]:
        out.print(f"stopped: {summary['stopped']}", highlight=False)
    table = Table(title="runs")
    for col in ("run", "style", "status", "iterations", "seed", "best", "noise", "result", "recheck"):
        table.add_column(col)
    for key, rs in sorted(state["runs"].items(), key=lambda kv: int(kv[0])):
        seed_scores = rs.get("seed_scores") or []
        recheck = rs.get("recheck") or {}
        table.add_row(
            key,
            rs["style"],
            rs["status"],
            f"{rs['iterations_done']}/{state['config']['iterations']}",
            " / ".join("-" if s is None else f"{s:.1f}" for s in seed_scores) or "-",
            "-" if rs.get("incumbent_score") is None else f"{rs['incumbent_score']:.1f}",
            "-" if rs.get("noise_floor") is None else f"±{rs['noise_floor']:.1f}",
            rs.get("result") or "-",
            _recheck_label(recheck),
        )
    out.print(table)
    board = Table(title="leaderboard")
    for col in ("candidate", "style", "status", "score", "lines", "description"):
        board.add_column(col)
    for row in leaderboard(state):
        board.add_row(
            row["candidate_id"],
            row["style"],
            row["status"],
            f"{row['score']:.1f}",
            str(row["lines"]),
            row["description"][:60],
        )
    out.print(board)


def _recheck_label(recheck: dict[str, Any]) -> str:
    if not recheck:
        return "-"
    if "winner_score" not in recheck:
        return "seed kept"
    return "confirmed" if recheck.get("accepted") else "not confirmed"


def status(
    rundir: RunDir,
    as_json: Annotated[bool, typer.Option("--json", help="Print progress and usage as JSON.")] = False,
) -> None:
    """Progress, leaderboard and cost so far of an experiment (also while `run` is working on it)."""
    from prompt_autoresearch.review import ReviewError, progress, require_state

    try:
        state = require_state(rundir)
    except ReviewError as error:
        raise _fail(str(error)) from None
    if as_json:
        typer.echo(json.dumps(progress(state), indent=2))
    else:
        _print_status(state)


def report(
    rundir: RunDir,
    html_out: Annotated[
        Path | None, typer.Option("--out", help="HTML file (default RUNDIR/report.html).")
    ] = None,
) -> None:
    """Write one self-contained HTML page: score frontier per run, per-dimension scores, lineage and
    side-by-side template diffs."""
    from prompt_autoresearch.report import render_report
    from prompt_autoresearch.review import ReviewError, require_state
    from schemas.atomic import atomic_write_bytes

    try:
        state = require_state(rundir)
    except ReviewError as error:
        raise _fail(str(error)) from None
    target = html_out or rundir / "report.html"
    atomic_write_bytes(target, render_report(state).encode("utf-8"))
    out.print(f"wrote {target}", highlight=False)


def approve(
    rundir: RunDir,
    run_index: Annotated[int, typer.Option("--run", help="The run whose result is approved.")],
    version: Annotated[str, typer.Option("--as", help="The template version it becomes: v0..v11.")],
) -> None:
    """The human review gate: approve a finished run's result as template vN."""
    from prompt_autoresearch.review import ReviewError, parse_version
    from prompt_autoresearch.review import approve as do_approve

    try:
        approval = do_approve(rundir, run_index, parse_version(version))
    except ReviewError as error:
        raise _fail(str(error)) from None
    out.print(
        f"approved run {run_index} result {approval['candidate_id']} ({approval['lines']} lines, score "
        f"{approval['score'] if approval['score'] is None else round(approval['score'], 1)}) as {version}",
        highlight=False,
    )


def export(
    rundir: RunDir,
    templates_out: Annotated[
        Path, typer.Option("--out", help="Template set folder to write (index.json + vN.md).")
    ],
    base: Annotated[
        Path | None,
        typer.Option("--base", help="Set that fills unapproved versions (default: the seed set)."),
    ] = None,
) -> None:
    """Write the approved templates as a template set the pools read (WORLDLINE_TEMPLATES or
    pools `templates_dir`), approved versions numbered from the shortest to the longest."""
    from prompt_autoresearch.review import ReviewError
    from prompt_autoresearch.review import export as do_export

    try:
        written = do_export(rundir, templates_out, base)
    except ReviewError as error:
        raise _fail(str(error)) from None
    table = Table(title=f"exported to {templates_out}")
    for col in ("version", "lines", "style", "origin", "approved as"):
        table.add_column(col)
    for t in written:
        table.add_row(
            f"v{t.version}",
            str(t.lines),
            t.style,
            t.origin,
            "-" if t.approved_as is None else f"v{t.approved_as}",
        )
    out.print(table)
    moved = [t for t in written if t.approved_as is not None and t.approved_as != t.version]
    for t in moved:
        out.print(
            f"note: the template approved as v{t.approved_as} is written as v{t.version} (versions follow length)",
            highlight=False,
        )


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("status")(status)
    app.command("report")(report)
    app.command("approve")(approve)
    app.command("export")(export)
