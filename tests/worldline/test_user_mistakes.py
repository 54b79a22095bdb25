"""Every command meets a user's mistake (a mistyped option value, a missing or empty input) with a
non-zero exit and one line naming what is wrong: never a traceback, never an output left behind
that the corrected command would then refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from schemas.shards import write_trajectories
from schemas.trajectory import SourceKind
from tests.helpers.pools_data import terminal
from worldline.cli import app

SEARCH_TASKS = Path("collectors/tasks/search_examples.jsonl")

# (case id, argv; {missing}, {empty_dir}, {empty_file}, {data}, {junk}, {made} are filled in; the
# token the error line must name). {made} is an output path the command must not create.
CASES: list[tuple[str, list[str], str]] = [
    ("validate-missing", ["validate", "{missing}"], "{missing}"),
    ("stats-missing", ["stats", "{missing}"], "{missing}"),
    ("stats-empty-folder", ["stats", "{empty_dir}"], "{empty_dir}"),
    ("stats-junk-part", ["stats", "{junk}"], "{junk}"),
    ("stats-tokenizer", ["stats", "{data}", "--tokenizer", "{missing}"], "{missing}"),
    ("show-unknown-id", ["show", "{data}", "--id", "no-such-id"], "no-such-id"),
    ("export-missing", ["export", "jsonl", "{missing}", "--out", "{made}"], "{missing}"),
    ("export-empty-folder", ["export", "jsonl", "{empty_dir}", "--out", "{made}"], "{empty_dir}"),
    ("export-turns-typo", ["export", "agentworldbench", "{data}", "--out", "{made}", "--turns", "al"], "al"),
    ("import-missing", ["import", "agentworldbench", "{missing}", "--out", "{made}"], "{missing}"),
    ("import-junk", ["import", "agentworldbench", "{empty_file}", "--out", "{made}"], "{empty_file}"),
    ("collect-env-typo", ["collect", "--env", "serch", "--tasks", "{tasks}", "--out", "{made}"], "serch"),
    (
        "collect-policy-typo",
        ["collect", "--env", "search", "--tasks", "{tasks}", "--policy", "opnai", "--out", "{made}"],
        "opnai",
    ),
    (
        "collect-tasks-missing",
        ["collect", "--env", "search", "--tasks", "{missing}", "--out", "{made}"],
        "{missing}",
    ),
    (
        "collect-tasks-empty",
        ["collect", "--env", "search", "--tasks", "{empty_file}", "--out", "{made}"],
        "{empty_file}",
    ),
    (
        "collect-shard-typo",
        ["collect", "--env", "search", "--tasks", "{tasks}", "--out", "{made}", "--shard", "3/2"],
        "3/2",
    ),
    ("collect-merge-missing", ["collect-merge", "{missing}"], "{missing}"),
    ("doctor-env-typo", ["sandbox", "doctor", "--env", "terminl"], "terminl"),
    ("clean-missing", ["clean", "{missing}", "--out", "{made}"], "{missing}"),
    ("clean-pii-typo", ["clean", "{data}", "--out", "{made}", "--redact-pii", "emial"], "emial"),
    ("clean-kind-typo", ["clean", "{data}", "--out", "{made}", "--source-kind", "publik"], "publik"),
    ("pools-in-missing", ["pools", "build", "--in", "{missing}", "--out", "{made}"], "{missing}"),
    ("pools-in-empty", ["pools", "build", "--in", "{empty_dir}", "--out", "{made}"], "{empty_dir}"),
    (
        "pools-config-missing",
        ["pools", "build", "--in", "{data}", "--out", "{made}", "--config", "{missing}"],
        "{missing}",
    ),
    ("pools-group-typo", ["pools", "build", "--in", "{data}", "--out", "{made}", "--group-by", "tsk"], "tsk"),
    (
        "pools-several-in",
        ["pools", "build", "--in", "{data}", "{empty_dir}", "--out", "{made}"],
        "{empty_dir}",
    ),
    ("pools-verify-missing", ["pools", "verify", "{missing}"], "{missing}"),
    ("pools-summary-missing", ["pools", "summary", "{missing}"], "{missing}"),
    ("judge-missing", ["judge", "{missing}", "--reference", "{data}", "--out", "{made}"], "{missing}"),
    ("judge-empty", ["judge", "{empty_file}", "--out", "{made}"], "{empty_file}"),
    (
        "judge-reference-missing",
        ["judge", "{junk}", "--reference", "{missing}", "--out", "{made}"],
        "{missing}",
    ),
    ("sft-missing", ["sft", "rejection-sample", "{missing}", "--out", "{made}"], "{missing}"),
    ("sft-empty-folder", ["sft", "rejection-sample", "{empty_dir}", "--out", "{made}"], "{empty_dir}"),
]


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("mistakes")
    write_trajectories(root / "data", [terminal("t-0", "g-0", SourceKind.INHOUSE, 1)])
    (root / "empty_dir").mkdir()
    (root / "empty.jsonl").write_text("")
    (root / "junk.parquet").write_bytes(b"not parquet at all")
    return {
        "missing": str(root / "MISSING"),
        "empty_dir": str(root / "empty_dir"),
        "empty_file": str(root / "empty.jsonl"),
        "data": str(root / "data"),
        "junk": str(root / "junk.parquet"),
        "tasks": str(SEARCH_TASKS.resolve()),
        "root": str(root),
    }


def invoke(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, BaseException | None]:
    # An endpoint is configured (nothing listens there): input mistakes are caught before it matters.
    monkeypatch.setenv("WORLDLINE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("WORLDLINE_LLM_MODEL", "test-model")
    result = CliRunner().invoke(app, argv, env={"COLUMNS": "400"})
    return result.exit_code, result.output, result.exception


@pytest.mark.parametrize(("argv", "token"), [pytest.param(a, t, id=i) for i, a, t in CASES])
def test_a_mistake_is_one_line_and_creates_nothing(
    argv: list[str], token: str, paths: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made = tmp_path / "made"
    fill = {**paths, "made": str(made)}
    code, output, exc = invoke([a.format(**fill) for a in argv], monkeypatch)
    assert exc is None or isinstance(exc, SystemExit), repr(exc)
    assert code != 0, output
    assert "Traceback" not in output, output
    wanted = token.format(**fill)
    assert any(wanted in line for line in output.splitlines()), output
    assert not made.exists(), f"{made} was created: {sorted(p.name for p in made.iterdir())}"


def test_a_mistyped_policy_leaves_nothing_the_corrected_command_refuses(
    paths: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tasks = tmp_path / "one.jsonl"
    tasks.write_text(SEARCH_TASKS.read_text().splitlines()[0] + "\n")
    out = tmp_path / "out"
    base = ["collect", "--env", "search", "--tasks", str(tasks), "--out", str(out), "--no-progress"]
    code, output, _ = invoke([*base, "--policy", "opnai"], monkeypatch)
    assert code == 2 and "opnai" in output and not out.exists(), output
    code, output, exc = invoke([*base, "--policy", "scripted"], monkeypatch)
    assert code == 0, (output, exc)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rows"] == 1
