"""Exact turns from recordings made through a real PTY with bash: multi-line input sent as one event,
input read by programs (`cat > file`, `read -p`, `input()`), and commands that reach the right margin.

Two oracles that share nothing with the cleaner: the turns counted from the recording's own input
events, and pyte (the emulator the collector observes with) fed the whole session, whose screen the
observations must tile row for row (each observation ends with the row the next action is typed on,
and the next observation starts with that row as it looks once typed: docs/observations.md)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyte
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curation_agents.denoise import denoise_record
from curation_agents.formats.terminal import parse_asciicast
from curation_agents.model import CleanConfig, Limits
from curation_agents.segment import segment_record
from tests.helpers.pty_recorder import record

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")]
BASH = ["bash", "--norc", "--noprofile", "-i"]
PROMPT = "dev@box:~$ "  # the recorder's PS1
PTY_SETTINGS = settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def cleaned(cast: Path) -> list[dict[str, Any]]:
    parsed = parse_asciicast(str(cast), Limits())
    counts: Counter[str] = Counter()
    denoise_record(parsed, counts)
    return [dict(t) for episode in segment_record(parsed, CleanConfig(), counts) for t in episode]


def submissions(cast: Path) -> int:
    """Turns in the source, counted from its input events: each event ending in Enter (a line or a
    block of lines sent at once) or a lone ^D is one action."""
    events = [json.loads(line) for line in cast.read_text().splitlines()[1:]]
    return sum(1 for e in events if e[1] == "i" and (e[2].endswith("\r") or e[2] == "\x04"))


def pyte_screen(cast: Path) -> list[str]:
    """The whole session as pyte shows it at the recording's width, rows right-stripped."""
    lines = cast.read_text().splitlines()
    width = json.loads(lines[0])["width"]
    output = "".join(e[2] for e in map(json.loads, lines[1:]) if e[1] == "o")
    screen = pyte.Screen(width, output.count("\n") + len(output) // width + 8)
    pyte.Stream(screen).feed(output)
    rows = [row.rstrip() for row in screen.display]
    while rows and not rows[-1]:
        rows.pop()
    return rows


def tiled(turns: list[dict[str, Any]]) -> list[str]:
    """The screen the observations make when each one's last row gives way to the next one's first."""
    rows: list[str] = []
    for i, turn in enumerate(turns):
        obs = turn["observation"].split("\n")
        rows += obs if i == len(turns) - 1 else obs[:-1]
    rows = [row.rstrip() for row in rows]
    while rows and not rows[-1]:
        rows.pop()
    return rows


def check(cast: Path, actions: list[str]) -> list[dict[str, Any]]:
    turns = cleaned(cast)
    assert [t["action"] for t in turns] == actions
    assert len(turns) == submissions(cast)
    assert tiled(turns) == pyte_screen(cast)
    assert not [t for t in turns if t["metadata"].get("typed_ahead_without_echo")]
    return turns


WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=10)
LINE = st.lists(WORD, min_size=1, max_size=3).map(" ".join)


@st.composite
def blocks(draw: st.DrawFn) -> str:
    """One multi-line input: a heredoc, a `for ... do` block, or a quoted newline."""
    kind = draw(st.sampled_from(["heredoc", "for", "quoted"]))
    if kind == "heredoc":
        body = draw(st.lists(LINE, min_size=1, max_size=4))
        return "cat <<'EOF'\n" + "\n".join(body) + "\nEOF"
    if kind == "for":
        words = draw(st.lists(WORD, min_size=1, max_size=4))
        return f'for w in {" ".join(words)}; do\necho "<$w>"\ndone'
    parts = draw(st.lists(LINE, min_size=2, max_size=3))
    return "echo '" + "\n".join(parts) + "'"


@PTY_SETTINGS
@given(st.lists(blocks(), min_size=1, max_size=3))
def test_multi_line_input_sent_as_one_event_is_one_turn(tmp_path: Path, inputs: list[str]) -> None:
    keys = [*(text + "\r" for text in inputs), "echo end\r"]  # how tmux send-keys and our casts send them
    turns = check(record(BASH, keys, tmp_path / "block.cast"), [*inputs, "echo end"])
    for text, turn in zip(inputs, turns, strict=False):
        first, *more = text.split("\n")
        rows = turn["observation"].split("\n")
        assert rows[0] == PROMPT + first and rows[1 : 1 + len(more)] == ["> " + line for line in more]


@PTY_SETTINGS
@given(st.lists(LINE, min_size=1, max_size=3), WORD, WORD)
def test_input_read_by_programs_keeps_the_typed_lines_in_order(
    tmp_path: Path, lines: list[str], name: str, answer: str
) -> None:
    program = "python3 -c 'print(input(\"? \").upper())'"
    keys = [
        "cat > f.txt\r",
        *(line + "\r" for line in lines),
        "\x04",
        "cat f.txt\r",
        "read -p 'Name: ' n\r",
        name + "\r",
        'echo "[$n]"\r',
    ]
    actions = ["cat > f.txt", *lines, "^D", "cat f.txt", "read -p 'Name: ' n", name, 'echo "[$n]"']
    if shutil.which("python3"):
        keys += [program + "\r", answer + "\r"]
        actions += [program, answer]
    turns = check(record(BASH, keys, tmp_path / "stdin.cast"), actions)
    # Each typed line is its own turn: its echo, then the row the next line goes to.
    for line, turn in zip(lines, turns[1:], strict=False):
        assert turn["observation"] == line + "\n"
    eof = turns[1 + len(lines)]
    assert eof["action_kind"] == "keystrokes" and eof["observation"] == PROMPT
    assert turns[2 + len(lines)]["observation"] == PROMPT + "cat f.txt\n" + "\n".join(lines) + "\n" + PROMPT


def _prompt_read_late(cast: Path, answer: str, prompt: str, out: Path) -> Path | None:
    """The recording as a loaded machine writes it when a program's prompt (`Name: `, `? `) was on the
    PTY before the answer was typed but the recorder read it only after: the answer's input event
    logged before the prompt. None when the program printed its prompt only after the answer came."""
    lines = cast.read_text().splitlines()
    events = [json.loads(line) for line in lines[1:]]
    at = next(i for i, e in enumerate(events) if e[1] == "i" and e[2] == answer)
    before = events[at - 1]
    if before[1] != "o" or not before[2].endswith(prompt):
        return None
    head = before[2][: -len(prompt)]
    events[at - 1 : at + 1] = [*([["0", "o", head]] if head else []), events[at], ["0", "o", prompt]]
    for n, event in enumerate(events):
        event[0] = round(n * 0.01, 6)
    out.write_text("\n".join([lines[0], *map(json.dumps, events)]) + "\n")
    return out


@pytest.mark.skipif(shutil.which("python3") is None, reason="needs python3")
def test_an_answer_logged_before_the_programs_prompt_keeps_its_turn(tmp_path: Path) -> None:
    program = "python3 -c 'print(input(\"? \").upper())'"
    keys = ["read -p 'Name: ' n\r", "ann\r", 'echo "[$n]"\r', program + "\r", "abc\r"]
    actions = ["read -p 'Name: ' n", "ann", 'echo "[$n]"', program, "abc"]
    cast = record(BASH, keys, tmp_path / "answers.cast")
    check(cast, actions)
    late = _prompt_read_late(cast, "ann\r", "Name: ", tmp_path / "name-late.cast")
    assert late is not None  # bash's `read -p` writes its prompt with the command's echo
    turns = check(late, actions)
    assert turns[0]["observation"] == PROMPT + "read -p 'Name: ' n\nName: "
    assert turns[1]["observation"] == "Name: ann\n" + PROMPT
    late = _prompt_read_late(cast, "abc\r", "? ", tmp_path / "python-late.cast")
    if late is not None:  # python printed `? ` before the answer was typed (not so on a loaded machine)
        turns = check(late, actions)
        assert turns[-1]["observation"] == "? abc\nABC\n" + PROMPT


def margin_commands(width: int) -> list[str]:
    """`echo x...` commands whose prompt line ends 2 before to 2 past the right margin, on the first
    and the second screen row."""
    out = []
    for row in (1, 2):
        for offset in range(-2, 3):
            length = row * width + offset - len(PROMPT) - len("echo ")
            if length > 0:
                out.append("echo " + "x" * length)
    return out


@pytest.mark.parametrize("width", [20, 33, 47])
@pytest.mark.parametrize("per_key", [True, False])
def test_commands_at_every_offset_of_the_margin(tmp_path: Path, width: int, per_key: bool) -> None:
    commands = margin_commands(width)
    keys: list[str] = ["echo start\r"]
    for command in commands:
        keys += [*command, "\r"] if per_key else [command + "\r"]
    cast = record(BASH, keys, tmp_path / "margin.cast", width=width, quiet_s=0.03 if per_key else 0.15)
    turns = check(cast, ["echo start", *commands])
    for command, turn in zip(commands, turns[1:], strict=True):
        # The prompt line in rows of the width, then the output in rows of its own, then the prompt.
        typed, out = PROMPT + command, command[5:]
        rows = [typed[i : i + width] for i in range(0, len(typed), width)]
        rows += [out[i : i + width] for i in range(0, len(out), width)]
        assert turn["observation"].split("\n") == [*rows, PROMPT]


@PTY_SETTINGS
@given(st.sampled_from([20, 33, 47, 80]), st.integers(-2, 2), WORD)
def test_generated_commands_crossing_the_margin(tmp_path: Path, width: int, offset: int, word: str) -> None:
    length = max(1, width + offset - len(PROMPT) - len("echo ") - len(word) - 1)
    command = f"echo {word} {'y' * length}"
    keys = ["echo before\r", *command, "\r", "echo after\r"]
    check(
        record(BASH, keys, tmp_path / "gen.cast", width=width, quiet_s=0.03),
        ["echo before", command, "echo after"],
    )
