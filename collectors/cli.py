"""Collector commands: `worldline collect` and `worldline sandbox doctor|reap`."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from collectors.collection import CollectConfig, CollectError, collect, merge_shards, parse_shard
from collectors.environment import TaskError, collector_domains
from collectors.personas import MIX, NONE, PersonaError, PersonaSetting, help_text, parse_mix
from collectors.policies import POLICIES
from collectors.sandbox import SandboxLimits

console = Console(stderr=True)
sandbox_app = typer.Typer(
    help="Inspect and maintain the container sandboxes the collectors use.", no_args_is_help=True
)


def collect_command(
    env: str = typer.Option(..., "--env", help=f"Domain: {' | '.join(collector_domains())}."),
    tasks: Path = typer.Option(..., "--tasks", exists=True, dir_okay=False, help="Task file (JSONL)."),
    policy: str = typer.Option("scripted", "--policy", help=f"Policy: {' | '.join(POLICIES)}."),
    out: Path = typer.Option(..., "--out", help="Dataset folder for the trajectory shards and asciicasts."),
    concurrency: int = typer.Option(1, "--concurrency", "-j", min=1, help="Sandboxes running at once."),
    resume: bool = typer.Option(False, "--resume", help="Continue OUT, skipping tasks with a final outcome."),
    max_turns: int = typer.Option(30, "--max-turns", min=1, help="Turn limit per task (status truncated)."),
    step_timeout: float = typer.Option(
        30.0, "--step-timeout", help="Seconds before a command is interrupted."
    ),
    episode_deadline: float = typer.Option(
        1800.0,
        "--episode-deadline",
        help="Wall-clock seconds per episode (a task's deadline_s overrides); beyond it: env_failure.",
    ),
    temperature: float = typer.Option(
        0.0,
        "--temperature",
        help="Sampling temperature of the openai policy with --persona none (a persona has its own).",
    ),
    persona: str = typer.Option(
        MIX,
        "--persona",
        help=f"openai policy: {MIX} (drawn per rollout from the seed, the task id and the rollout), "
        f"{NONE}, or a persona for every episode; a task's metadata.persona overrides. Personas: "
        f"{help_text()}.",
    ),
    persona_mix: str = typer.Option(
        "",
        "--persona-mix",
        help="openai policy: the weights of the mix, NAME=W,... (only the listed personas are drawn); "
        "default: every persona, weight 1.",
    ),
    persona_seed: int = typer.Option(
        0, "--persona-seed", help="openai policy: the seed of the persona draw."
    ),
    rollouts: int = typer.Option(
        1, "--rollouts", min=1, help="Episodes per task (each its own LLM sample index and trajectory)."
    ),
    context_tokens: int = typer.Option(
        0,
        "--context-tokens",
        min=0,
        help="openai policy: drop the oldest turns beyond this many tokens (estimated); 0 keeps all.",
    ),
    memory_mb: int = typer.Option(512, "--memory-mb", help="Memory limit per sandbox."),
    pids: int = typer.Option(256, "--pids", help="Process limit per sandbox."),
    flush_every: int = typer.Option(
        8, "--flush-every", min=1, help="Publish a shard part every N trajectories."
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    shard: str = typer.Option(
        "",
        "--shard",
        help="K/N: collect only shard K (0-based) of N, a hash partition of the task ids, into "
        "OUT/shard-K-of-N; `worldline collect-merge OUT` then makes OUT one dataset.",
    ),
    mcp_allow_url: list[str] = typer.Option(
        [],
        "--mcp-allow-url",
        help="mcp: an origin (e.g. http://127.0.0.1:8931) a task's mcp.url may reach although it is on "
        "the loopback or a private network; repeatable, added to WORLDLINE_MCP_ALLOWED_URLS.",
    ),
    search_allow_url: list[str] = typer.Option(
        [],
        "--search-allow-url",
        help="search: an origin (e.g. http://127.0.0.1:8888) a task's search.url or web_extractor may "
        "reach although it is on the loopback or a private network; repeatable, added to "
        "WORLDLINE_SEARCH_ALLOWED_URLS.",
    ),
) -> None:
    """Run tasks in sandboxes with a policy and write trajectories (resumable, atomic shards)."""
    # Options are checked before anything is created: a typo must not leave a dataset behind that
    # the corrected command would then refuse without --resume.
    if policy not in POLICIES:
        raise typer.BadParameter(f"{policy!r}: choose one of {', '.join(POLICIES)}", param_hint="--policy")
    if env not in collector_domains():
        raise typer.BadParameter(
            f"{env!r}: choose one of {', '.join(collector_domains())}", param_hint="--env"
        )
    if mcp_allow_url:
        from collectors.mcp_client import ALLOWED_URLS_ENV  # the mcp SDK loads only when asked

        os.environ[ALLOWED_URLS_ENV] = " ".join(
            [os.environ.get(ALLOWED_URLS_ENV, ""), *mcp_allow_url]
        ).strip()
    if search_allow_url:
        os.environ["WORLDLINE_SEARCH_ALLOWED_URLS"] = " ".join(
            [os.environ.get("WORLDLINE_SEARCH_ALLOWED_URLS", ""), *search_allow_url]
        ).strip()
    try:
        weights = parse_mix(persona_mix) if persona_mix else None
    except PersonaError as exc:
        raise typer.BadParameter(str(exc), param_hint="--persona-mix") from exc
    try:
        persona_setting = PersonaSetting(persona, weights, persona_seed).check("--persona")
    except PersonaError as exc:
        raise typer.BadParameter(str(exc), param_hint="--persona") from exc
    try:
        shard_spec = parse_shard(shard) if shard else None
    except CollectError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    config = CollectConfig(
        env=env,
        tasks_path=tasks,
        policy=policy,
        out=out,
        concurrency=concurrency,
        resume=resume,
        max_turns=max_turns,
        limits=SandboxLimits(step_timeout_s=step_timeout, memory_mb=memory_mb, pids=pids),
        flush_every=flush_every,
        episode_deadline_s=episode_deadline,
        temperature=temperature,
        persona=persona_setting,
        rollouts=rollouts,
        context_tokens=context_tokens or None,
        shard=shard_spec,
    )
    bar = Progress(
        TextColumn("[bold]collect[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not progress,
    )
    state: dict[str, TaskID] = {}

    def on_start(total: int, skipped: int) -> None:
        state["id"] = bar.add_task(f"{env} ({skipped} already final)", total=total - skipped)

    def on_progress(trajectory: object) -> None:
        bar.advance(state["id"])

    try:
        with bar:
            summary = collect(config, on_progress=on_progress, on_start=on_start)
    except (CollectError, TaskError) as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(2) from exc
    except KeyboardInterrupt as exc:
        console.print(
            "[yellow]interrupted:[/] finished trajectories were published, tasks in flight were recorded "
            "as aborted; rerun with --resume",
            soft_wrap=True,
        )
        signum = getattr(exc, "signum", signal.SIGINT)
        if signum != signal.SIGINT:  # SIGTERM, SIGHUP: end the way the signal asks, as a process should
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        raise typer.Exit(130) from None
    statuses = ", ".join(f"{k}={v}" for k, v in sorted(summary.by_status.items())) or "nothing new"
    console.print(
        f"{summary.written} trajectories written to {summary.out} in {summary.seconds:.1f} s "
        f"({statuses}); {summary.skipped} of {summary.total_tasks} tasks already final",
        soft_wrap=True,
    )
    if summary.redactions:
        redacted = ", ".join(f"{k}={v}" for k, v in sorted(summary.redactions.items()))
        console.print(f"redacted before writing: {redacted}")
    if summary.llm_usage is not None:
        totals = summary.llm_usage["totals"]
        console.print(
            f"LLM usage: {totals['calls']} calls, {totals['retries']} retries, {totals['failures']} failed, "
            f"{totals['cache_hits']} cache hits, {totals['prompt_tokens']} prompt + "
            f"{totals['completion_tokens']} completion tokens",
            soft_wrap=True,
        )
    if summary.stopped:
        console.print(
            f"[red]stopped:[/] {escape(summary.stopped)}; {summary.not_started} task(s) not started and "
            "those it cut short are retryable: rerun with --resume once that is fixed",
            soft_wrap=True,
        )
        raise typer.Exit(1)


@sandbox_app.command("doctor")
def doctor_command(
    env: list[str] = typer.Option(
        [], "--env", help="Only these domains (repeatable); default: every domain. Exit 1 when a check fails."
    ),
) -> None:
    """Check what each collector domain needs (the container engine, base images and a sandbox round
    trip for container domains; servers, browsers, devices for the others); print the fix for each gap."""
    from collectors.doctor import run_checks

    unknown = sorted(set(env) - set(collector_domains()))
    if unknown:
        console.print(
            f"[red]error:[/] unknown domain(s) {', '.join(unknown)}; available: {', '.join(collector_domains())}"
        )
        raise typer.Exit(2)
    checks = run_checks(env or None)
    out = Console(soft_wrap=True)
    for check in checks:
        mark = (
            "[green]ok[/]     " if check.ok else "[red]missing[/]" if check.required else "[yellow]warning[/]"
        )
        line = escape(f"[{check.domain}] {check.name}: {check.detail}")
        out.print(f"{mark} {line}", markup=True, highlight=False)
        if not check.ok and check.fix:
            out.print(f"        fix: {check.fix}", markup=False, highlight=False)
    if not all(c.ok or not c.required for c in checks):
        raise typer.Exit(1)


@sandbox_app.command("reap")
def reap_command(
    all_: bool = typer.Option(False, "--all", help="Remove every worldline sandbox, also of live runs."),
) -> None:
    """Remove sandboxes left behind by runs that died (all of them with --all)."""
    from collectors import engine
    from collectors.sandbox import LABEL, reap_orphans

    client = engine.connect()
    if all_:
        removed = []
        for container in client.containers.list(all=True, filters={"label": LABEL}):
            container.remove(force=True)
            removed.append(container.name)
    else:
        removed = reap_orphans(client)
    Console().print(f"removed {len(removed)} sandbox(es)" + (f": {', '.join(removed)}" if removed else ""))


def collect_merge_command(
    out: Path = typer.Argument(..., exists=True, file_okay=False, help="The --out folder of the shards."),
    allow_missing: bool = typer.Option(
        False, "--allow-missing", help="Merge even if some shards are missing."
    ),
) -> None:
    """Write OUT/manifest.json over every OUT/shard-K-of-N dataset so OUT reads as one (pools build --in OUT)."""
    try:
        manifest = merge_shards(out, allow_missing=allow_missing)
    except CollectError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    shards = manifest.extra["merged_shards"]
    console.print(
        f"{out}: {manifest.rows} trajectories in {len(manifest.files)} part(s) from {len(shards)} shard(s)"
    )


def register(app: typer.Typer) -> None:
    """Mount the collector commands on the `worldline` CLI."""
    app.command("collect")(collect_command)
    app.command("collect-merge")(collect_merge_command)
    app.add_typer(sandbox_app, name="sandbox")
