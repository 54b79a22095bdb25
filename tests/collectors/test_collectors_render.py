"""Observations are what the terminal shows: one emulator, the task's width, the full recording."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from docker import DockerClient
from hypothesis import given
from hypothesis import strategies as st

from collectors import engine
from collectors.environment import EnvironmentOptions, Task
from collectors.recording import screen_text
from collectors.sandbox import SandboxLimits
from collectors.terminal import TerminalEnvironment
from schemas import Action, ActionKind, turn_facts


def test_cursor_movement_and_absolute_columns() -> None:
    assert screen_text(b"one\r\ntwo\r\n\x1b[1Aeins\r\n", 20) == "one\neins\n"
    assert screen_text(b"\x1b[5Gcol\r\n", 20) == "    col\n"
    assert screen_text(b"12345\x08\x08\x1b[K!", 20) == "123!"
    assert screen_text(b"\x1b[31mred\x1b[0m ok\r\n", 20) == "red ok\n"
    assert screen_text(b"50%\r100%\r\n", 20) == "100%\n"


def test_wrapping_at_the_width_and_prompt_prefix() -> None:
    assert screen_text(b"x" * 45 + b"\r\n$ ", 20, prefix="$ ") == "x" * 18 + "\n" + "x" * 20 + "\nxxxxxxx\n$ "


@given(st.lists(st.text(alphabet="abcdefgh XYZ", min_size=0, max_size=50), max_size=30), st.integers(10, 80))
def test_plain_lines_come_back_wrapped_at_the_width(lines: list[str], cols: int) -> None:
    data = "".join(line + "\r\n" for line in lines).encode()
    expected: list[str] = []
    for line in lines:
        chunks = [line[i : i + cols] for i in range(0, len(line), cols)] or [""]
        expected += [c.rstrip() for c in chunks]
    assert screen_text(data, cols) == "\n".join([*expected, ""])


@pytest.mark.engine
def test_terminal_width_of_the_task_and_full_recording(tmp_path: Path) -> None:
    client: DockerClient = engine.connect()
    cast = tmp_path / "s.cast"
    limits = SandboxLimits(output_cap_bytes=4096)
    env = TerminalEnvironment(EnvironmentOptions(client=client, limits=limits, cast_path=cast))
    with env:
        env.reset(Task(id="w", instruction="x"))
        text = env.step(
            Action(kind=ActionKind.COMMAND, text="printf 'y%.0s' $(seq 1 200); echo")
        ).observation.text
        assert "\n" + "y" * 160 + "\n" + "y" * 40 + "\n" in text  # wrapped at the 160-column terminal
        text = env.step(
            Action(kind=ActionKind.COMMAND, text="printf 'a\\nb\\n\\033[1Ac\\n'")
        ).observation.text
        assert "\na\nc\n" in text
        step = env.step(Action(kind=ActionKind.COMMAND, text="seq 1 30000"))
        text, info = step.observation.text, step.info
        assert "15000\n" not in text and turn_facts.has(info, turn_facts.TRUNCATED)
        keys = [{"keystrokes": "seq 1 100 | less\n", "duration": 1.0}]
        screen = env.step(Action(kind=ActionKind.KEYSTROKES, text=json.dumps(keys))).observation.text
        assert screen.startswith("1\n2\n") and "seq 1 100" not in screen  # the pager's screen
        env.step(Action(kind=ActionKind.KEYSTROKES, text=json.dumps([{"keystrokes": "q", "duration": 0.5}])))
    events = [json.loads(line) for line in cast.read_text().splitlines()[1:]]
    output = "".join(e[2] for e in events if e[1] == "o")
    assert "\r\n15000\r\n" in output  # the cap applies to the observation, the recording keeps every byte
    assert "\x1b]697" not in output


@pytest.mark.engine
def test_the_prompt_before_a_step_places_its_first_line_and_leaving_a_pager_shows_the_prompt() -> None:
    client: DockerClient = engine.connect()
    env = TerminalEnvironment(EnvironmentOptions(client=client))
    with env:
        env.reset(Task(id="p", instruction="x"))
        # The prompt changes with the directory: the echoed command wraps where it did on screen,
        # after the prompt it was typed at (`agent@sandbox:/work$ `, 21 columns), not after the longer
        # prompt that follows.
        command = "mkdir -p /work/a-longer-directory && cd /work/a-longer-directory && echo " + "x" * 120
        lines = env.step(Action(kind=ActionKind.COMMAND, text=command)).observation.text.split("\n")
        assert lines[:2] == ["agent@sandbox:/work$ " + command[:139], command[139:]]
        assert lines[-1] == "agent@sandbox:/work/a-longer-directory$ "
        keys = [{"keystrokes": "seq 1 100 | less\n", "duration": 1.0}]
        env.step(Action(kind=ActionKind.KEYSTROKES, text=json.dumps(keys)))
        quit_keys = [{"keystrokes": "q", "duration": 0.5}]
        text = env.step(Action(kind=ActionKind.KEYSTROKES, text=json.dumps(quit_keys))).observation.text
        assert text.endswith("agent@sandbox:/work/a-longer-directory$ ")  # back at the shell, as a user sees
