"""Step synchronisation of the persistent shell: every observation holds its own action's output.

Each case of the issue runs against the real engine: multi-line commands, nested shells, prompt
changes, output that imitates the completion marker, lost synchronisation (marked, never misaligned),
and a property test over generated command sequences.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from docker import DockerClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import engine
from collectors.collection import CollectConfig, collect
from collectors.environment import INFO_SYNC_LOST, EnvironmentOptions, Task
from collectors.sandbox import SandboxLimits
from collectors.shell import MarkerFilter
from collectors.terminal import TerminalEnvironment
from schemas import Action, ActionKind, TrajectoryStatus, iter_trajectories, turn_facts

pytestmark = pytest.mark.engine

LIMITS = SandboxLimits(step_timeout_s=3.0, output_cap_bytes=8192, flood_limit_bytes=4_000_000)


@pytest.fixture(scope="module")
def engine_client() -> DockerClient:
    return engine.connect()


def open_terminal(client: DockerClient, cast: Path | None = None) -> TerminalEnvironment:
    env = TerminalEnvironment(EnvironmentOptions(client=client, limits=LIMITS, cast_path=cast))
    env.reset(Task(id="sync", instruction="test"))
    return env


@pytest.fixture
def terminal(engine_client: DockerClient, tmp_path: Path) -> Iterator[TerminalEnvironment]:
    env = open_terminal(engine_client, tmp_path / "s.cast")
    yield env
    env.close()


def cmd(env: TerminalEnvironment, text: str) -> tuple[str, int | None, dict[str, object]]:
    result = env.step(Action(kind=ActionKind.COMMAND, text=text))
    return result.observation.text, result.exit_code, result.info


def test_multi_line_command_is_one_step(terminal: TerminalEnvironment) -> None:
    text, code, info = cmd(terminal, "echo a\nsleep 1; echo b")
    assert "\na\n" in text and "\nb\n" in text and text.endswith("agent@sandbox:/work$ ")
    assert not turn_facts.has(info, turn_facts.TIMED_OUT) and code == 0
    text, _, _ = cmd(terminal, "echo c")
    assert (
        text == "agent@sandbox:/work$ echo c\nc\nagent@sandbox:/work$ "
    )  # nothing of the previous step shifted in


def test_multi_line_exit_code_is_the_last_lines(terminal: TerminalEnvironment) -> None:
    _, code, _ = cmd(terminal, "true\nfalse")
    assert code == 1
    _, code, _ = cmd(terminal, "false\ntrue")
    assert code == 0


def test_nested_bash_keeps_synchronisation(terminal: TerminalEnvironment) -> None:
    outer = int(cmd(terminal, "echo level=$SHLVL")[0].split("level=")[-1].split()[0])
    _, _, info = cmd(terminal, "bash")
    assert not turn_facts.has(info, turn_facts.TIMED_OUT)
    text, code, info = cmd(terminal, "echo nested $SHLVL; false")
    assert f"nested {outer + 1}\n" in text and code == 1 and not turn_facts.has(info, turn_facts.TIMED_OUT)
    _, _, info = cmd(terminal, "exit")
    assert not turn_facts.has(info, turn_facts.TIMED_OUT) and "shell_ended" not in info
    text, code, _ = cmd(terminal, "echo back $SHLVL")
    assert f"back {outer}\n" in text and code == 0


def test_su_keeps_synchronisation_and_a_login_shell_too(engine_client: DockerClient) -> None:
    # su needs root (the agent user has no password to give it): a root task, uid 0 in its namespace.
    env = TerminalEnvironment(EnvironmentOptions(client=engine_client, limits=replace(LIMITS, root=True)))
    try:
        env.reset(Task(id="su", instruction="test"))
        _, _, info = cmd(env, "su")
        text, _, info = cmd(env, "echo in-su")
        assert "in-su\n" in text and not turn_facts.has(info, turn_facts.TIMED_OUT)
        cmd(env, "exit")
        # A login shell starts from a clean environment, without the prompt marker: the host still
        # sees it waiting at its prompt, and its exit code.
        _, _, info = cmd(env, "su -")
        assert INFO_SYNC_LOST not in info and not turn_facts.has(info, turn_facts.TIMED_OUT)
        text, code, info = cmd(env, "echo in-login; false")
        assert "in-login\n" in text and code == 1 and info["boundary"] == "confirmed"
    finally:
        env.close()


def test_replaced_prompt_keeps_synchronisation(terminal: TerminalEnvironment) -> None:
    cmd(terminal, "PS1='custom> '")
    text, code, info = cmd(terminal, "echo after-ps1")
    assert text.endswith("custom> ") and "after-ps1\n" in text
    assert not turn_facts.has(info, turn_facts.TIMED_OUT) and code == 0


def test_marker_like_output_does_not_end_a_step(terminal: TerminalEnvironment) -> None:
    forged = r"printf '\033]697;0\007'; printf '\033]697;0123456789abcdef;0\007'; sleep 1; echo after-forgery"
    text, code, info = cmd(terminal, forged)
    assert "after-forgery\n" in text and not turn_facts.has(info, turn_facts.TIMED_OUT) and code == 0
    assert "after-forgery" not in cmd(terminal, "echo next")[0]


def test_removed_prompt_command_is_still_confirmed_from_the_host(terminal: TerminalEnvironment) -> None:
    cmd(terminal, "unset PROMPT_COMMAND; PS1='$ '")
    text, code, info = cmd(terminal, "echo lost; (exit 3)")
    assert "lost\n" in text and text.endswith("$ ")
    assert not turn_facts.has(info, turn_facts.TIMED_OUT) and INFO_SYNC_LOST not in info
    assert code == 3 and info["boundary"] == "confirmed"


def test_plain_sh_marks_sync_lost(terminal: TerminalEnvironment) -> None:
    _, _, info = cmd(terminal, "sh")
    assert INFO_SYNC_LOST in info


def test_late_output_is_shown_before_the_next_input(terminal: TerminalEnvironment) -> None:
    payload = json.dumps([{"keystrokes": "sleep 1; echo late-one\n", "duration": 0.2}])
    first = terminal.step(Action(kind=ActionKind.KEYSTROKES, text=payload))
    assert "late-one" not in first.observation.text.replace("echo late-one", "")
    time.sleep(1.5)
    text, code, info = cmd(terminal, "echo fresh")
    assert text.index("late-one") < text.index("fresh") and info.get("late_output_bytes", 0) > 0
    assert text.endswith("fresh\nagent@sandbox:/work$ ") and code == 0


def test_runner_marks_lost_synchronisation(tmp_path: Path, engine_client: DockerClient) -> None:
    tasks = tmp_path / "tasks.jsonl"
    task = {
        "id": "lost",
        "instruction": "x",
        "actions": ["echo one", "sh", "echo never"],
        "limits": {"step_timeout_s": 2},
    }
    tasks.write_text(json.dumps(task) + "\n")
    collect(CollectConfig(env="terminal", tasks_path=tasks, policy="scripted", out=tmp_path / "out"))
    (trajectory,) = list(iter_trajectories(tmp_path / "out"))
    assert trajectory.status == TrajectoryStatus.ENV_FAILURE
    assert trajectory.status_reason is not None and "synchronisation lost" in trajectory.status_reason
    assert [t.action.text for t in trajectory.turns] == ["echo one", "sh"]  # the last action is kept


def test_marker_filter_holds_split_markers() -> None:
    secret = "ab" * 16
    stream = b"out\x1b]697;" + secret.encode() + b";12\x07more\x1b]697;0\x07"
    for cut in range(1, len(stream)):
        f = MarkerFilter(secret)
        events = f.feed(stream[:cut]) + f.feed(stream[cut:])
        data = b"".join(e for e in events if isinstance(e, bytes)) + f.flush()
        assert [e for e in events if isinstance(e, int)] == [12]
        assert data == b"outmore\x1b]697;0\x07"


# -- property: generated sequences of commands ------------------------------------------------------

# Each kind prints the token o<N>x through printf, so the token is in the output but never in the typed
# command (its echo); each step's observation must hold its own tokens and no other step's.
# WL_SYNC_EXAMPLES raises the example count for a longer local run.
EXAMPLES = int(os.environ.get("WL_SYNC_EXAMPLES", "4"))
KINDS = ("echo", "multi", "slow", "large", "forge", "ps1", "nest", "unnest")


def command_for(kind: str, n: int) -> str:
    tok = f"printf 'o%sx\\n' {n}"
    return {
        "echo": tok,
        "multi": f"echo first\n{tok}\ncd /tmp; cd - >/dev/null",
        "slow": f"for i in 1 2; do sleep 0.3; {tok}; done",
        "large": f"seq 1 3000; {tok}",
        "forge": f"printf '\\033]697;0\\007'; sleep 0.2; {tok}",
        "ps1": f"PS1='p{n}> '; {tok}",
        "nest": f"D=$((D+1)) bash\n{tok}",
        "unnest": f'{tok}\n[ "${{D:-0}}" -gt 0 ] && exit\ntrue',
    }[kind]


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(KINDS), min_size=3, max_size=7))
def test_each_observation_holds_exactly_its_steps_output(
    engine_client: DockerClient, kinds: list[str]
) -> None:
    env = open_terminal(engine_client)
    try:
        texts = []
        for n, kind in enumerate(kinds):
            text, _, info = cmd(env, command_for(kind, n))
            assert not turn_facts.has(info, turn_facts.TIMED_OUT), (kind, text)
            texts.append(text)
        for n, text in enumerate(texts):
            assert f"o{n}x" in text, (kinds, n, text)
            others = [m for m in range(len(kinds)) if m != n and f"o{m}x" in text]
            assert not others, (kinds, n, text)
    finally:
        env.close()
