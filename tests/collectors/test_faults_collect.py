"""Honest outcomes in collection: a status says what happened, infrastructure that is missing or down
(no Android device, the LLM endpoint, a spent budget) is retried by --resume instead of recorded as the
task's outcome, task files are checked up front, a bad action is an error turn, and LLM use is counted."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from collectors.collection import CollectConfig, collect, is_final
from collectors.environment import TaskError, load_tasks
from schemas import TrajectoryStatus, iter_trajectories, read_manifest, stable_id
from tests.helpers.fakellm import FakeReply, FakeToolCall, last_user_message
from tests.helpers.sandboxes import track_sandboxes
from worldline.cli import app

pytestmark = pytest.mark.engine


def write_tasks(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def by_task(folder: Path) -> dict[str, Any]:
    return {str(t.metadata["task_id"]): t for t in iter_trajectories(folder)} if read_manifest(folder) else {}


def canonical_id(tasks: Path, task_id: str, env: str = "terminal") -> str:
    return stable_id(f"worldline-collect/{env}", tasks.name, task_id)


def run_command_then_finish(request: dict[str, Any]) -> FakeReply:
    """The fake agent: one run_command per task (its echo names the task), then a final answer."""
    if any(m.get("role") == "tool" for m in request.get("messages", [])):
        return FakeReply(text="Done.")
    task = last_user_message(request)
    return FakeReply(text="", tool_calls=[FakeToolCall("run_command", {"command": f"echo {len(task)}"})])


def test_an_agent_that_never_acts_has_not_completed(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.set_default(lambda request: FakeReply(text="Nothing to do here."))
    tasks = write_tasks(tmp_path / "t.jsonl", [{"id": "idle", "instruction": "count the files"}])
    collect(
        CollectConfig(
            env="terminal",
            tasks_path=tasks,
            policy="openai",
            out=tmp_path / "out",
            llm_config=fake_llm.config(),
        )
    )
    (trajectory,) = iter_trajectories(tmp_path / "out")
    assert trajectory.turns == []
    assert trajectory.status == TrajectoryStatus.POLICY_ERROR
    assert "before any action" in (trajectory.status_reason or "")
    assert "Nothing to do here." in (trajectory.status_reason or "")
    assert trajectory.metadata["llm_usage"]["calls"] == 1


def test_llm_outage_is_retried_by_resume_with_the_same_ids(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.set_default(lambda request: FakeReply.server_error(503))
    tasks = write_tasks(tmp_path / "t.jsonl", [{"id": f"o{i}", "instruction": f"task {i}"} for i in range(2)])
    out = tmp_path / "out"
    config = CollectConfig(
        env="terminal", tasks_path=tasks, policy="openai", out=out, llm_config=fake_llm.config(max_retries=1)
    )
    collect(config)
    attempts = list(iter_trajectories(out / "attempts"))
    assert by_task(out) == {}  # nothing final: the endpoint failed, not the tasks
    assert sorted(t.metadata["task_id"] for t in attempts) == ["o0", "o1"]
    for t in attempts:
        assert t.status == TrajectoryStatus.POLICY_ERROR and t.metadata["retryable"] is True
        assert not is_final(t)
        assert t.metadata["llm_usage"]["requests"] == 2  # the first attempt and its one retry
    fake_llm.set_default(run_command_then_finish)
    summary = collect(CollectConfig(**{**config.__dict__, "resume": True}))
    assert summary.skipped == 0 and summary.by_status == Counter({"complete": 2})
    final = by_task(out)
    assert {k: t.id for k, t in final.items()} == {k: canonical_id(tasks, k) for k in ("o0", "o1")}
    assert all(t.status == TrajectoryStatus.COMPLETE for t in final.values())


def test_spent_budget_stops_the_run_before_the_next_sandbox(
    tmp_path: Path, fake_llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = track_sandboxes(monkeypatch)
    fake_llm.set_default(run_command_then_finish)
    tasks = write_tasks(tmp_path / "t.jsonl", [{"id": f"b{i}", "instruction": f"task {i}"} for i in range(4)])
    out = tmp_path / "out"
    # Two calls per task: the third call starts task b1, the fourth is refused before it is sent.
    config = CollectConfig(
        env="terminal", tasks_path=tasks, policy="openai", out=out, llm_config=fake_llm.config(max_calls=3)
    )
    summary = collect(config)
    assert summary.stopped and "budget" in summary.stopped
    assert len(created) == 2  # b2 and b3 got no sandbox
    assert summary.not_started == 2
    assert len(fake_llm.requests) == 3  # a refused call is never sent
    assert by_task(out)["b0"].status == TrajectoryStatus.COMPLETE
    (cut,) = iter_trajectories(out / "attempts")
    assert cut.metadata["task_id"] == "b1" and cut.metadata["retryable"] is True
    assert "budget exhausted" in (cut.status_reason or "") and len(cut.turns) == 1
    # The run summary and each trajectory count what was sent, once.
    assert summary.llm_usage is not None and summary.llm_usage["totals"]["calls"] == 3
    assert by_task(out)["b0"].metadata["llm_usage"]["calls"] == 2
    assert cut.metadata["llm_usage"]["calls"] == 1

    resumed = collect(
        CollectConfig(**{**config.__dict__, "resume": True, "llm_config": fake_llm.config(max_calls=20)})
    )
    assert resumed.stopped is None and resumed.skipped == 1
    final = by_task(out)
    assert sorted(final) == ["b0", "b1", "b2", "b3"]
    assert all(t.status == TrajectoryStatus.COMPLETE for t in final.values())
    assert final["b1"].id == canonical_id(tasks, "b1")

    result = CliRunner().invoke(
        app,
        [
            "collect",
            "--env",
            "terminal",
            "--tasks",
            str(tasks),
            "--policy",
            "openai",
            "--out",
            str(tmp_path / "o2"),
        ]
        + ["--no-progress"],
        env={
            "WORLDLINE_LLM_BASE_URL": fake_llm.base_url,
            "WORLDLINE_LLM_API_KEY": "k",
            "WORLDLINE_LLM_MODEL": "fake-model",
            "WORLDLINE_LLM_MAX_CALLS": "1",
            "WORLDLINE_LLM_CACHE": "off",
        },
    )
    assert result.exit_code == 1, result.output
    assert "stopped:" in result.output and "budget" in result.output and "Traceback" not in result.output
    assert "LLM usage: 1 calls" in result.output


def test_usage_counts_retries_once_per_request(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.script(
        FakeReply.server_error(500),
        FakeReply(text="", tool_calls=[FakeToolCall("run_command", {"command": "echo hi"})]),
        FakeReply(text="Done.", prompt_tokens=70, completion_tokens=3),
    )
    tasks = write_tasks(tmp_path / "t.jsonl", [{"id": "u", "instruction": "say hi"}])
    summary = collect(
        CollectConfig(
            env="terminal",
            tasks_path=tasks,
            policy="openai",
            out=tmp_path / "out",
            llm_config=fake_llm.config(),
        )
    )
    (trajectory,) = iter_trajectories(tmp_path / "out")
    usage = trajectory.metadata["llm_usage"]
    assert usage["calls"] == 2 and usage["requests"] == len(fake_llm.requests) == 3
    assert usage["completion_tokens"] >= 3 and usage["prompt_tokens"] >= 70
    assert summary.llm_usage is not None
    assert summary.llm_usage["totals"]["calls"] == 2 and summary.llm_usage["totals"]["retries"] == 1


def test_task_files_are_checked_up_front_with_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "t.jsonl"
    bad.write_text(
        json.dumps({"id": "fine", "instruction": "x", "actions": ["ls"]})
        + "\n\n"
        + json.dumps({"id": "bad", "instruction": "x", "actions": ["ls", 42]})
        + "\n"
    )
    with pytest.raises(
        TaskError, match=r"t\.jsonl:3 \(id bad\): field 'actions\[1\]': cannot read action 42"
    ):
        load_tasks(bad)
    nameless = write_tasks(
        tmp_path / "n.jsonl", [{"id": "n", "instruction": "x", "actions": [{"name": 7, "arguments": {}}]}]
    )
    with pytest.raises(TaskError, match=r"n\.jsonl:1 \(id n\): field 'actions\[0\]': .*'name'"):
        load_tasks(nameless)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["collect", "--env", "terminal", "--tasks", str(bad), "--out", str(out), "--no-progress"]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "t.jsonl:3 (id bad): field 'actions[1]'" in " ".join(result.output.split())
    assert not out.exists()  # refused before anything was created


def test_a_bad_action_in_a_running_episode_is_an_error_turn(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        [
            {
                "id": "mixed",
                "instruction": "x",
                "actions": [
                    "echo one",
                    {"name": "run_command", "arguments": ["echo", "two"]},  # not an object
                    {"name": "no_such_tool", "arguments": {}},
                    [{"keystrokes": 5}],  # keystrokes that are not text
                    "echo three",
                ],
            }
        ],
    )
    collect(CollectConfig(env="terminal", tasks_path=tasks, policy="scripted", out=tmp_path / "out"))
    (trajectory,) = iter_trajectories(tmp_path / "out")
    assert trajectory.status == TrajectoryStatus.COMPLETE
    assert len(trajectory.turns) == 5
    errors = [bool(t.observation.is_error) for t in trajectory.turns]
    assert errors == [False, True, True, True, False]
    assert "object 'arguments'" in trajectory.turns[1].observation.text
    assert "three" in trajectory.turns[4].observation.text


def test_android_without_a_device_is_retryable(tmp_path: Path) -> None:
    """The real uiautomator2 connection, with no device or adb server on this machine."""
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        [{"id": "a", "instruction": "x", "android": {"serial": "emulator-5554"}, "actions": ["back()"]}],
    )
    out = tmp_path / "out"
    collect(CollectConfig(env="android", tasks_path=tasks, policy="scripted", out=out))
    assert by_task(out) == {}
    (attempt,) = iter_trajectories(out / "attempts")
    assert attempt.status == TrajectoryStatus.ENV_FAILURE and attempt.metadata["retryable"] is True
    assert "no Android device" in (attempt.status_reason or "")
    assert not is_final(attempt)
