"""Core dataset commands: `schema`, `validate`, `stats`."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.compute as pc
import typer
from rich.console import Console
from rich.table import Table

from schemas import SCHEMA_VERSION, TRAJECTORY_SCHEMA, ShardError
from schemas.jsonschema import trajectory_json_schema
from schemas.shards import dataset_files, iter_record_batches
from schemas.validate import validate_path

console = Console()
err_console = Console(stderr=True)


def schema(
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON Schema of the JSON form.")] = False,
) -> None:
    """Show the trajectory schema (the Arrow schema, or with --json the JSON Schema)."""
    if as_json:
        typer.echo(json.dumps(trajectory_json_schema(), indent=2))
        return
    console.print(f"[bold]worldline trajectory schema {SCHEMA_VERSION}[/bold]")
    console.print(TRAJECTORY_SCHEMA.to_string(show_field_metadata=False, show_schema_metadata=False))


def validate(
    paths: Annotated[
        list[Path], typer.Argument(help="Dataset dirs, Parquet parts, or trajectory JSONL files.")
    ],
    max_problems: Annotated[int, typer.Option(help="Stop listing after this many problems (0: all).")] = 200,
    as_json: Annotated[bool, typer.Option("--json", help="Print problems as JSON lines.")] = False,
) -> None:
    """Check every record against the schema; exit 1 listing file, record, field and problem if any fail."""
    total = 0
    for path in paths:
        for problem in validate_path(path):
            total += 1
            if max_problems and total > max_problems:
                continue
            if as_json:
                typer.echo(json.dumps(problem.to_json(), ensure_ascii=False))
            else:
                console.print(
                    f"[red]✗[/red] {problem.file}: [bold]{problem.locator()}[/bold]: "
                    f"[cyan]{problem.field}[/cyan]: {problem.message}  [dim]({problem.reason})[/dim]",
                    highlight=False,
                    soft_wrap=True,
                )
    if total:
        if max_problems and total > max_problems:
            err_console.print(
                f"... {total - max_problems} more problem(s) not shown (--max-problems 0 shows all)"
            )
        err_console.print(f"[red]{total} problem(s) found[/red]")
        raise typer.Exit(1)
    err_console.print("[green]all records valid[/green]")


def _batch_texts(batch: pa.RecordBatch) -> tuple[list[str], list[int]]:
    """Per trajectory: the concatenated system-prompt parts and turn texts, and its turn count."""
    prompt_cols = ["task", "initial_state", "demonstrations", "simulation_instruction"]
    turns = batch.column("turns")
    n_turns = pc.list_value_length(turns).fill_null(0).to_pylist()
    flat = pc.list_flatten(turns)
    actions = pc.struct_field(flat, ["action", "text"]).to_pylist()
    observations = pc.struct_field(flat, ["observation", "text"]).to_pylist()
    prompt_parts = [batch.column(c).to_pylist() for c in prompt_cols]
    texts: list[str] = []
    pos = 0
    for i, n in enumerate(n_turns):
        parts = [p[i] or "" for p in prompt_parts]
        for j in range(pos, pos + n):
            parts.append(actions[j] or "")
            parts.append(observations[j] or "")
        pos += n
        texts.append("\n".join(parts))
    return texts, n_turns


def stats(
    path: Annotated[Path, typer.Argument(help="A trajectory dataset directory or Parquet file.")],
    tokens: Annotated[bool, typer.Option(help="Count Qwen tokens (slower on big data).")] = True,
    tokenizer: Annotated[
        str | None, typer.Option(help="Qwen model name (qwen3.6, qwen3.5-27b) or a tokenizer.json path.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the numbers as JSON.")] = False,
) -> None:
    """Trajectories, turns and Qwen tokens per domain and source kind (streams; memory stays bounded).
    On a pool folder (OUT/cpt, OUT/sft, OUT/rl): samples, trajectories and the recorded token counts."""
    from worldline.pools import pool_name

    if pool_name(path) is not None:
        _pool_stats(path, as_json)
        return
    from worldline.tokenizer import get_token_counter

    try:
        counter = get_token_counter(tokenizer) if tokens else None
    except (ValueError, OSError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--tokenizer") from None
    rows: dict[tuple[str, str], dict[str, int]] = defaultdict(
        lambda: {"trajectories": 0, "turns": 0, "tokens": 0}
    )
    columns = [
        "domain",
        "source",
        "task",
        "initial_state",
        "demonstrations",
        "simulation_instruction",
        "turns",
    ]
    try:
        files = dataset_files(path)
        for _, batch in iter_record_batches(path, batch_size=512, columns=columns):
            domains = batch.column("domain").to_pylist()
            kinds = pc.struct_field(batch.column("source"), ["kind"]).to_pylist()
            texts, n_turns = _batch_texts(batch)
            counts = (
                counter.count_many(texts)
                if counter is not None and hasattr(counter, "count_many")
                else ([counter.count(t) for t in texts] if counter is not None else [0] * len(texts))
            )
            for d, k, n, c in zip(domains, kinds, n_turns, counts, strict=True):
                row = rows[(d, k)]
                row["trajectories"] += 1
                row["turns"] += n
                row["tokens"] += c
    except ShardError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    result: dict[str, Any] = {
        "path": str(path),
        "files": len(files),
        "tokenizer": counter.name if counter is not None else None,
        "by_domain_and_source_kind": [
            {"domain": d, "source_kind": k, **v} for (d, k), v in sorted(rows.items())
        ],
        "total": {key: sum(v[key] for v in rows.values()) for key in ("trajectories", "turns", "tokens")},
    }
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    table = Table(title=f"{path}  ({len(files)} file(s))")
    for col in (
        "domain",
        "source kind",
        "trajectories",
        "turns",
        "turns/traj",
        "Qwen tokens" if tokens else "",
    ):
        if col:
            table.add_column(col, justify="right" if col not in ("domain", "source kind") else "left")
    for entry in result["by_domain_and_source_kind"]:
        avg = entry["turns"] / entry["trajectories"] if entry["trajectories"] else 0.0
        cells = [
            entry["domain"],
            entry["source_kind"],
            f"{entry['trajectories']:,}",
            f"{entry['turns']:,}",
            f"{avg:.1f}",
        ]
        if tokens:
            cells.append(f"{entry['tokens']:,}")
        table.add_row(*cells)
    total = result["total"]
    cells = [
        "[bold]total[/bold]",
        "",
        f"{total['trajectories']:,}",
        f"{total['turns']:,}",
        f"{(total['turns'] / total['trajectories']) if total['trajectories'] else 0:.1f}",
    ]
    if tokens:
        cells.append(f"{total['tokens']:,}")
    table.add_row(*cells)
    console.print(table)


def _pool_stats(path: Path, as_json: bool) -> None:
    from worldline.pools import pool_stats

    result = pool_stats(path)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    table = Table(title=f"{path}  ({result['pool']} pool; tokens as counted by the build)")
    for col in ("domain", "source kind", "samples", "trajectories", "tokens"):
        table.add_column(col, justify="left" if col in ("domain", "source kind") else "right")
    for e in [
        *result["by_domain_and_source_kind"],
        {"domain": "total", "source_kind": "", **result["total"]},
    ]:
        table.add_row(
            e["domain"], e["source_kind"], f"{e['samples']:,}", f"{e['trajectories']:,}", f"{e['tokens']:,}"
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("schema")(schema)
    app.command("validate")(validate)
    app.command("stats")(stats)
