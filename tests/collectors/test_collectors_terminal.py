"""The persistent PTY shell and the terminal environment against the real container engine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker import DockerClient

from collectors import engine
from collectors.environment import EnvironmentOptions, Task
from collectors.recording import line_output_text
from collectors.sandbox import SandboxLimits
from collectors.terminal import TerminalEnvironment
from schemas import Action, ActionKind, turn_facts

pytestmark = pytest.mark.engine


@pytest.fixture(scope="session")
def engine_client() -> DockerClient:
    # No skip: CI provisions the engine with `make setup`, so its absence is a failure.
    return engine.connect()


@pytest.fixture
def terminal(engine_client: DockerClient, tmp_path: Path) -> Iterator[TerminalEnvironment]:
    env = TerminalEnvironment(
        EnvironmentOptions(
            client=engine_client,
            limits=SandboxLimits(step_timeout_s=2.0, output_cap_bytes=4096, flood_limit_bytes=2_000_000),
            cast_path=tmp_path / "session.cast",
        )
    )
    env.reset(Task(id="t", instruction="test"))
    yield env
    env.close()


def cmd(env: TerminalEnvironment, text: str) -> tuple[str, int | None, dict[str, object]]:
    result = env.step(Action(kind=ActionKind.COMMAND, text=text))
    return result.observation.text, result.exit_code, result.info


def keys(env: TerminalEnvironment, *items: tuple[str, float]) -> str:
    payload = json.dumps([{"keystrokes": k, "duration": d} for k, d in items])
    return env.step(Action(kind=ActionKind.KEYSTROKES, text=payload)).observation.text


def test_state_persists_across_turns(terminal: TerminalEnvironment) -> None:
    cmd(terminal, "mkdir -p proj && cd proj")
    cmd(terminal, 'export COLOR=teal; shout() { echo "${1^^}"; }')
    cmd(terminal, "sleep 60 &")
    text, code, _ = cmd(terminal, "pwd; echo $COLOR; shout quiet; jobs")
    assert "/work/proj\nteal\nQUIET\n[1]+  Running" in text
    assert text.endswith("agent@sandbox:/work/proj$ ")
    assert code == 0


def test_exit_code_and_prompt_in_observation(terminal: TerminalEnvironment) -> None:
    text, code, _ = cmd(terminal, "ls /nonexistent")
    assert text.startswith("agent@sandbox:/work$ ls /nonexistent\n")  # the row it was typed on
    assert "No such file or directory" in text
    assert code == 2


def test_python_repl_session(terminal: TerminalEnvironment) -> None:
    assert ">>> " in keys(terminal, ("python3\n", 1.5))
    assert "1267650600228229401496703205376\n>>> " in keys(terminal, ("2**100\n", 0.5))
    assert "KeyboardInterrupt" in keys(terminal, ("import time; time.sleep(30)\n", 0.3), ("C-c", 0.5))
    assert keys(terminal, ("exit()\n", 0.5)).endswith("agent@sandbox:/work$ ")


def test_ctrl_c_interrupts_foreground_command(terminal: TerminalEnvironment) -> None:
    text = keys(terminal, ("sleep 100\n", 0.3), ("C-c", 0.5))
    assert "^C" in text and text.endswith("$ ")
    assert "status=130" in cmd(terminal, "echo status=$?")[0]


def test_timeout_interrupts_and_says_so_in_metadata(terminal: TerminalEnvironment) -> None:
    text, code, info = cmd(terminal, "sleep 100")
    # The observation is what the screen showed (the ^C and the prompt); the timeout is a harness fact.
    assert text == "agent@sandbox:/work$ sleep 100\n^C\nagent@sandbox:/work$ "
    assert turn_facts.facts(info) == {turn_facts.TIMED_OUT: {"after_s": 2.0}}
    assert code == 130
    assert "alive" in cmd(terminal, "echo alive")[0]  # the shell is usable afterwards


def test_output_cap_keeps_whole_lines_and_says_so_in_metadata(terminal: TerminalEnvironment) -> None:
    text, code, info = cmd(terminal, "seq 1 50000")
    assert "[worldline" not in text and len(text) < 6000
    assert text.startswith("agent@sandbox:/work$ seq 1 50000\n1\n2\n")
    assert text.endswith("50000\nagent@sandbox:/work$ ")
    lines = text.split("\n")[1:-1]
    numbers = [int(line) for line in lines]  # every line is whole: no number cut in the middle
    head_end = next(i for i, (a, b) in enumerate(zip(numbers, numbers[1:], strict=False)) if b != a + 1)
    assert numbers[: head_end + 1] == list(range(1, head_end + 2))
    assert numbers[head_end + 1 :] == list(range(numbers[head_end + 1], 50001))
    truncated = turn_facts.facts(info)[turn_facts.TRUNCATED]
    total = sum(len(f"{i}\r\n") for i in range(1, 50001)) + len("seq 1 50000\r\n")
    assert truncated["bytes_total"] >= total and 0 < truncated["bytes_kept"] <= 4096
    assert code == 0


def test_output_flood_is_interrupted(terminal: TerminalEnvironment) -> None:
    text, _, info = cmd(terminal, "yes flood")
    assert turn_facts.facts(info)[turn_facts.OUTPUT_FLOOD] == {"limit_bytes": 2_000_000}
    assert "[worldline" not in text and text.endswith("agent@sandbox:/work$ ")
    assert "ok" in cmd(terminal, "echo ok")[0]


def test_tool_call_forms_and_unknown_tool(terminal: TerminalEnvironment) -> None:
    call = {"name": "run_command", "arguments": {"command": "echo via-tool"}}
    result = terminal.step(Action(kind=ActionKind.TOOL_CALL, text=json.dumps(call), tool_name="run_command"))
    assert result.action.kind == ActionKind.COMMAND and "via-tool\n" in result.observation.text
    bad = {"name": "open_browser", "arguments": {}}
    result = terminal.step(Action(kind=ActionKind.TOOL_CALL, text=json.dumps(bad), tool_name="open_browser"))
    assert result.info["out_of_action_space"] is True and result.observation.is_error


def test_asciicast_v2_written(engine_client: DockerClient, tmp_path: Path) -> None:
    cast = tmp_path / "rec.cast"
    env = TerminalEnvironment(EnvironmentOptions(client=engine_client, cast_path=cast))
    with env:
        env.reset(Task(id="cast", instruction="x"))
        env.step(Action(kind=ActionKind.COMMAND, text="echo recorded"))
    lines = cast.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 2 and header["width"] == 160 and header["height"] == 40
    events = [json.loads(line) for line in lines[1:]]
    assert any(e[1] == "i" and e[2] == "echo recorded\n" for e in events)
    output = "".join(e[2] for e in events if e[1] == "o")
    assert "recorded\r\n" in output and "\x1b]697" not in output
    assert all(a[0] <= b[0] for a, b in zip(events, events[1:], strict=False))


def test_initial_state_lists_packages_files_and_env(engine_client: DockerClient) -> None:
    env = TerminalEnvironment(EnvironmentOptions(client=engine_client))
    with env:
        reset = env.reset(Task(id="s", instruction="x", files={"data/in.txt": "1\n"}))
    assert reset.observation.text == "agent@sandbox:/work$ "
    state = reset.initial_state
    assert "Debian GNU/Linux 12" in state
    assert "\npython3 3.11" in state and "\ngit 1:2.39" in state
    assert "./data/in.txt" in state
    assert "PATH=/usr/local/sbin" in state


def test_render_line_output_applies_terminal_semantics() -> None:
    assert line_output_text(b"abc\rX\n") == "Xbc\n"
    assert line_output_text(b"\x1b[31mred\x1b[0m ok\r\n") == "red ok\n"
    assert line_output_text(b"12345\x08\x08\x1b[K!") == "123!"
    assert line_output_text(b"a\x1b]0;title\x07b") == "ab"
