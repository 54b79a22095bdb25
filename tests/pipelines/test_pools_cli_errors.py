"""`worldline pools build` refuses bad inputs with one line naming the file, never a traceback."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from worldline.cli import app

runner = CliRunner()


def build(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["pools", "build", *args], env={"COLUMNS": "300"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_missing_input_and_config(tmp_path: Path) -> None:
    code, out = build("--in", str(tmp_path / "nope"), "--out", str(tmp_path / "out"))
    assert code == 2 and "does not exist" in out
    (tmp_path / "ds").mkdir()
    code, out = build(
        "--in", str(tmp_path / "ds"), "--out", str(tmp_path / "out"), "--config", str(tmp_path / "x.yaml")
    )
    assert code == 2 and "x.yaml" in out


def test_corrupt_part_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"junk")
    code, out = build("--in", str(bad), "--out", str(tmp_path / "out"))
    assert code == 2
    assert "bad.parquet" in out and "truncated or corrupt" in out
    assert not (tmp_path / "out" / "manifest.json").exists()
