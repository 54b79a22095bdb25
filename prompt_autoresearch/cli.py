"""The `autoresearch` command line: inspect and check system-prompt template sets (v0..v11)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from schemas.templates import SEED_TEMPLATES_DIR, TEMPLATES_ENV, TemplateError, load_template_set

app = typer.Typer(
    name="autoresearch",
    help=(
        "Evolve and review the world model's system-prompt templates (run, status, report, approve, "
        "export) and inspect template sets (templates, show, check). The active set (v0 for RL, v1 for "
        "CPT, v2..v11 "
        f"sampled per SFT sample) is the folder in ${TEMPLATES_ENV}, else the seed set shipped with worldline."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
console = Console()

FolderOption = Annotated[
    Path | None,
    typer.Option("--set", help=f"Template set folder (default: ${TEMPLATES_ENV} or the seed set)."),
]


def _load(folder: Path | None):  # type: ignore[no-untyped-def]
    try:
        return load_template_set(str(folder) if folder else None)
    except TemplateError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc


@app.command("templates")
def list_templates(folder: FolderOption = None) -> None:
    """List the templates of a set: version, style, size and file."""
    tset = _load(folder)
    table = Table(title=f"template set {tset.name!r}  ({tset.folder})")
    for col in ("version", "style", "lines", "file"):
        table.add_column(col)
    for version in sorted(tset.templates):
        t = tset.templates[version]
        table.add_row(f"v{version}", t.style, str(t.text.count("\n") + 1), t.path)
    console.print(table)


@app.command("show")
def show_template(
    version: Annotated[int, typer.Argument(help="Template version, 0..11.")],
    folder: FolderOption = None,
) -> None:
    """Print one template's text."""
    typer.echo(_load(folder).get(version).text)


@app.command("check")
def check_set(folder: Annotated[Path, typer.Argument(help="A template set folder with index.json.")]) -> None:
    """Check a template set: every listed file exists and uses only known template variables, keeping every
    per-trajectory part (tool definitions, demonstrations, initial state, simulation instruction)."""
    tset = _load(folder)
    console.print(f"[green]ok[/green]: {len(tset.templates)} template(s) in {tset.folder}")


# The experiment commands (run, status, report, approve, export) live in their own module.
from prompt_autoresearch import cli_experiment  # noqa: E402

cli_experiment.register(app)


def main() -> None:
    app()


__all__ = ["SEED_TEMPLATES_DIR", "app", "main"]


if __name__ == "__main__":
    main()
