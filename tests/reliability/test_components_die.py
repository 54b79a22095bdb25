"""A component dies mid-trajectory: the sandbox, the MCP server, the browser, the X server.

Each case runs a real collection of two tasks; while the first is inside a long step, a watcher kills
one component for real (the container through the engine, the server process, Chromium or Xvfb inside
the sandbox). The killed task must end as `env_failure` with a reason and the turns it had, the other
task must complete, and no sandbox of the run may be left.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from docker import DockerClient

from collectors import engine
from collectors.collection import CollectConfig, collect
from schemas import TrajectoryStatus, iter_trajectories
from tests.helpers.sandboxes import owned_by, still_present, track_sandboxes

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.fixture(scope="module")
def client() -> DockerClient:
    return engine.connect()


def in_container(client: DockerClient, container_id: str, pattern: str) -> bool:
    try:
        result = client.containers.get(container_id).exec_run(["pgrep", "-f", pattern], user="root")
    except Exception:
        return False
    return bool(result.exit_code == 0)


def first_sandbox(client: DockerClient, created: list[str], timeout: float = 240) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if created:
            return created[0]
        time.sleep(0.2)
    raise AssertionError("the first task's sandbox never appeared")


def wait_for(predicate: Callable[[], bool], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError("the component to kill never came up")


def kill_in_container(pattern: str) -> Callable[[DockerClient, list[str]], str]:
    def kill(client: DockerClient, created: list[str]) -> str:
        cid = first_sandbox(client, created)
        wait_for(lambda: in_container(client, cid, pattern))
        time.sleep(3)  # let the reset finish and the long step start
        killed = client.containers.get(cid).exec_run(["pkill", "-9", "-f", pattern], user="root")
        assert killed.exit_code == 0, f"pkill -f {pattern} found nothing to kill: {killed.output!r}"
        return f"pkill -9 -f {pattern} in {cid[:12]}"

    return kill


def kill_container(client: DockerClient, created: list[str]) -> str:
    cid = first_sandbox(client, created)
    wait_for(lambda: in_container(client, cid, "sleep 20"))
    client.containers.get(cid).kill()
    return f"container {cid[:12]} killed"


def kill_server_process(client: DockerClient, created: list[str]) -> str:
    def server() -> psutil.Process | None:
        for proc in psutil.Process().children(recursive=True):
            try:
                if any("server-everything" in part for part in proc.cmdline()):
                    return proc
            except psutil.Error:
                continue
        return None

    wait_for(lambda: server() is not None)
    time.sleep(3)
    proc = server()
    assert proc is not None
    proc.kill()
    return f"MCP server pid {proc.pid} killed"


CASES: dict[str, tuple[str, list[dict[str, Any]], Callable[[DockerClient, list[str]], str]]] = {
    "terminal: the sandbox": (
        "terminal",
        [
            {"id": "dies", "instruction": "Wait.", "actions": ["echo start", "sleep 20", "echo end"]},
            {"id": "lives", "instruction": "Print.", "actions": ["echo fine"]},
        ],
        kill_container,
    ),
    "mcp: the server": (
        "mcp",
        [
            {
                "id": "dies",
                "instruction": "Run a long operation.",
                "mcp": {"server": "everything"},
                "actions": [
                    {"name": "echo", "arguments": {"message": "start"}},
                    {"name": "trigger-long-running-operation", "arguments": {"duration": 20, "steps": 4}},
                    {"name": "echo", "arguments": {"message": "end"}},
                ],
            },
            {
                "id": "lives",
                "instruction": "Echo.",
                "mcp": {"server": "everything"},
                "actions": [{"name": "echo", "arguments": {"message": "fine"}}],
            },
        ],
        kill_server_process,
    ),
    "web: the browser": (
        "web",
        [
            {
                "id": "dies",
                "instruction": "Wait on the shop.",
                "web": {"start_url": "{sites}/shop/"},
                "actions": [
                    {"action": "noop", "wait_ms": 500},
                    {"action": "noop", "wait_ms": 20000},
                    {"action": "noop", "wait_ms": 200},  # the page is read again after the kill
                ],
            },
            {
                "id": "lives",
                "instruction": "Open the shop.",
                "web": {"start_url": "{sites}/shop/"},
                "actions": [{"action": "noop", "wait_ms": 200}],
            },
        ],
        kill_in_container("chrom"),
    ),
    "os: the X server": (
        "os",
        [
            {
                "id": "dies",
                "instruction": "Wait.",
                "os": {"apps": ["gedit"]},
                "actions": ["wait(0.5)", "wait(20)", "typewrite('x')"],
            },
            {
                "id": "lives",
                "instruction": "Type.",
                "os": {"apps": ["gedit"]},
                "actions": ["typewrite('fine')"],
            },
        ],
        kill_in_container("Xvfb"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_component_dies_mid_trajectory(
    case: str, client: DockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    domain, tasks, kill = CASES[case]
    created = track_sandboxes(monkeypatch)
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    killed: list[str] = []
    errors: list[BaseException] = []

    def watcher() -> None:
        try:
            killed.append(kill(client, created))
        except BaseException as exc:  # reported below, with the run's outcome
            errors.append(exc)

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    out = tmp_path / "out"
    collect(CollectConfig(env=domain, tasks_path=task_file, policy="scripted", out=out, concurrency=1))
    thread.join(timeout=60)
    assert not errors, errors
    assert killed, "nothing was killed"
    by_task = {t.metadata["task_id"]: t for t in iter_trajectories(out)}
    dies, lives = by_task["dies"], by_task["lives"]
    assert dies.status == TrajectoryStatus.ENV_FAILURE, (
        killed,
        dies.status,
        [t.observation.text[:300] for t in dies.turns],
    )
    assert dies.status_reason, "an env_failure says why"
    assert lives.status == TrajectoryStatus.COMPLETE, (lives.status, lives.status_reason)
    assert still_present(client, created) == []
    assert owned_by(client, os.getpid()) == []
