"""Task files are checked when they are read: any JSON value in `actions` is either a readable action
or an error naming the file's line, the task and the field; a readable one never fails the scripted
policy, whatever its arguments (the environment answers those with an error turn)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from collectors.collection import CollectConfig, CollectError, collect
from collectors.environment import Task, TaskError, load_tasks
from collectors.policies import ScriptedPolicy
from schemas import ActionSpace, Observation
from worldline.cli import app

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
KEYS = st.sampled_from(["name", "tool", "arguments", "keystrokes", "duration", "action", "role"])
ACTION = JSON | st.dictionaries(KEYS, JSON, max_size=3)


@given(st.lists(ACTION, min_size=1, max_size=4), st.integers(min_value=0, max_value=3))
def test_every_action_is_readable_or_named_with_its_line(
    tmp_path_factory: pytest.TempPathFactory, actions: list[object], blank_lines: int
) -> None:
    folder = tmp_path_factory.mktemp("tasks")
    path = folder / "t.jsonl"
    line = json.dumps({"id": "g", "instruction": "x", "actions": actions})
    path.write_text("\n" * blank_lines + line + "\n")
    try:
        (task,) = load_tasks(path)
    except TaskError as exc:
        message = str(exc)
        assert message.startswith(f"{path}:{blank_lines + 1} (id g): field 'actions[")
        index = int(message.split("'actions[")[1].split("]")[0])
        assert 0 <= index < len(actions)
        return
    policy = ScriptedPolicy()
    policy.begin(task, ActionSpace(), Observation(text=""))
    replayed = [policy.next_action(None).action for _ in actions]
    assert all(a is not None for a in replayed)
    assert policy.next_action(None).action is None


def test_a_bad_task_file_creates_nothing_and_prints_one_line(tmp_path: Path) -> None:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"id": "a", "instruction": "x", "actions": [{"arguments": {}}]}) + "\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["collect", "--env", "terminal", "--tasks", str(tasks), "--out", str(out), "--no-progress"]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1, result.output
    assert "t.jsonl:1 (id a): field 'actions[0]'" in result.output and not out.exists()
    with pytest.raises(CollectError, match="unknown policy 'opnai'"):
        collect(CollectConfig(env="terminal", tasks_path=tasks, policy="opnai", out=out))
    assert not out.exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n# nothing\n")
    result = CliRunner().invoke(
        app, ["collect", "--env", "terminal", "--tasks", str(empty), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2 and "no tasks" in result.output and not (tmp_path / "o").exists()


def test_task_built_in_code_keeps_the_policy_error() -> None:
    task = Task(id="c", instruction="x", actions=[42])
    try:
        ScriptedPolicy().begin(task, ActionSpace(), Observation(text=""))
    except Exception as exc:  # the policy's own error names the task and the action
        assert "task c actions[0]" in str(exc)
    else:
        raise AssertionError("an unreadable action built in code was accepted")
