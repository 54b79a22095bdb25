"""`autoresearch templates / show / check` on the seed set and on broken sets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from prompt_autoresearch.cli import SEED_TEMPLATES_DIR, app

runner = CliRunner()


def test_lists_twelve_seed_templates() -> None:
    result = runner.invoke(app, ["templates"])
    assert result.exit_code == 0
    for v in range(12):
        assert f"v{v}" in result.output


def test_show_prints_template_text() -> None:
    result = runner.invoke(app, ["show", "0"])
    assert result.exit_code == 0 and "{{task}}" in result.output


def test_check_rejects_unknown_placeholder(tmp_path: Path) -> None:
    broken = tmp_path / "set"
    shutil.copytree(SEED_TEMPLATES_DIR, broken)
    index = json.loads((broken / "index.json").read_text())
    first = broken / index["templates"][0]["file"]
    first.write_text(first.read_text() + "\n{{favourite_colour}}\n")
    result = runner.invoke(app, ["check", str(broken)])
    assert result.exit_code == 2 and "favourite_colour" in result.output
    assert runner.invoke(app, ["check", str(SEED_TEMPLATES_DIR)]).exit_code == 0
