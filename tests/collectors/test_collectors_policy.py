"""The openai policy against the fake OpenAI-compatible server (real HTTP, the real openai client):
malformed tool calls are recorded, never fatal; rollouts sample distinct answers; long conversations
are trimmed and say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.collection import CollectConfig, collect
from schemas import Trajectory, TrajectoryStatus, iter_trajectories
from tests.helpers.fakellm import FakeReply, FakeToolCall

pytestmark = pytest.mark.engine


def run(tmp_path: Path, fake_llm, **config: object) -> list[Trajectory]:  # type: ignore[no-untyped-def]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t", "instruction": "work"}) + "\n")
    out = tmp_path / "out"
    collect(
        CollectConfig(
            env="terminal", tasks_path=tasks, policy="openai", out=out, llm_config=fake_llm.config(), **config
        )  # type: ignore[arg-type]
    )
    return sorted(iter_trajectories(out), key=lambda t: int(t.metadata.get("rollout", 0)))


def test_malformed_tool_calls_are_recorded_with_the_environments_error(tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    fake_llm.script(
        FakeReply(tool_calls=[FakeToolCall("run_command", '{"command": "echo repaired-ok"')]),  # missing }
        FakeReply(tool_calls=[FakeToolCall("run_command", '["echo", "list"]')]),
        FakeReply(
            tool_calls=[
                FakeToolCall("send_keystrokes", {"keystrokes": [{"keystrokes": "ls\n", "duration": None}]})
            ]
        ),
        FakeReply(
            tool_calls=[
                FakeToolCall("run_command", {"command": "echo first"}, id="call_a"),
                FakeToolCall("run_command", {"command": "echo second"}, id="call_b"),
            ]
        ),
        FakeReply(tool_calls=[FakeToolCall("no_such_tool", {})]),
        FakeReply(text="done"),
    )
    (trajectory,) = run(tmp_path, fake_llm)
    assert trajectory.status == TrajectoryStatus.COMPLETE, trajectory.status_reason
    turns = trajectory.turns
    assert len(turns) == 5
    repaired = turns[0]
    assert "repaired-ok\n" in repaired.observation.text
    assert repaired.metadata["policy"] == {
        "raw_arguments": '{"command": "echo repaired-ok"',
        "repaired": True,
    }
    assert turns[1].observation.is_error
    assert "an object 'arguments', got arguments of type list" in turns[1].observation.text
    assert '["echo", "list"]' in turns[1].action.text  # the raw arguments are the recorded action
    assert (
        turns[2].observation.is_error
        and "duration: None is not of type 'number'" in turns[2].observation.text
    )
    assert "first\n" in turns[3].observation.text and "second" not in turns[3].observation.text.replace(
        "echo second", ""
    )
    assert turns[3].metadata["policy"]["ignored_parallel_calls"] == [
        {"name": "run_command", "arguments": json.dumps({"command": "echo second"})}
    ]
    assert turns[4].metadata["out_of_action_space"] is True
    # Every tool call of the model got an answer in the conversation it saw next.
    fifth = fake_llm.requests[4].messages
    answered = {m["tool_call_id"] for m in fifth if m["role"] == "tool"}
    assert {"call_a", "call_b"} <= answered


def test_rollouts_use_distinct_sample_indices(tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    fake_llm.script(FakeReply(text="one"), FakeReply(text="two"), FakeReply(text="three"))
    trajectories = run(tmp_path, fake_llm, rollouts=3, temperature=0.7)
    assert [t.metadata.get("rollout", 0) for t in trajectories] == [0, 1, 2]
    assert len({t.id for t in trajectories}) == 3
    assert len(fake_llm.requests) == 3  # none answered from the cache of another rollout
    assert {r.body["temperature"] for r in fake_llm.requests} == {0.7}


def test_context_management_drops_old_turns_and_records_it(tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    big = "python3 -c \"print('x' * 3000)\""
    fake_llm.script(
        *[FakeReply(tool_calls=[FakeToolCall("run_command", {"command": big})]) for _ in range(4)]
    )
    fake_llm.script(FakeReply(text="done"))
    (trajectory,) = run(tmp_path, fake_llm, context_tokens=2500)
    assert trajectory.status == TrajectoryStatus.COMPLETE
    dropped = [t.metadata.get("policy", {}).get("context_dropped_turns", 0) for t in trajectory.turns]
    assert sum(dropped) > 0
    last = fake_llm.requests[-1].messages
    assert any("earlier turn(s) were dropped to fit the context" in str(m.get("content")) for m in last)
    assert len(last) < 2 + 2 * 4  # system, task, and four answered calls without trimming
