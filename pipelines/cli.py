"""`worldline pools build | verify | summary`: the pool-building job from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from pipelines.config import ALL_POOLS, ConfigError, PoolsConfig
from schemas.shards import ShardError

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
    inputs: list[Path] = typer.Option(
        ..., "--in", exists=True, help="Trajectory dataset folder(s) or part files."
    ),
    out: Path = typer.Option(..., "--out", help="Output folder for the pools."),
    config: Path | None = typer.Option(
        None, "--config", exists=True, dir_okay=False, help="Pools YAML (default: the paper's rules)."
    ),
    knowledge: list[Path] = typer.Option(
        [], "--knowledge", exists=True, help="World-knowledge corpora for CPT."
    ),
    evals: list[Path] = typer.Option(
        [], "--eval", exists=True, help="Evaluation sets (AgentWorldBench JSONL or shards)."
    ),
    group_by: str | None = typer.Option(
        None,
        "--group-by",
        help="Records without a source group: one group per task (default), source or record.",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing OUT (atomically)."),
    incremental: bool = typer.Option(
        False,
        "--incremental",
        help="Add new input shards to the pools in OUT (its manifest names the earlier inputs); the "
        "result equals a full rebuild over all of them.",
    ),
) -> None:
    from pipelines.build import resolve_inputs, run_build
    from pipelines.finalize import finalize
    from pipelines.publish import (
        PublishError,
        check_target,
        discard,
        incremental_plan,
        publish,
        staging_folder,
    )
    from pipelines.runners import unknown_beam_options

    beam_args = list(ctx.args)
    unknown = unknown_beam_options(beam_args)
    if unknown:
        raise typer.BadParameter(
            f"unknown option(s) {' '.join(unknown)}: neither a `pools build` option nor a Beam pipeline "
            "option (Beam options go after `--`; see --help)"
        )
    try:
        cfg = PoolsConfig.load(config)
        if group_by is not None:
            cfg.assignment.group_by = group_by
            cfg.validate()
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--group-by" if group_by else "--config") from exc
    out = out.resolve()
    in_paths = [str(p.resolve()) for p in inputs]
    know = [str(p.resolve()) for p in knowledge]
    ev = [str(p.resolve()) for p in evals]
    try:
        check_target(out, overwrite=overwrite, incremental=incremental)
        if incremental:
            plan = incremental_plan(out, cfg.fingerprint(), in_paths, know, ev)
            console.print(
                f"incremental build: {len(plan.new_inputs)} new input(s) added to {len(plan.inputs)}"
            )
            in_paths, know, ev = plan.inputs, plan.knowledge, plan.evals
    except PublishError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    try:
        resolved = resolve_inputs(in_paths, know, ev, cfg)
    except (ShardError, ValueError, OSError) as exc:  # unreadable inputs: name the file, no traceback
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    console.print(
        f"building pools from {len(resolved.trajectory_files)} part(s), {resolved.total_rows} "
        f"trajectories, {len(resolved.knowledge_files)} corpus file(s), "
        f"{len(resolved.eval_turns)} evaluation turn(s)"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_folder(out)
    try:
        run_build(resolved, str(staging), cfg, beam_args, progress=_print_progress)
        manifest = finalize(staging, cfg, in_paths, know, ev)
    except BaseException:
        discard(staging)
        raise
    if not manifest["counts"]["reconciles"]:
        discard(staging)
        _print_summary(manifest)
        console.print("[red]counts do not reconcile: nothing published; see the stats above[/red]")
        raise typer.Exit(2)
    publish(staging, out)
    _print_summary(manifest)
    defaulted = manifest["stats"].get("groups_defaulted", 0)
    if defaulted:
        console.print(
            f"[yellow]warning:[/yellow] {defaulted} trajectories carry no source group (Source.group); "
            f"they were grouped by {cfg.assignment.group_by}, so each such group lands in one pool. "
            "Choose with --group-by source|task|record."
        )
    console.print(
        f"pools and dataset cards: {out}/{{cpt,sft,rl,eval}}/ (README.md, card.json); "
        f"manifest: {out / 'manifest.json'}"
    )


def _print_progress(stage: str, counters: dict[str, int]) -> None:
    shown = ", ".join(f"{k}={v}" for k, v in sorted(counters.items()))
    console.print(f"  {stage}: {shown}")


@pools_app.command(
    "verify",
    help="Prove disjointness, decontamination and per-pool rules by recomputing them from the pool rows "
    "and the inputs the manifest names; exit 1 listing offending rows (a missing input is a failure).",
)
def verify(
    out: Path = typer.Argument(..., help="The folder `pools build` wrote."),
    recount_tokens: bool = typer.Option(True, help="Recount every capped sample's tokens."),
) -> None:
    from pipelines.verify import verify_pools

    manifest_path = out / "manifest.json"
    if not manifest_path.exists():
        console.print(f"[red]{manifest_path} is missing: run `worldline pools build --out {out}` first[/red]")
        raise typer.Exit(1)
    cfg = PoolsConfig.from_dict(json.loads(manifest_path.read_text("utf-8"))["config"])
    violations = verify_pools(out, cfg, recount_tokens=recount_tokens)
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
def summary(out: Path = typer.Argument(..., help="The folder `pools build` wrote.")) -> None:
    manifest_path = out / "manifest.json"
    if not manifest_path.exists():
        console.print(f"[red]{manifest_path} is missing: run `worldline pools build --out {out}` first[/red]")
        raise typer.Exit(1)
    _print_summary(json.loads(manifest_path.read_text("utf-8")))


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
