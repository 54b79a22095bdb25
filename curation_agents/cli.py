"""`worldline clean`: run the curation graph over trace files into trajectory shards."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from curation_agents.model import CleanConfig, Limits


class SourceKindOption(StrEnum):
    public = "public"
    inhouse = "inhouse"


class CheckpointOption(StrEnum):
    auto = "auto"
    always = "always"
    never = "never"


def clean(
    paths: list[Path] = typer.Argument(
        ..., help="Trace files or folders (asciicast, script, agent logs; plain or gzip)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder: shards, quarantine/, summary.json."),
    workers: int = typer.Option(
        1, "--workers", "-w", min=1, help="Worker processes (files are spread over them)."
    ),
    source_kind: SourceKindOption = typer.Option(
        SourceKindOption.public, "--source-kind", help="Provenance kind."
    ),
    source_name: str = typer.Option(
        "public-traces", "--source-name", help="Provenance name; part of every id."
    ),
    licence: str | None = typer.Option(None, "--licence", help="SPDX licence of the sources, e.g. MIT."),
    threshold: float = typer.Option(
        0.5, "--threshold", min=0.0, max=1.0, help="Accept scores at or above this."
    ),
    max_record_mb: int = typer.Option(64, "--max-record-mb", min=1, help="Largest record ingest reads."),
    max_episode_turns: int = typer.Option(200, "--max-episode-turns", min=2, help="Split longer sessions."),
    llm: bool = typer.Option(
        True, "--llm/--no-llm", help="Use the LLM align/score when an endpoint is configured."
    ),
    checkpoint: CheckpointOption = typer.Option(
        CheckpointOption.auto,
        "--checkpoint",
        help="Per-stage SQLite checkpoints: auto = only when the LLM stages run.",
    ),
    flush_every: int = typer.Option(500, "--flush-every", min=1, help="Publish outputs every N records."),
    pii: str = typer.Option(
        "email,card,iban,phone",
        "--redact-pii",
        help="Personal-data classes to redact besides secrets: any of email, card, iban, phone, ip (comma-separated; "
        "'none' for none).",
    ),
) -> None:
    """Clean public or in-house interaction traces into trajectory shards.

    Runs ingest -> denoise -> segment -> align -> score on every record; records that fail a stage go to
    OUT/quarantine/ with the stage and a reason code. Rerunning into the same OUT resumes: finished
    records are skipped and each record is written once.
    """
    from curation_agents.llm_stages import llm_available
    from curation_agents.reader import discover
    from worldline.redaction.detect import parse_pii_classes

    console = Console(stderr=True)
    # Inputs are checked before OUT is created: a mistyped path leaves no empty dataset behind.
    try:
        if next(discover([str(p) for p in paths]), None) is None:
            console.print(f"[red]error:[/red] no trace files under {' '.join(map(str, paths))}")
            raise typer.Exit(2)
    except FileNotFoundError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None

    try:
        pii_classes = parse_pii_classes(pii)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--redact-pii") from exc

    config = CleanConfig(
        source_kind=source_kind.value,
        source_name=source_name,
        licence=licence,
        accept_threshold=threshold,
        max_episode_turns=max_episode_turns,
        limits=Limits(max_record_bytes=max_record_mb * 1024 * 1024),
        use_llm=llm and llm_available(),
        pii=pii_classes,
    )
    with Progress(
        TextColumn("[bold]clean"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("files"),
        TextColumn("{task.fields[records]} records"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("clean", total=None, records=0)

        def on_progress(files_done: int, files_total: int, records: int) -> None:
            progress.update(task, completed=files_done, total=files_total, records=records)

        # LangGraph loads only when a clean actually runs, so `worldline --help` stays quick.
        from curation_agents.clean_run import CleanRun, CleanSettingsError

        try:
            summary = CleanRun(
                [str(p) for p in paths],
                out,
                config,
                workers=workers,
                checkpoint=checkpoint.value,
                flush_every=flush_every,
                on_progress=on_progress,
            ).run()
        except (FileNotFoundError, CleanSettingsError) as exc:
            progress.stop()
            console.print(f"[red]error:[/red] {exc}", soft_wrap=True)
            raise typer.Exit(2) from None
    table = Table(title=f"clean -> {out}")
    table.add_column("outcome")
    table.add_column("records", justify="right")
    table.add_row("in", str(summary["records_in"]))
    table.add_row("accepted", str(summary["accepted"]))
    table.add_row("quarantined", str(summary["quarantined"]))
    for reason, count in summary["per_reason"].items():
        table.add_row(f"  {reason}", str(count))
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.command("clean")(clean)
