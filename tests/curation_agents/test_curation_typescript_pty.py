"""Terminal segmentation of util-linux `script` typescripts recorded here with real programs (bash,
python3, less, vim) through a real PTY, in each way `script` logs a session: output only (without a
timing log, or with one in the advanced or classic format), input and output in one file (`-B`), and
keystrokes in a log of their own (`-I`)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.denoise import render_transcript
from curation_agents.formats.terminal import parse_typescript
from curation_agents.model import CleanConfig, Limits
from curation_agents.segment import segment_transcript
from tests.helpers.pty_recorder import CLEAR_KEYS, REPL_KEYS, TYPE_AHEAD_KEYS, record

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("script") is None or shutil.which("bash") is None, reason="needs script"),
]

# How `script` is asked to log, and whether what was typed is in the log.
MODES = {
    "plain": (["-O", "ts"], False),
    "timed": (["-T", "ts.timing", "-O", "ts"], False),
    "timed-classic": (["-m", "classic", "-T", "ts.timing", "-O", "ts"], False),
    "log-io": (["-T", "ts.timing", "-B", "ts"], True),
    "log-in": (["-T", "ts.timing", "-I", "ts.in", "-O", "ts"], True),
}


def _record(tmp_path: Path, keys: list[str], mode: str, width: int = 80) -> Path:
    flags, _ = MODES[mode]
    shell = "bash --norc --noprofile -i"
    # `exit` ends the shell, so `script` writes its footer and closes its logs itself.
    record(["script", "-q", "-f", *flags, "-c", shell], [*keys, "exit\r"], tmp_path / "pty.cast", width=width)
    return tmp_path / "ts"


def _turns(typescript: Path) -> list[dict[str, Any]]:
    parsed = parse_typescript(str(typescript), Limits())
    items = render_transcript(parsed["events"], parsed["width"], parsed["height"], Counter())
    return [dict(t) for t in segment_transcript(items, None, Counter())]


modes = pytest.mark.parametrize("mode", list(MODES))


@modes
def test_long_command_wrapped_by_readline(tmp_path: Path, mode: str) -> None:
    long = "echo " + " ".join(f"word{i:03d}" for i in range(30))
    turns = _turns(_record(tmp_path, [long + "\r", "echo done\r"], mode, width=40))
    assert [t["action"] for t in turns] == [long, "echo done"]
    assert turns[0]["observation"].split("\n", 1)[1].startswith(long[5:25])


@modes
def test_history_recall_and_reverse_search(tmp_path: Path, mode: str) -> None:
    keys = ["echo alpha\r", "echo beta\r", "\x1b[A", "\x1b[A", "\r", "\x12", "bet", "\r"]
    turns = _turns(_record(tmp_path, keys, mode))
    assert [t["action"] for t in turns] == ["echo alpha", "echo beta", "echo alpha", "echo beta"]
    assert [t["observation"].split("\n")[1] for t in turns] == ["alpha", "beta", "alpha", "beta"]


@modes
def test_type_ahead_gives_one_turn_per_command(tmp_path: Path, mode: str) -> None:
    turns = _turns(_record(tmp_path, TYPE_AHEAD_KEYS, mode))
    assert [t["action"] for t in turns] == ["echo one", "echo two", "echo three"]
    assert [t["observation"].split("\n")[1] for t in turns] == ["one", "two", "three"]


@modes
def test_python_repl_keeps_indentation(tmp_path: Path, mode: str) -> None:
    keys = REPL_KEYS
    turns = _turns(_record(tmp_path, keys, mode))
    actions = [t["action"] for t in turns]
    assert actions == [
        "python3 -q",
        "def f(x):\n    return x * 2",
        "for i in range(2):\n    print(f(i))",
        "exit()",
    ]
    assert "\n0\n2\n" in turns[2]["observation"]


@modes
def test_no_echo_prompt_hides_the_secret_and_keeps_the_next_prompt(tmp_path: Path, mode: str) -> None:
    keys = ["read -s -p 'Password: ' pw\r", "Sup3rSecretValue\r", "echo ${#pw}\r"]
    typescript = _record(tmp_path, keys, mode)
    if MODES[mode][1]:  # the secret is in the keystroke log: the reader must not pass it on
        logged = (tmp_path / ("ts.in" if mode == "log-in" else "ts")).read_bytes()
        assert b"Sup3rSecretValue" in logged
    turns = _turns(typescript)
    assert "Sup3rSecretValue" not in json.dumps(turns)
    assert turns[0]["action"] == "read -s -p 'Password: ' pw"
    assert turns[-1]["action"] == "echo ${#pw}" and turns[-1]["observation"].split("\n")[1] == "16"
    assert turns[-1]["metadata"]["prompt"] == "dev@box:~$ "
    assert all("REDACTED" not in t["observation"] for t in turns)  # no prompt mistaken for the password


@modes
def test_output_before_clear_is_kept_and_lookalikes_are_not_commands(tmp_path: Path, mode: str) -> None:
    keys = CLEAR_KEYS
    turns = _turns(_record(tmp_path, keys, mode))
    actions = [t["action"] for t in turns]
    assert actions[0] == "echo first" and turns[0]["observation"].split("\n", 1)[1].startswith("first")
    assert actions[1:] == ["printf 'dev@box:~$ not a command\\n'", "clear", "echo second", "echo third"]


@modes
def test_less_then_a_command(tmp_path: Path, mode: str) -> None:
    if shutil.which("less") is None:
        pytest.skip("needs less")
    (tmp_path / "f.txt").write_text("\n".join(f"row {i}" for i in range(100)))
    turns = _turns(_record(tmp_path, ["less f.txt\r", " ", "q", "echo after\r"], mode))
    assert turns[0]["action"].split("\n")[0] == "less f.txt" and "row" in turns[0]["observation"]
    assert [t["action"] for t in turns[1:]] == ["echo after"]


@modes
def test_vim_session_renders(tmp_path: Path, mode: str) -> None:
    if shutil.which("vim") is None:
        pytest.skip("needs vim")
    keys = ["vim -u NONE notes.txt\r", "i", "hello world", "\x1b", ":wq\r", "cat notes.txt\r"]
    turns = _turns(_record(tmp_path, keys, mode))
    assert turns[0]["action"].split("\n")[0] == "vim -u NONE notes.txt"
    if MODES[mode][1]:
        assert turns[0]["action"].endswith("\nihello world<Esc>:wq<CR>")
    assert turns[1]["action"] == "cat notes.txt" and turns[1]["observation"].split("\n", 1)[1].startswith(
        "hello world"
    )


def test_clean_reads_a_keystroke_log_as_part_of_its_typescript(tmp_path: Path) -> None:
    """`script -I keys -O out -T timing`: one record, whose typed secret reaches no output."""
    session = tmp_path / "session"
    session.mkdir()
    keys = ["echo hello\r", "read -s -p 'Password: ' pw\r", "Sup3rSecretValue\r", "echo ${#pw}\r"]
    _record(session, keys, "log-in")
    (session / "pty.cast").unlink()
    out = tmp_path / "out"
    summary = CleanRun([str(session)], out, CleanConfig()).run()
    assert summary["records_in"] == summary["accepted"] == 1, summary
    blobs = [
        json.dumps(pq.read_table(f).to_pylist(), default=str)
        if f.suffix == ".parquet"
        else f.read_bytes().decode("latin-1")
        for f in out.rglob("*")
        if f.is_file()
    ]
    assert "Sup3rSecretValue" not in "\n".join(blobs)
    assert any("echo ${#pw}" in b for b in blobs)
