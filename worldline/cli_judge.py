"""`worldline judge` and `worldline sft rejection-sample`: the judge's command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:  # the judge, the LLM client and rich load only when a command runs (fast --help)
    from collections.abc import Mapping

    from rich.progress import Progress

    from schemas.span_labels import TurnLabels
    from worldline.judge.judge import JudgeConfig
    from worldline.judge.samples import JudgeSample
    from worldline.judge.store import ResultStore
    from worldline.llm import LLMConfig, Role

EXIT_NOT_CONFIGURED = 2
EXIT_INPUT = 2
EXIT_BUDGET = 3


def llm_config_or_exit(role: Role, **overrides: Any) -> LLMConfig:
    """The environment's LLM config with overrides, or exit 2 naming the settings a role needs."""
    from worldline.llm import ENV_BASE_URL, ENV_MODEL, LLMConfig, LLMNotConfigured

    try:
        config = LLMConfig.from_env(**{k: v for k, v in overrides.items() if v is not None})
        config.require_endpoint()
        config.model_for(role)
    except LLMNotConfigured as error:
        typer.echo(
            f"error: {error}\nThis command needs an OpenAI-compatible endpoint: set {ENV_BASE_URL} and "
            f"{role.model_env_var} (or {ENV_MODEL}).",
            err=True,
        )
        raise typer.Exit(EXIT_NOT_CONFIGURED) from None
    return config


def _input_error(message: str) -> NoReturn:
    """Exit 2 with one line naming the input and the fix (a user mistake, not a traceback)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_INPUT)


def _progress() -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=not sys.stderr.isatty(),
    )


def judge_command(
    predictions: Path = typer.Argument(
        ..., help="JSONL of predictions: eval.py infer output (samples + gen)."
    ),
    reference: Path | None = typer.Option(
        None, "--reference", help="AgentWorldBench data the predictions answer (file, folder, or pools OUT)."
    ),
    out: Path = typer.Option(..., "--out", help="Output folder: results.jsonl, report.json, report.md."),
    concurrency: int | None = typer.Option(
        None, help="Samples judged at once (default WORLDLINE_LLM_CONCURRENCY)."
    ),
    budget: int | None = typer.Option(None, help="Stop after this many LLM calls (finished work is kept)."),
    budget_tokens: int | None = typer.Option(None, help="Stop after this many LLM tokens."),
    attempts: int = typer.Option(3, help="Judge calls per sample until one parses."),
    probe: int = typer.Option(
        0, "--probe", help="Also measure score shifts on N padded/reordered/verbose samples."
    ),
    lenient_block: bool = typer.Option(
        False,
        help="Judge answers without a <predicted_observation> block as a whole (AgentWorldBench's fallback).",
    ),
    clamp: bool = typer.Option(
        False, help="Clamp judge scores outside 1..5 instead of counting a parse failure."
    ),
    span_labels: Path | None = typer.Option(
        None,
        "--span-labels",
        help="Replay span labels (worldline replay's span_labels.parquet, or its folder): samples whose "
        "meta names a labelled trajectory turn get the exact check of their deterministic spans only.",
    ),
) -> None:
    """Score a world model's predictions against the real observations; resumable."""
    import asyncio

    from worldline.judge.inputs import RejectedLine, load_reference, read_predictions
    from worldline.judge.judge import JudgeConfig, JudgeResult
    from worldline.judge.report import aggregate, format_report
    from worldline.judge.store import ResultStore
    from worldline.llm import Role

    # The inputs are read before anything is created or an endpoint is needed: a mistyped path is
    # one line, and the corrected command starts from scratch.
    if not predictions.is_file():
        _input_error(f"{predictions}: no such file; pass the predictions JSONL (eval.py infer output)")
    samples: list[JudgeSample] = []
    rejected: list[RejectedLine] = []
    try:
        ref = load_reference(reference) if reference is not None else None
        for item in read_predictions(predictions, ref):
            if isinstance(item, RejectedLine):
                rejected.append(item)
            else:
                samples.append(item)
    except (OSError, ValueError) as exc:
        _input_error(str(exc))
    if not samples and not rejected:
        _input_error(f"{predictions}: holds no predictions (no JSON lines); nothing to judge")
    labels = None
    if span_labels is not None:
        from schemas.span_labels import SpanLabelsError, read_span_labels

        try:
            labels = read_span_labels(span_labels)
        except (OSError, SpanLabelsError) as exc:
            _input_error(f"--span-labels: {exc}")
    config = llm_config_or_exit(
        Role.JUDGE, concurrency=concurrency, max_calls=budget, max_total_tokens=budget_tokens
    )
    out.mkdir(parents=True, exist_ok=True)
    if rejected:
        (out / "rejected_lines.jsonl").write_text(
            "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in rejected), encoding="utf-8"
        )
        typer.echo(
            f"{len(rejected)} prediction line(s) rejected: see {out / 'rejected_lines.jsonl'}", err=True
        )
    judge_config = JudgeConfig(
        attempts=attempts,
        require_block=not lenient_block,
        out_of_range="clamp" if clamp else "fail",
        concurrency=config.concurrency,
    )
    heavy = ("judge_output", "prediction", "strengths", "weaknesses")
    store = ResultStore(
        out / "results.jsonl",
        retry_if=lambda r: r.get("failure") == "call_failed",
        keep=lambda r: {k: v for k, v in r.items() if k not in heavy},
    )
    todo = [s for s in samples if not store.done(s.sample_id)]
    wanted = {s.sample_id for s in samples}
    stopped, probe_report, usage = asyncio.run(
        _run_judge(config, judge_config, todo, samples, store, probe, labels)
    )
    store.close()
    results = [JudgeResult.from_json(r) for r in store if r["sample_id"] in wanted]
    report = aggregate(results)
    document = {
        "predictions": str(predictions),
        "reference": str(reference) if reference else None,
        "samples": len(samples),
        "judged": len(results),
        "rejected_lines": len(rejected),
        "stopped": stopped,
        "report": report,
        "usage": usage,
    }
    (out / "report.json").write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    table = format_report(report)
    (out / "report.md").write_text(
        "# Judge report\n\nScores are normalised (mean-1)/4*100; `f=0` counts failed judgements as 0, "
        "`valid` averages successful ones only (AgentWorldBench's eval.py).\n\n" + table + "\n",
        encoding="utf-8",
    )
    typer.echo(table)
    if probe_report is not None:
        (out / "probe.json").write_text(json.dumps(probe_report, indent=2) + "\n", encoding="utf-8")
        for name, row in probe_report["shifts"].items():
            shift = row["mean_shift"]
            typer.echo(
                f"probe {name:<10} samples={row['samples']} mean_shift="
                f"{'-' if shift is None else f'{shift:+.2f}'} up={row['up']} down={row['down']}"
            )
    calls = usage["totals"]["calls"]
    typer.echo(
        f"LLM calls={calls} requests={usage['totals']['requests']} cache_hits={usage['totals']['cache_hits']} cost_usd={usage['totals']['cost_usd']:.4f}"
    )
    if stopped:
        typer.echo(
            f"stopped early: {stopped}\nFinished samples are kept in {out / 'results.jsonl'}; rerun to continue.",
            err=True,
        )
        raise typer.Exit(EXIT_BUDGET)


async def _run_judge(
    config: LLMConfig,
    judge_config: JudgeConfig,
    todo: list[JudgeSample],
    samples: list[JudgeSample],
    store: ResultStore,
    probe: int,
    labels: Mapping[tuple[str, int], TurnLabels] | None = None,
) -> tuple[str | None, dict[str, Any] | None, dict[str, Any]]:
    from worldline.judge.judge import Judge, JudgeResult
    from worldline.judge.probe import run_probe
    from worldline.llm import LLMClient

    async with LLMClient(config) as client:
        judge = Judge(client, judge_config, span_labels=labels)
        with _progress() as progress:
            task = progress.add_task("judge", total=len(todo))

            def on_result(result: JudgeResult) -> None:
                store.append(result.to_json())
                progress.advance(task)

            batch = await judge.judge_many(todo, on_result=on_result)
        probe_report = None
        if probe > 0 and batch.stopped is None:
            probe_report = await run_probe(judge, samples, probe)
        return batch.stopped or (probe_report or {}).get("stopped"), probe_report, client.usage


sft_app = typer.Typer(help="SFT curation: rejection sampling with the judge.", no_args_is_help=True)


@sft_app.command("rejection-sample")
def rejection_sample_command(
    sft_pool: Path = typer.Argument(
        ..., help="SFT pool: pools OUT, OUT/sft, a part file, or chat-message JSONL."
    ),
    out: Path = typer.Option(..., "--out", help="Output folder: kept samples, decisions, card."),
    rollouts: int = typer.Option(3, help="Rollouts per query from the reasoning model (role rollout)."),
    threshold: float = typer.Option(
        50.0, help="Keep the best rollout only if its normalised score (0..100) is at least this."
    ),
    concurrency: int | None = typer.Option(None, help="Samples processed at once."),
    budget: int | None = typer.Option(None, help="Stop after this many LLM calls (finished work is kept)."),
    budget_tokens: int | None = typer.Option(None, help="Stop after this many LLM tokens."),
    limit: int | None = typer.Option(None, help="Only the first N samples."),
    max_tokens: int = typer.Option(32768, help="max_tokens of each rollout."),
) -> None:
    """Roll out, judge, compare the top two, keep the best above the threshold; resumable."""
    from worldline.llm import LLMNotConfigured, Role
    from worldline.sft_rejection import RejectionConfig, pool_files, run_rejection_sampling

    if not sft_pool.exists():
        _input_error(
            f"{sft_pool}: no such file or folder; pass a pools OUT, OUT/sft, a part file or chat JSONL"
        )
    try:
        pool_files(sft_pool)
    except FileNotFoundError as exc:
        _input_error(str(exc))
    config = llm_config_or_exit(
        Role.ROLLOUT, concurrency=concurrency, max_calls=budget, max_total_tokens=budget_tokens
    )
    try:
        judge_model = config.model_for(Role.JUDGE)
    except LLMNotConfigured as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(EXIT_NOT_CONFIGURED) from None
    if judge_model == config.model_for(Role.ROLLOUT):
        typer.echo(
            f"warning: the judge and the rollout model are both '{judge_model}'; an independent judge "
            f"(set {Role.JUDGE.model_env_var}) avoids a model grading its own answers",
            err=True,
        )
    settings = RejectionConfig(rollouts=rollouts, threshold=threshold, max_tokens=max_tokens, limit=limit)
    with _progress() as progress:
        task = progress.add_task("rejection-sample", total=None)
        outcome = run_rejection_sampling(
            sft_pool,
            out,
            config,
            settings,
            on_progress=lambda done, total: progress.update(task, completed=done, total=total),
        )
    typer.echo(outcome.table)
    typer.echo(f"kept {outcome.kept} of {outcome.decided} -> {outcome.samples_path}")
    if outcome.stopped:
        typer.echo(
            f"stopped early: {outcome.stopped}\nRerun to continue; finished samples are kept.", err=True
        )
        raise typer.Exit(EXIT_BUDGET)


def register(app: typer.Typer) -> None:
    app.command("judge")(judge_command)
    app.add_typer(sft_app, name="sft")
