"""The collection runner end to end: scripted and openai policies, failures, resume after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from docker import DockerClient
from typer.testing import CliRunner

from collectors import engine
from collectors.collection import CollectConfig, CollectError, collect
from collectors.sandbox import SandboxLimits
from schemas import TrajectoryStatus, iter_trajectories, read_manifest
from tests.helpers.fakellm import FakeReply, FakeToolCall
from tests.helpers.sandboxes import owned_by, private_host, still_present, track_sandboxes
from worldline.cli import app

pytestmark = pytest.mark.engine
TASKS_DIR = Path(__file__).resolve().parents[2] / "collectors" / "tasks"


@pytest.fixture(scope="session")
def engine_client() -> DockerClient:
    return engine.connect()


def write_tasks(path: Path, tasks: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def test_scripted_terminal_and_swe_examples(
    tmp_path: Path, engine_client: DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = track_sandboxes(monkeypatch)
    n_tasks = 0
    for env, name in (("terminal", "terminal_examples.jsonl"), ("swe", "swe_examples.jsonl")):
        out = tmp_path / env
        result = CliRunner().invoke(
            app,
            [
                "collect",
                "--env",
                env,
                "--tasks",
                str(TASKS_DIR / name),
                "--out",
                str(out),
                "-j",
                "2",
                "--no-progress",
            ],
        )
        assert result.exit_code == 0, result.output
        trajectories = list(iter_trajectories(out))
        tasks = [json.loads(line) for line in (TASKS_DIR / name).read_text().splitlines()]
        n_tasks += len(tasks)
        assert sorted(t.metadata["task_id"] for t in trajectories) == sorted(t["id"] for t in tasks)
        for trajectory in trajectories:
            assert trajectory.status == TrajectoryStatus.COMPLETE
            assert trajectory.initial_state and "Installed packages" in trajectory.initial_state
            assert (out / trajectory.metadata["asciicast"]).is_file()
            assert len(trajectory.turns) == len(
                next(t for t in tasks if t["id"] == trajectory.metadata["task_id"])["actions"]
            )
    swe = {t.metadata["task_id"]: t for t in iter_trajectories(tmp_path / "swe")}
    assert swe["swe-add-function"].metadata["out_of_action_space_calls"] == 1
    assert swe["swe-fix-mean"].turns[-2].observation.text == "OK"
    # One sandbox per task, and every one of them is gone.
    assert len(created) == n_tasks
    assert still_present(engine_client, created) == []


def test_failures_become_trajectories_with_reasons(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        [
            {"id": "setup-fails", "instruction": "x", "setup": ["exit 7"], "actions": ["true"]},
            {"id": "too-long", "instruction": "x", "actions": ["echo 1", "echo 2", "echo 3"], "max_turns": 2},
            {"id": "no-actions", "instruction": "x", "actions": []},
        ],
    )
    collect(CollectConfig(env="terminal", tasks_path=tasks, policy="scripted", out=tmp_path / "out"))
    by_task = {t.metadata["task_id"]: t for t in iter_trajectories(tmp_path / "out")}
    assert by_task["setup-fails"].status == TrajectoryStatus.ENV_FAILURE
    assert "setup command 'exit 7' exited 7" in (by_task["setup-fails"].status_reason or "")
    assert by_task["too-long"].status == TrajectoryStatus.TRUNCATED
    assert (
        by_task["too-long"].status_reason == "max_turns reached (2)" and len(by_task["too-long"].turns) == 2
    )
    assert by_task["no-actions"].status == TrajectoryStatus.POLICY_ERROR


def test_engine_down_is_a_clear_error_before_any_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLDLINE_DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    tasks = TASKS_DIR / "terminal_examples.jsonl"
    with pytest.raises(CollectError, match="no container engine answers.*infra/engine.sh start"):
        collect(CollectConfig(env="terminal", tasks_path=tasks, policy="scripted", out=tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    result = CliRunner().invoke(
        app,
        [
            "collect",
            "--env",
            "terminal",
            "--tasks",
            str(tasks),
            "--out",
            str(tmp_path / "o"),
            "--no-progress",
        ],
    )
    assert result.exit_code == 2 and "no container engine answers" in result.output


def test_openai_policy_against_local_server(tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    fake_llm.script(
        FakeReply(text="", tool_calls=[FakeToolCall("Read", {"path": "calc/ops.py"})]),
        FakeReply(
            text="",
            tool_calls=[
                FakeToolCall(
                    "Edit",
                    {"path": "calc/ops.py", "old_string": "len(values) - 1", "new_string": "len(values)"},
                )
            ],
        ),
        FakeReply(
            text="", tool_calls=[FakeToolCall("Bash", {"command": "python3 -m unittest -q 2>&1 | tail -n 1"})]
        ),
        FakeReply(text="Fixed: mean no longer subtracts one."),
    )
    task = json.loads((TASKS_DIR / "swe_examples.jsonl").read_text().splitlines()[0])
    task.pop("actions")
    tasks = write_tasks(tmp_path / "t.jsonl", [task])
    config = CollectConfig(
        env="swe", tasks_path=tasks, policy="openai", out=tmp_path / "out", llm_config=fake_llm.config()
    )
    collect(config)
    (trajectory,) = list(iter_trajectories(tmp_path / "out"))
    assert trajectory.status == TrajectoryStatus.COMPLETE
    assert [t.action.tool_name for t in trajectory.turns] == ["Read", "Edit", "Bash"]
    assert trajectory.turns[-1].observation.text == "OK"
    assert trajectory.source.agent == "openai" and trajectory.source.model
    # The policy saw only observations: the second request carries the Read result as a tool message.
    second = fake_llm.requests[1].messages
    assert second[-1]["role"] == "tool" and "def mean(values):" in second[-1]["content"]
    assert {t["function"]["name"] for t in fake_llm.requests[0].body["tools"]} == {"Read", "Edit", "Bash"}


@pytest.mark.slow
def test_resume_after_kill_9_gives_every_task_exactly_once(
    tmp_path: Path, engine_client: DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_this_host = private_host(monkeypatch)  # the orphans are this test's to reap, and no one else's
    task_ids = [f"t{i:02d}" for i in range(10)]
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        [{"id": tid, "instruction": "wait", "actions": ["sleep 0.6", f"echo {tid}"]} for tid in task_ids],
    )
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "worldline.cli", "collect", "--env", "terminal", "--tasks", str(tasks)]
    argv += ["--out", str(out), "-j", "2", "--flush-every", "1", "--no-progress"]
    runner = subprocess.Popen(
        [sys.executable, "-c", f"{as_this_host}from worldline.cli import main; main()", *argv[3:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        manifest = read_manifest(out) if (out / "manifest.json").exists() else None
        # Kill it while it holds a sandbox, so there is something for the resumed run to reap.
        if manifest is not None and manifest.rows >= 3 and owned_by(engine_client, runner.pid):
            break
        time.sleep(0.05)
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait()
    orphans = owned_by(engine_client, runner.pid)
    assert orphans, "the killed runner held no sandbox"
    before = {t.metadata["task_id"] for t in iter_trajectories(out)}
    assert 3 <= len(before) < len(task_ids)
    summary = collect(
        CollectConfig(
            env="terminal", tasks_path=tasks, policy="scripted", out=out, resume=True, concurrency=2
        )
    )
    assert summary.skipped == len(before)
    counts = Counter(t.metadata["task_id"] for t in iter_trajectories(out))
    assert counts == Counter(task_ids)  # every task exactly once
    not_complete = [
        (t.metadata["task_id"], t.status.value, t.status_reason)
        for t in iter_trajectories(out)
        if t.status != TrajectoryStatus.COMPLETE
    ]
    assert not_complete == []
    # The killed runner's sandboxes were reaped by the resumed run.
    assert still_present(engine_client, orphans) == []
    # Resuming a finished dataset does nothing; without --resume it refuses to mix runs.
    assert (
        collect(
            CollectConfig(env="terminal", tasks_path=tasks, policy="scripted", out=out, resume=True)
        ).written
        == 0
    )
    with pytest.raises(CollectError, match="--resume"):
        collect(CollectConfig(env="terminal", tasks_path=tasks, policy="scripted", out=out))


def test_aborted_episodes_are_not_final(tmp_path: Path) -> None:
    from collectors.collection import is_final, recorded_outcomes
    from schemas import Source, SourceKind, Trajectory, write_trajectories

    def traj(task_id: str, status: TrajectoryStatus, **meta: object) -> Trajectory:
        return Trajectory(
            id=f"id-{task_id}-{status.value}",
            domain="terminal",
            source=Source(kind=SourceKind.INFRA, name="x"),
            task="t",
            status=status,
            metadata={"task_id": task_id, **meta},
        )

    records = [
        traj("a", TrajectoryStatus.COMPLETE),
        traj("b", TrajectoryStatus.ABORTED),
        traj("c", TrajectoryStatus.ENV_FAILURE, retryable=True),
        traj("d", TrajectoryStatus.ENV_FAILURE),
    ]
    write_trajectories(tmp_path, records)
    final, attempts = recorded_outcomes(tmp_path)
    assert final == {"a", "d"} and attempts["b"] == 1
    assert [is_final(t) for t in records] == [True, False, False, True]
    assert SandboxLimits().with_overrides({"pids": 10}).pids == 10
