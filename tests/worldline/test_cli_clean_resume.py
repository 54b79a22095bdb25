"""`worldline clean` into a folder it cleaned before resumes only under the same settings: other
provenance (or any setting a record's outcome depends on) is refused by name, never applied to half
the records while summary.json reports it for all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from schemas.shards import iter_trajectories
from worldline.cli import app

CAST = Path("tests/fixtures/terminal/dev_basics.cast")


def clean(out: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["clean", str(CAST), "--out", str(out), "--no-llm", *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, " ".join(result.output.split())


def test_resume_with_other_provenance_is_refused_by_name(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, output = clean(out, "--source-name", "first", "--licence", "MIT")
    assert code == 0, output
    before = (out / "summary.json").read_bytes()

    code, output = clean(out, "--source-name", "second", "--licence", "Apache-2.0")
    assert code == 2, output
    assert "--source-name was 'first', now 'second'" in output
    assert "--licence was 'MIT', now 'Apache-2.0'" in output and "Traceback" not in output
    assert (out / "summary.json").read_bytes() == before

    code, output = clean(out, "--source-name", "first", "--licence", "MIT", "--threshold", "0.9")
    assert code == 2 and "--threshold was 0.5, now 0.9" in output, output

    code, output = clean(out, "--source-name", "first", "--licence", "MIT")
    assert code == 0, output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_records"] == 1 and summary["source_name"] == "first"
    assert {t.source.name for t in iter_trajectories(out)} == {"first"}


def test_outputs_without_recorded_settings_are_checked_against_their_summary(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert clean(out, "--source-name", "first")[0] == 0
    for folder in (out, out / "quarantine"):
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest.get("extra", {}).pop("clean_settings", None)
        (folder / "manifest.json").write_text(json.dumps(manifest))
    code, output = clean(out, "--source-name", "second")
    assert code == 2 and "--source-name was 'first', now 'second'" in output, output


@pytest.mark.parametrize("option", [["--source-kind", "inhouse"], ["--redact-pii", "none"]])
def test_every_setting_that_shapes_records_is_checked(tmp_path: Path, option: list[str]) -> None:
    out = tmp_path / "out"
    assert clean(out)[0] == 0
    code, output = clean(out, *option)
    assert code == 2 and option[0] in output, output
