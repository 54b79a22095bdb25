"""Data in and out of trajectory datasets: `show`, `export jsonl|agentworldbench|atif|adp`, `import agentworldbench`.

Every command streams (trajectory by trajectory, line by line), so datasets larger than memory work,
and every failure is one line naming the file, the record and the field; never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, TypeVar, cast

import pyarrow.parquet as pq
import typer
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from curation_agents.agentworldbench_import import import_agentworldbench
from schemas import ShardError, Trajectory, get_trajectory, iter_trajectories
from schemas.agentworldbench import (
    AtomicTextFile,
    SampleError,
    TurnSelection,
    export_agentworldbench,
    read_samples,
)
from schemas.shards import dataset_files
from schemas.view import TEXT_CLIP_CHARS

R = TypeVar("R")

console = Console()
err_console = Console(stderr=True, highlight=False)

export_app = typer.Typer(
    help="Write a trajectory dataset out in another format.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
import_app = typer.Typer(
    help="Read another format into a trajectory dataset.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(1)


# --------------------------------------------------------------------------------------------------
# show
# --------------------------------------------------------------------------------------------------


def _clip(text: str, limit: int) -> Text:
    if limit > 0 and len(text) > limit:
        out = Text(text[:limit])
        out.append(f"\n… {len(text) - limit:,} more characters (--max-chars 0 shows all)", style="dim")
        return out
    return Text(text)


def trajectory_renderable(traj: Trajectory, *, max_chars: int = TEXT_CLIP_CHARS) -> Group:
    """A rich rendering of one trajectory: header, system-prompt parts, then one panel per turn."""
    src = traj.source
    header = Table.grid(padding=(0, 1))
    header.add_column(style="bold")
    header.add_column()
    status = traj.status.value + (f" ({traj.status_reason})" if traj.status_reason else "")
    rows = [
        ("id", traj.id),
        ("domain", traj.domain.value),
        ("status", status),
        ("turns", str(traj.num_turns)),
        ("source", f"{src.kind.value}: {src.name}" + (f"  {src.uri}" if src.uri else "")),
    ]
    if src.licence:
        rows.append(("licence", src.licence))
    if src.agent or src.model:
        rows.append(("acted by", " / ".join(x for x in (src.agent, src.model) if x)))
    if src.collected_at is not None:
        rows.append(("collected", src.collected_at.isoformat()))
    for key, value in rows:
        header.add_row(key, Text(value))
    parts: list[Panel] = [
        Panel(_clip(traj.task, max_chars), title="task", title_align="left", border_style="cyan")
    ]
    space = traj.action_space
    if space.description or space.tools:
        body = Text()
        if space.description:
            body.append_text(_clip(space.description, max_chars))
        if space.tools:
            if space.description:
                body.append("\n")
            body.append("tools: ", style="bold")
            body.append(", ".join(t.name for t in space.tools))
        parts.append(Panel(body, title="action space", title_align="left", border_style="cyan"))
    optional_parts: list[tuple[str, str | None]] = [
        ("initial state", traj.initial_state),
        ("demonstrations", traj.demonstrations),
        ("simulation instruction", traj.simulation_instruction),
    ]
    for part_label, part in optional_parts:
        if part is not None:
            parts.append(
                Panel(_clip(part, max_chars), title=part_label, title_align="left", border_style="cyan")
            )
    turns: list[Panel] = []
    for i, turn in enumerate(traj.turns, start=1):
        facts = [turn.action.kind.value]
        if turn.action.tool_name:
            facts.append(f"tool {turn.action.tool_name}")
        facts.append(turn.observation.format.value)
        if turn.exit_code is not None:
            facts.append(f"exit {turn.exit_code}")
        if turn.observation.is_error:
            facts.append("error")
        body = Text()
        state = turn.metadata.get("current_state")
        if isinstance(state, str):
            body.append("state before\n", style="bold magenta")
            body.append_text(_clip(state, max_chars))
            body.append("\n")
        body.append("action\n", style="bold blue")
        body.append_text(_clip(turn.action.text, max_chars))
        body.append("\nobservation\n", style="bold red" if turn.observation.is_error else "bold green")
        body.append_text(_clip(turn.observation.text, max_chars))
        turns.append(Panel(body, title=f"turn {i} · {' · '.join(facts)}", title_align="left"))
    return Group(header, *parts, *turns)


def show(
    path: Annotated[Path, typer.Argument(help="A dataset directory or Parquet part.")],
    trajectory_id: Annotated[str, typer.Option("--id", help="The trajectory's id.")],
    max_chars: Annotated[
        int, typer.Option(help="Clip each text after this many characters (0: show everything).")
    ] = TEXT_CLIP_CHARS,
    as_json: Annotated[bool, typer.Option("--json", help="Print the trajectory as its JSON object.")] = False,
) -> None:
    """Show one trajectory readably: provenance, system-prompt parts, and every turn."""
    try:
        traj = get_trajectory(path, trajectory_id)
    except KeyError:
        raise _fail(
            f"{path}: no trajectory with id {trajectory_id!r}; list ids with `worldline stats` or polars"
        ) from None
    except (ShardError, OSError) as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(traj.to_json(), indent=2, ensure_ascii=False))
        return
    console.print(trajectory_renderable(traj, max_chars=max_chars))


# --------------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------------


def _stream(path: Path) -> Iterator[Trajectory]:
    """Trajectories of a dataset; a broken record raises ShardError naming the file and the record,
    a path holding no dataset ShardError naming the path."""
    dataset_files(path)
    it = iter_trajectories(path)
    n = 0
    while True:
        try:
            traj = next(it)
        except StopIteration:
            return
        except (KeyError, ValueError, TypeError) as exc:
            raise ShardError(
                f"{path}: record {n}: cannot be read as a trajectory ({exc}); run `worldline validate`"
            ) from exc
        n += 1
        yield traj


@export_app.command("jsonl")
def export_jsonl(
    path: Annotated[Path, typer.Argument(help="A dataset directory or Parquet part.")],
    out: Annotated[Path, typer.Option("--out", help="The JSONL file to write (replaced atomically).")],
) -> None:
    """One JSON object per trajectory, with the schema's field names (id, domain, source, turns ...)."""
    writer: AtomicTextFile | None = None
    try:
        writer = AtomicTextFile(out)
        for traj in _stream(path):
            writer.write_line(traj.to_json_line())
    except (ShardError, OSError) as exc:
        if writer is not None:
            writer.abort()
        raise _fail(str(exc)) from None
    writer.commit()
    err_console.print(f"wrote {writer.lines} trajectories to {out}")


@export_app.command("agentworldbench")
def export_awb(
    path: Annotated[Path, typer.Argument(help="A dataset directory or Parquet part.")],
    out: Annotated[Path, typer.Option("--out", help="Directory for the <domain>_test.jsonl files.")],
    turns: Annotated[
        str,
        typer.Option(
            help="all: a sample per turn; paper: text domains keep first, last and 3 seeded middle turns; "
            "source: the turns an imported trajectory came with."
        ),
    ] = "all",
    seed: Annotated[int, typer.Option(help="Seed of the paper turn selection.")] = 0,
) -> None:
    """Write AgentWorldBench samples, one JSONL per domain, ready for the AgentWorldBench evaluator."""
    if turns not in ("all", "paper", "source"):
        raise _fail(f"--turns {turns!r}: choose all, paper or source")
    from pipelines.actions import canonicalise_actions

    def canonical(stream: Iterator[Trajectory]) -> Iterator[Trajectory]:
        # The actions in the form the pools (and their eval export) give them: terminal keystroke
        # arrays, SWE JSON tool calls; one form per domain whichever command wrote the samples.
        for traj in stream:
            canonicalise_actions(traj)
            yield traj

    try:
        report = export_agentworldbench(
            canonical(_stream(path)), out, turns=cast(TurnSelection, turns), seed=seed
        )
    except (ShardError, OSError, ValueError) as exc:
        raise _fail(str(exc)) from None
    table = Table("domain", "trajectories", "samples", "file")
    for domain, file in sorted(report.files.items()):
        table.add_row(domain, str(report.trajectories[domain]), str(report.samples[domain]), file)
    console.print(table)
    if report.skipped_empty:
        err_console.print(f"skipped {report.skipped_empty} trajectories without turns (nothing to evaluate)")


def _write_with_progress(
    label: str, path: Path, progress: bool, write: Callable[[Callable[[], None]], R]
) -> R:
    """Run `write(advance)` over the trajectories of `path` with a progress bar counting them on stderr;
    an unreadable dataset or a failed write is one line naming it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    try:
        total = sum(pq.ParquetFile(f).metadata.num_rows for f in dataset_files(path))
    except (ShardError, OSError) as exc:
        raise _fail(str(exc)) from None
    bar = Progress(
        TextColumn(f"[bold]{label}[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        disable=not progress,
    )
    try:
        with bar:
            task = bar.add_task("", total=total)
            return write(lambda: bar.advance(task))
    except (ShardError, OSError) as exc:
        raise _fail(str(exc)) from None


@export_app.command("atif")
def export_atif(
    path: Annotated[Path, typer.Argument(help="A dataset directory or Parquet part.")],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="A folder for one <id>.json ATIF file per trajectory, or a .jsonl file for one ATIF "
            "document per line (replaced atomically).",
        ),
    ],
    progress: Annotated[bool, typer.Option(help="Show a progress bar on stderr.")] = True,
) -> None:
    """Write ATIF-v1.7 trajectories (Harbor's Agent Trajectory Interchange Format), one per trajectory;
    fields ATIF has no place for travel in `extra.worldline`, so `worldline clean` reads them back whole."""
    from pipelines.interchange.atif import write_atif

    report = _write_with_progress(
        "export atif", path, progress, lambda done: write_atif(_stream(path), out, on_written=done)
    )
    err_console.print(f"wrote {report.trajectories} ATIF trajectories ({report.steps} steps) to {out}")


@export_app.command("adp")
def export_adp(
    path: Annotated[Path, typer.Argument(help="A dataset directory or Parquet part.")],
    out: Annotated[
        Path,
        typer.Option("--out", help="A .jsonl file for one ADP record per line (replaced atomically)."),
    ],
    progress: Annotated[bool, typer.Option(help="Show a progress bar on stderr.")] = True,
) -> None:
    """Write Agent Data Protocol (ADP 1.5.0) standardised records, one per trajectory; fields ADP has
    no place for travel in `details.worldline`, so `worldline clean` reads them back whole."""
    from pipelines.interchange.adp import write_adp

    report = _write_with_progress(
        "export adp", path, progress, lambda done: write_adp(_stream(path), out, on_written=done)
    )
    err_console.print(f"wrote {report.trajectories} ADP records ({report.items} items) to {out}")


# --------------------------------------------------------------------------------------------------
# import
# --------------------------------------------------------------------------------------------------


@import_app.command("agentworldbench")
def import_awb(
    files: Annotated[list[Path], typer.Argument(help="AgentWorldBench JSONL files (<domain>_test.jsonl).")],
    out: Annotated[Path, typer.Option("--out", help="The dataset directory to write (appended to).")],
    licence: Annotated[
        str | None, typer.Option(help="SPDX licence of the files, recorded as provenance.")
    ] = None,
    source_name: Annotated[str, typer.Option(help="Source name recorded as provenance.")] = "agentworldbench",
) -> None:
    """Import AgentWorldBench samples; turn variants of one trajectory become one trajectory."""
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise _fail(f"no such file: {', '.join(missing)}")
    for f in files:  # checked before OUT is created: an empty or foreign file leaves nothing behind
        try:
            next(iter(read_samples(f)))
        except StopIteration:
            raise _fail(f"{f}: holds no AgentWorldBench samples (one JSON object per line)") from None
        except (SampleError, OSError, ValueError) as exc:
            raise _fail(str(exc)) from None
    try:
        report = import_agentworldbench(files, out, source_name=source_name, licence=licence)
    except (SampleError, ShardError, OSError) as exc:
        raise _fail(str(exc)) from None
    console.print(
        f"read {report.samples_read} samples from {len(report.files)} file(s): "
        f"{report.samples_imported} imported as {report.trajectories_written} trajectories, "
        f"{report.samples_quarantined} quarantined, {report.samples_already_present} already present"
    )
    if report.conflicting_variants:
        err_console.print(
            f"[yellow]{report.conflicting_variants} sample(s) reuse an id with a different history; "
            "each became its own trajectory[/yellow]"
        )
    if report.quarantined:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(report.quarantined.items()))
        err_console.print(f"[yellow]quarantined ({reasons}); details in {report.quarantine_file}[/yellow]")


def register(app: typer.Typer) -> None:
    app.command("show")(show)
    app.add_typer(export_app, name="export")
    app.add_typer(import_app, name="import")
