"""Task and coverage commands: `worldline tasks generate` (seeded task files for every local domain)
and `worldline coverage DIR` (what a collected dataset covers, per domain)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import typer
from rich.console import Console

from schemas.domains import registered_domains

console = Console(stderr=True, soft_wrap=True)
tasks_app = typer.Typer(help="Make task files for `worldline collect`.", no_args_is_help=True)
# The registered domains with a task generator, as collectors.generators.generator_domains() reads them.
_GENERATOR_DOMAINS = sorted(spec.value for spec in registered_domains() if spec.generator)


@tasks_app.command("generate")
def generate_command(
    env: str = typer.Option(..., "--env", help=f"Domain: {' | '.join(_GENERATOR_DOMAINS)}."),
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


@tasks_app.command("synthesize")
def synthesize_command(
    env: str = typer.Option(..., "--env", help="Domain of the seeds and the new tasks."),
    seeds: Path = typer.Option(..., "--seeds", exists=True, dir_okay=False, help="Seed task file (JSONL)."),
    n: int = typer.Option(..., "--n", min=1, help="How many new tasks to keep."),
    out: Path = typer.Option(..., "--out", dir_okay=False, help="Task file to write (JSONL)."),
    seed: int = typer.Option(
        0, "--seed", help="Which seeds each round shows; the same seed, the same prompts."
    ),
    batch: int = typer.Option(5, "--batch", min=1, help="Tasks asked for in one call."),
    max_rounds: int | None = typer.Option(None, "--max-rounds", min=1, help="At most this many calls."),
) -> None:
    """Propose N new tasks with an LLM (role task_generator) from seed tasks and the domain's action
    space. Every task is validated like `worldline collect` reads it and near-duplicates of the seeds
    or of each other are dropped (MinHash, the pools' dedup settings); drops are counted by reason."""
    from collectors.synthesize import ROLE, SynthesisError, synthesize
    from worldline.llm import LLMConfig, LLMError, SyncLLMClient, endpoint_configured

    if not endpoint_configured():
        console.print(
            "[red]error:[/] tasks synthesize needs an OpenAI-compatible endpoint: set WORLDLINE_LLM_BASE_URL "
            f"and a model ({ROLE.model_env_var} or WORLDLINE_LLM_MODEL); "
            "`worldline tasks generate` makes tasks without one"
        )
        raise typer.Exit(2)
    try:
        seed_tasks = [
            json.loads(line) for line in seeds.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
    except ValueError as exc:
        console.print(f"[red]error:[/] {seeds}: not a task file (one JSON object per line): {exc}")
        raise typer.Exit(2) from exc
    config = LLMConfig.from_env()
    try:
        config.model_for(ROLE)
        with SyncLLMClient(config) as client:
            result = synthesize(env, seed_tasks, n, client, seed=seed, batch=batch, max_rounds=max_rounds)
            usage = client.format_usage()
    except (SynthesisError, LLMError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    from collectors.generators import write_tasks

    write_tasks(out, result.tasks)
    dropped = ", ".join(f"{k}={v}" for k, v in sorted(result.dropped.items())) or "none"
    console.print(
        f"wrote {len(result.tasks)} synthesized {env} tasks to {out} from {result.proposed} proposals in "
        f"{result.rounds} calls; dropped: {dropped}"
    )
    for detail in result.details:
        console.print(f"  {detail}")
    console.print(f"  {usage}")
    if len(result.tasks) < n:
        console.print(
            f"[yellow]warning:[/] kept {len(result.tasks)} of the {n} asked for (raise --max-rounds)"
        )


@tasks_app.command("import")
def import_command(
    suite: str = typer.Argument(..., help="terminal-bench | swe-bench | osworld | mcp | miniwob."),
    path: str = typer.Argument(
        ..., help="The suite's files (task folder(s), instance file, task JSON) or, for mcp, a server."
    ),
    out: Path = typer.Option(..., "--out", dir_okay=False, help="Task file to write (JSONL)."),
    repo: Path | None = typer.Option(
        None, "--repo", help="swe-bench: a local git repository or a tarball of the tree."
    ),
    build_image: bool = typer.Option(
        True, "--build-image/--no-build-image", help="terminal-bench: build worldline/tbench if missing."
    ),
    site_dir: Path | None = typer.Option(
        None, "--site-dir", file_okay=False, help="miniwob: where to copy the pages (default: OUT.site/)."
    ),
    seeds: int = typer.Option(1, "--seeds", min=1, help="miniwob: tasks per page (seeds 0..N-1)."),
) -> None:
    """Import a public task suite: every task valid for `worldline collect`, with its suite and task id
    in metadata; prints how many were imported and why the others were skipped."""
    from collectors.generators import write_tasks
    from collectors.task_import import SuiteError, import_suite

    try:
        options = (
            {"site_dir": site_dir or out.with_suffix(".site"), "seeds": seeds} if suite == "miniwob" else {}
        )
        result = import_suite(suite, path, repo_source=repo, **options)
    except SuiteError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    write_tasks(out, [task for _, task in result.tasks])
    domains = Counter(domain for domain, _ in result.tasks)
    listing = ", ".join(f"{k}={v}" for k, v in sorted(domains.items())) or "none"
    console.print(
        f"imported {len(result.tasks)} {suite} tasks to {out} ({listing}); skipped {len(result.skipped)}"
    )
    for reason, count in result.reasons().most_common():
        console.print(f"  skipped {count}: {reason}")
    offline = [t for _, t in result.tasks if t["metadata"].get("dockerfile_not_applied")]
    if offline:
        console.print(
            f"  {len(offline)} task(s) have Dockerfile steps not applied (metadata.dockerfile_not_applied)"
        )
    if suite == "terminal-bench" and result.tasks and build_image:
        from collectors import engine
        from collectors.task_import.terminal_bench import ensure_image

        try:
            console.print(f"image: {ensure_image(engine.connect(timeout_s=30))}")
        except engine.EngineUnavailable as exc:
            console.print(f"[yellow]image not built:[/] {exc}")


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
