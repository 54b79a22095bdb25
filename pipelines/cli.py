"""`worldline pools build | verify | summary`: the pool-building job from the command line."""

from __future__ import annotations

import logging

import typer
from rich.console import Console
from rich.table import Table

from pipelines.config import ALL_POOLS, ConfigError, PoolsConfig

pools_app = typer.Typer(
    help="Build, verify and summarise disjoint CPT / SFT / RL pools from trajectory shards (Apache Beam).",
    no_args_is_help=True,
)
console = Console()


@pools_app.command(
    "build",
    context_settings={"allow_extra_args": True},
    help="Run the Beam job into a staging folder and publish it as OUT when complete. Beam pipeline "
    "options follow `--`, e.g. `-- --direct_num_workers 2 --direct_running_mode multi_processing`, or "
    "`-- --runner DataflowRunner --project P --region R`.",
)
def build(
    ctx: typer.Context,
    inputs: list[str] = typer.Option(
        ..., "--in", help="Trajectory dataset folder(s) or part files (local paths or gs://... URLs)."
    ),
    out: str = typer.Option(..., "--out", help="Output folder for the pools (local path or gs://... URL)."),
    config: str | None = typer.Option(None, "--config", help="Pools YAML (default: the paper's rules)."),
    knowledge: list[str] = typer.Option([], "--knowledge", help="World-knowledge corpora for CPT."),
    evals: list[str] = typer.Option([], "--eval", help="Evaluation sets (AgentWorldBench JSONL or shards)."),
    group_by: str | None = typer.Option(
        None,
        "--group-by",
        help="Records without a source group: one group per task (default), source or record.",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing OUT (atomically)."),
    exclude_benchmark: list[str] = typer.Option(
        [],
        "--exclude-benchmark",
        help="Also drop every trajectory recorded on this benchmark (provenance or task text; any "
        "spelling); repeatable. Added to decontamination.exclude_benchmarks, which holds the "
        "evaluator's nine source benchmarks by default.",
    ),
    no_default_exclusions: bool = typer.Option(
        False,
        "--no-default-exclusions",
        help="Exclude only the benchmarks --exclude-benchmark names (default: also the evaluator's nine "
        "source benchmarks, or the config's decontamination.exclude_benchmarks).",
    ),
    incremental: bool = typer.Option(
        False,
        "--incremental",
        help="Add new input shards to the pools in OUT (its manifest names the earlier inputs); the "
        "result equals a full rebuild over all of them.",
    ),
) -> None:
    from pipelines import fs
    from pipelines.job import BuildInputsError, build_pools, plan_build
    from pipelines.publish import PublishError
    from pipelines.stages.assign import grouping_note

    beam_args = beam_options(ctx, "build")
    for hint, given in (
        ("--in", inputs),
        ("--config", [config] if config else []),
        ("--knowledge", knowledge),
        ("--eval", evals),
    ):
        for item in given:
            if not fs.exists(item):
                raise typer.BadParameter(f"{item} does not exist", param_hint=hint)
            if hint == "--config" and not fs.is_file(item):
                raise typer.BadParameter(f"{item} is a folder; give the YAML file", param_hint=hint)
    try:
        cfg = PoolsConfig.load(config)
        if group_by is not None:
            cfg.assignment.group_by = group_by
            cfg.validate()
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--group-by" if group_by else "--config") from exc
    if exclude_benchmark or no_default_exclusions:
        from pipelines.benchmarks_exclusion import UnknownBenchmark, canonical_list

        try:
            extra = canonical_list(exclude_benchmark)
        except UnknownBenchmark as exc:
            raise typer.BadParameter(str(exc), param_hint="--exclude-benchmark") from exc
        base = [] if no_default_exclusions else cfg.decontamination.exclude_benchmarks
        cfg.decontamination.exclude_benchmarks = canonical_list([*base, *extra])
    try:
        plan = plan_build(
            cfg, inputs, out, knowledge=knowledge, evals=evals, overwrite=overwrite, incremental=incremental
        )
    except (PublishError, BuildInputsError) as exc:  # unreadable inputs: name the file, no traceback
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    if plan.new_inputs is not None:
        console.print(f"incremental build: {len(plan.new_inputs)} new input(s) added to {len(plan.inputs)}")
    resolved = plan.resolved
    console.print(
        f"building pools from {len(resolved.trajectory_files)} part(s), {resolved.total_rows} "
        f"trajectories, {len(resolved.knowledge_files)} corpus file(s), "
        f"{len(resolved.eval_turns)} evaluation turn(s)"
    )
    _quiet_disk_full_logs()
    try:
        result = build_pools(plan, beam_args, progress=_print_progress)
    except Exception as exc:
        from schemas.atomic import free_space, is_disk_full

        if not is_disk_full(exc):
            raise
        # Beam carries the worker's error as text through several layers: one line says it all.
        console.print(
            f"[red]error:[/red] disk full while building {plan.out}: no space left on device "
            f"({free_space(plan.out)} free there); nothing was published and the staging folder is removed; "
            "free space and run the same command again",
            soft_wrap=True,
        )
        raise typer.Exit(2) from None
    _print_summary(result.manifest)
    if not result.published:
        console.print("[red]counts do not reconcile: nothing published; see the stats above[/red]")
        raise typer.Exit(2)
    for line in result.empty_pools:
        console.print(f"[yellow]warning:[/yellow] {line}")
    grouping = grouping_note(result.manifest.get("stats", {}), cfg.assignment.group_by)
    if grouping:
        console.print(f"[yellow]warning:[/yellow] {grouping}")
    console.print(
        f"pools and dataset cards: {plan.out}/{{cpt,sft,rl,eval}}/ (README.md, card.json); "
        f"manifest: {fs.join(plan.out, 'manifest.json')}"
    )


class _DiskFullRecord(logging.Filter):
    """Beam logs a worker's error with its traceback before it re-raises it; a full disk is reported
    once, in one line, by the command itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        from schemas.atomic import is_disk_full

        if not record.name.startswith("apache_beam"):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        return not ((exc is not None and is_disk_full(exc)) or is_disk_full(Exception(record.getMessage())))


def _quiet_disk_full_logs() -> None:
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _DiskFullRecord) for f in handler.filters):
            handler.addFilter(_DiskFullRecord())


def beam_options(ctx: typer.Context, command: str) -> list[str]:
    """The Beam pipeline options given after `--`; anything else unknown is refused with its name."""
    from pipelines.runners import unknown_beam_options

    beam_args = list(ctx.args)
    unknown = unknown_beam_options(beam_args)
    options = [a for a in unknown if a.startswith("-")]
    if options:
        raise typer.BadParameter(
            f"unknown option(s) {' '.join(options)}: neither a `pools {command}` option nor a Beam "
            "pipeline option (Beam options go after `--`; see --help)"
        )
    if unknown:
        # Click gives an option one value; the rest of `--in A B` would reach Beam, which drops it.
        raise typer.BadParameter(
            f"unexpected argument(s) {' '.join(unknown)}: each option takes one value; repeat the option "
            "for several (--in A --in B, --eval E1 --eval E2, --knowledge K1 --knowledge K2)"
        )
    return beam_args


def _print_progress(stage: str, counters: dict[str, int]) -> None:
    shown = ", ".join(f"{k}={v}" for k, v in sorted(counters.items()))
    console.print(f"  {stage}: {shown}")


@pools_app.command(
    "verify",
    context_settings={"allow_extra_args": True},
    help="Prove disjointness, decontamination and per-pool rules by recomputing them from the pool rows "
    "and the inputs the manifest names; exit 1 listing offending rows (a missing input is a failure). "
    "In this process by default; with --beam, or Beam pipeline options after `--` (as for `pools build`, "
    "e.g. `-- --runner DataflowRunner ...`), as a Beam job with the same checks and report.",
)
def verify(
    ctx: typer.Context,
    out: str = typer.Argument(..., help="The folder `pools build` wrote (local path or gs://... URL)."),
    recount_tokens: bool = typer.Option(True, help="Recount every capped sample's tokens."),
    beam: bool = typer.Option(
        False, "--beam", help="Run the checks as a Beam job (the local runner unless options follow `--`)."
    ),
) -> None:
    from pipelines.job import ManifestMissing, verify_built_pools

    beam_args = beam_options(ctx, "verify")
    try:
        violations = verify_built_pools(
            out, recount_tokens=recount_tokens, beam_args=beam_args if beam or beam_args else None
        )
    except ManifestMissing as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    from pipelines.verify import deterministic_share_lines

    for line in deterministic_share_lines(out):
        console.print(line)
    if not violations:
        console.print(
            "[green]verified[/green]: pools are disjoint (ids, source groups, exact and near "
            "duplicates recomputed from the inputs), free of evaluation overlap, and follow the "
            "per-pool rules and their recorded statistics"
        )
        return
    for v in violations:
        console.print(f"[red]{v.check}[/red]: {v.detail}")
        for row in v.rows[:20]:
            console.print(f"  {row}")
        if len(v.rows) > 20:
            console.print(f"  ... and {len(v.rows) - 20} more")
    raise typer.Exit(1)


@pools_app.command("summary", help="Print per-pool counts, domains and tokens from OUT/manifest.json.")
def summary(out: str = typer.Argument(..., help="The folder `pools build` wrote.")) -> None:
    from pipelines.job import ManifestMissing, built_manifest

    try:
        manifest = built_manifest(out)
    except ManifestMissing as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    _print_summary(manifest)


def _print_summary(manifest: dict) -> None:  # type: ignore[type-arg]
    table = Table(title="pools")
    for col in ("pool", "samples", "trajectories", "domains", "mean tokens", "max tokens"):
        table.add_column(col)
    for pool in ALL_POOLS:
        info = manifest["pools"][pool]
        tok = info["tokens"]
        domains = ", ".join(f"{d}={n}" for d, n in info["samples_per_domain"].items())
        table.add_row(
            pool,
            str(info["samples"]),
            str(info["trajectories"]),
            domains,
            str(tok.get("mean", "-")),
            str(tok.get("max", "-")),
        )
    console.print(table)
    c = manifest["counts"]
    console.print(
        f"records in {c['records_in']} = pooled {c['pooled']} + removed {c['removed']}"
        f" ({'reconciles' if c['reconciles'] else 'DOES NOT RECONCILE'})"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(pools_app, name="pools")
