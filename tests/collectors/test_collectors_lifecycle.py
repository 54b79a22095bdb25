"""Hangs, deadlines and ending turns: a task can end badly, but it ends, says why, and the run goes on."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from docker import DockerClient

from collectors import engine
from collectors.collection import CollectConfig, collect
from collectors.environment import INFO_EPISODE_END, EnvironmentOptions, Task
from collectors.sandbox import SandboxLimits
from collectors.terminal import TerminalEnvironment
from schemas import Action, ActionKind, Trajectory, TrajectoryStatus, iter_trajectories

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def engine_client() -> DockerClient:
    return engine.connect()


def run(tmp_path: Path, tasks: list[dict[str, object]], **config: object) -> dict[str, Trajectory]:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = tmp_path / "out"
    collect(CollectConfig(env="terminal", tasks_path=path, policy="scripted", out=out, **config))  # type: ignore[arg-type]
    return {str(t.metadata["task_id"]): t for t in iter_trajectories(out)}


def test_hangs_end_as_env_failure_and_the_run_continues(tmp_path: Path) -> None:
    got = run(
        tmp_path,
        [
            {
                "id": "setup-hang",
                "instruction": "x",
                "setup": ["sleep 100"],
                "actions": ["true"],
                "limits": {"helper_timeout_s": 2},
            },
            {
                "id": "deadline",
                "instruction": "x",
                "deadline_s": 4,
                "actions": ["echo before", "sleep 100"],
                "limits": {"step_timeout_s": 60},
            },
            {"id": "fine", "instruction": "x", "actions": ["echo fine"]},
        ],
        concurrency=3,
    )
    assert got["setup-hang"].status == TrajectoryStatus.ENV_FAILURE
    assert "did not finish within 2 s" in (got["setup-hang"].status_reason or "")
    deadline = got["deadline"]
    assert deadline.status == TrajectoryStatus.ENV_FAILURE
    assert "episode deadline of 4 s exceeded" in (deadline.status_reason or "")
    assert deadline.turns and "before" in deadline.turns[0].observation.text
    assert got["fine"].status == TrajectoryStatus.COMPLETE


def test_cli_default_deadline_applies(tmp_path: Path) -> None:
    got = run(
        tmp_path,
        [{"id": "d", "instruction": "x", "actions": ["sleep 100"], "limits": {"step_timeout_s": 60}}],
        episode_deadline_s=3.0,
    )
    assert got["d"].status == TrajectoryStatus.ENV_FAILURE and got["d"].metadata["deadline_exceeded"] is True


def test_exit_ends_the_episode_with_its_last_turn(tmp_path: Path) -> None:
    got = run(tmp_path, [{"id": "e", "instruction": "x", "actions": ["echo bye", "exit 3", "echo never"]}])
    trajectory = got["e"]
    assert trajectory.status == TrajectoryStatus.COMPLETE
    assert [t.action.text for t in trajectory.turns] == ["echo bye", "exit 3"]
    assert trajectory.turns[-1].observation.text.startswith("agent@sandbox:/work$ exit 3\nexit")
    assert "exited with status 3" in trajectory.metadata["stop_reason"]


def test_oom_kill_of_the_shell_is_an_env_failure(tmp_path: Path) -> None:
    hog = "x=$(head -c 400000000 /dev/zero | tr '\\0' a)"
    got = run(
        tmp_path,
        [
            {
                "id": "oom",
                "instruction": "x",
                "actions": ["echo start", hog, "echo never"],
                "limits": {"memory_mb": 96, "step_timeout_s": 60},
            }
        ],
    )
    trajectory = got["oom"]
    assert trajectory.status == TrajectoryStatus.ENV_FAILURE
    assert "out-of-memory killer" in (trajectory.status_reason or "")
    assert [t.action.text for t in trajectory.turns] == ["echo start", hog]


def test_sandbox_dying_mid_step_keeps_the_turn(engine_client: DockerClient) -> None:
    env = TerminalEnvironment(
        EnvironmentOptions(client=engine_client, limits=SandboxLimits(step_timeout_s=30))
    )
    with env:
        env.reset(Task(id="die", instruction="x"))
        assert env.sandbox is not None
        box = env.sandbox
        threading.Timer(1.0, lambda: engine_client.api.remove_container(box.container.id, force=True)).start()
        t0 = time.monotonic()
        result = env.step(Action(kind=ActionKind.COMMAND, text="echo going; sleep 20"))
        assert time.monotonic() - t0 < 20
        end = result.info[INFO_EPISODE_END]
        assert end["status"] == "env_failure" and "sandbox" in end["reason"]
        assert "going" in result.observation.text
