"""Terminal segmentation on recordings made here with real programs (bash, python3, vim, less) through
a real PTY: what a person typed and what the terminal showed, turn by turn."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from curation_agents.denoise import render_transcript
from curation_agents.formats.terminal import parse_asciicast
from curation_agents.model import Limits
from curation_agents.segment import segment_transcript
from tests.helpers.pty_recorder import CLEAR_KEYS, REPL_KEYS, TYPE_AHEAD_KEYS, record

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")]
BASH = ["bash", "--norc", "--noprofile", "-i"]


def _turns(cast: Path) -> list[dict[str, Any]]:
    parsed = parse_asciicast(str(cast), Limits())
    items = render_transcript(parsed["events"], parsed["width"], parsed["height"], Counter())
    return [dict(t) for t in segment_transcript(items, None, Counter())]


def _actions(cast: Path) -> list[str]:
    return [t["action"] for t in _turns(cast)]


def test_long_command_wrapped_by_readline(tmp_path: Path) -> None:
    long = "echo " + " ".join(f"word{i:03d}" for i in range(30))
    cast = record(BASH, [long + "\r", "echo done\r"], tmp_path / "long.cast", width=40)
    turns = _turns(cast)
    assert [t["action"] for t in turns] == [long, "echo done"]
    assert turns[0]["observation"].split("\n", 1)[1].startswith(long[5:25])


def test_history_recall_and_reverse_search(tmp_path: Path) -> None:
    keys = ["echo alpha\r", "echo beta\r", "\x1b[A", "\x1b[A", "\r", "\x12", "bet", "\r"]
    assert _actions(record(BASH, keys, tmp_path / "hist.cast")) == [
        "echo alpha",
        "echo beta",
        "echo alpha",
        "echo beta",
    ]


def test_type_ahead_gives_one_turn_per_command(tmp_path: Path) -> None:
    turns = _turns(record(BASH, TYPE_AHEAD_KEYS, tmp_path / "ahead.cast"))
    assert [t["action"] for t in turns] == ["echo one", "echo two", "echo three"]
    assert [t["observation"].split("\n")[1] for t in turns] == ["one", "two", "three"]


def test_python_repl_keeps_indentation(tmp_path: Path) -> None:
    keys = REPL_KEYS
    actions = _actions(record(BASH, keys, tmp_path / "repl.cast"))
    assert "def f(x):\n    return x * 2" in actions
    assert "for i in range(2):\n    print(f(i))" in actions


def test_no_echo_prompt_hides_the_secret_and_keeps_the_next_prompt(tmp_path: Path) -> None:
    keys = ["read -s -p 'Password: ' pw\r", "Sup3rSecretValue\r", "echo ${#pw}\r"]
    cast = record(BASH, keys, tmp_path / "secret.cast")
    turns = _turns(cast)
    assert "Sup3rSecretValue" not in json.dumps(turns)
    assert turns[-1]["action"] == "echo ${#pw}" and turns[-1]["observation"].split("\n", 1)[1].startswith(
        "16"
    )


def test_output_only_recording_recovers_commands(tmp_path: Path) -> None:
    keys = CLEAR_KEYS
    cast = record(BASH, keys, tmp_path / "out-only.cast", with_input=False)
    turns = _turns(cast)
    actions = [t["action"] for t in turns]
    assert actions[0] == "echo first" and "first" in turns[0]["observation"]  # kept although cleared later
    assert "not a command" not in actions
    assert "echo second" in actions and "echo third" in actions
    assert not any("sleep 5" in a for a in actions)  # Ctrl-C'd line


def test_vim_session_renders_and_records_the_keys(tmp_path: Path) -> None:
    if shutil.which("vim") is None:
        pytest.skip("needs vim")
    keys = ["vim -u NONE notes.txt\r", "i", "hello world", "\x1b", ":wq\r", "cat notes.txt\r"]
    turns = _turns(record(BASH, keys, tmp_path / "vim.cast"))
    assert turns[0]["action"].startswith("vim -u NONE notes.txt\n")
    assert "ihello world<Esc>:wq<CR>" in turns[0]["action"]
    assert turns[1]["action"] == "cat notes.txt" and turns[1]["observation"].split("\n", 1)[1].startswith(
        "hello world"
    )


def test_less_session(tmp_path: Path) -> None:
    if shutil.which("less") is None:
        pytest.skip("needs less")
    (tmp_path / "f.txt").write_text("\n".join(f"row {i}" for i in range(100)))
    turns = _turns(record(BASH, ["less f.txt\r", " ", "q", "echo after\r"], tmp_path / "less.cast"))
    assert turns[0]["action"].startswith("less f.txt") and "row" in turns[0]["observation"]
    assert turns[-1]["action"] == "echo after"


def test_invalid_utf8_is_decoded_with_replacement(tmp_path: Path) -> None:
    cast = tmp_path / "bytes.cast"
    header = json.dumps({"version": 2, "width": 80, "height": 24}).encode()
    lines = [
        header,
        b'[0.1, "o", "dev@box:~$ "]',
        b'[0.2, "i", "cat blob\\r"]',
        b'[0.3, "o", "cat blob\\r\\nbad \xff\xfe bytes\\r\\ndev@box:~$ "]',
        b'[0.5, "i", "ls\\r"]',
        b'[0.6, "o", "ls\\r\\nblob\\r\\ndev@box:~$ "]',
    ]
    cast.write_bytes(b"\n".join(lines) + b"\n")
    turns = _turns(cast)
    assert turns[0]["observation"].split("\n", 1)[1].startswith("bad \ufffd\ufffd bytes")


def test_output_only_repl_blocks_keep_their_indentation(tmp_path: Path) -> None:
    keys = ["python3 -q\r", "def f(x):\r", "    return x * 2\r", "\r", "print(f(21))\r", "exit()\r"]
    turns = _turns(record(BASH, keys, tmp_path / "repl-out.cast", with_input=False))
    assert [t["action"] for t in turns] == [
        "python3 -q",
        "def f(x):\n    return x * 2",
        "print(f(21))",
        "exit()",
    ]
    assert turns[2]["observation"].split("\n", 1)[1].startswith("42")


def test_output_only_password_prompt_keeps_the_next_prompt_and_command(tmp_path: Path) -> None:
    keys = ["read -s -p 'Password: ' pw\r", "Sup3rSecretValue\r", "echo ${#pw}\r"]
    turns = _turns(record(BASH, keys, tmp_path / "secret-out.cast", with_input=False))
    assert "Sup3rSecretValue" not in json.dumps(turns)
    assert [t["action"] for t in turns] == ["read -s -p 'Password: ' pw", "echo ${#pw}"]
    assert turns[1]["observation"].split("\n", 1)[1].startswith("16") and "REDACTED" not in json.dumps(turns)
