"""Sandbox lifecycle: nothing is left behind after SIGTERM mid-creation, every sandbox expires by
itself, and the writable paths are declared (the same on Podman and Docker)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from docker import DockerClient

from collectors import engine
from collectors.sandbox import LABEL_EXPIRES, LABEL_OWNER_PID, SANDBOX_HOME, Sandbox, SandboxLimits

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def engine_client() -> DockerClient:
    return engine.connect()


def owned_by(client: DockerClient, pid: int) -> list[str]:
    return [c.name for c in client.containers.list(all=True, filters={"label": f"{LABEL_OWNER_PID}={pid}"})]


@pytest.mark.slow
@pytest.mark.parametrize("after_s", [0.8, 2.5])
def test_sigterm_under_concurrency_8_leaves_no_sandbox(
    tmp_path: Path, engine_client: DockerClient, after_s: float
) -> None:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"id": f"s{i}", "instruction": "x", "actions": ["sleep 20"]}) + "\n" for i in range(12)
        )
    )
    argv = ["collect", "--env", "terminal", "--tasks", str(tasks), "--out", str(tmp_path / "out")]
    argv += ["-j", "8", "--no-progress", "--step-timeout", "60"]
    runner = subprocess.Popen(
        [sys.executable, "-c", "from worldline.cli import main; main()", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # SIGTERM while sandboxes are being created (early) or running (later).
        deadline = time.monotonic() + 30
        while not owned_by(engine_client, runner.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(after_s)
        os.kill(runner.pid, signal.SIGTERM)
        runner.wait(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == -signal.SIGTERM
    assert owned_by(engine_client, runner.pid) == []


def test_every_sandbox_expires_by_itself(engine_client: DockerClient) -> None:
    box = Sandbox.create(engine_client, engine.DEBIAN_IMAGE, SandboxLimits(ttl_s=2))
    try:
        assert int(box.container.labels[LABEL_EXPIRES]) <= time.time() + 3
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not engine_client.containers.list(all=True, filters={"name": box.name}):
                break
            time.sleep(0.2)
        # Gone without close(): what a SIGKILLed runner's sandbox does.
        assert engine_client.containers.list(all=True, filters={"name": box.name}) == []
    finally:
        box.close()


def test_writable_paths_are_declared_and_size_limited(engine_client: DockerClient) -> None:
    limits = SandboxLimits(tmp_mb=8, run_mb=4, shm_mb=6)
    with Sandbox.create(engine_client, engine.DEBIAN_IMAGE, limits) as box:
        script = (
            "for d in /work /tmp /var/tmp /run /dev/shm $HOME; do touch $d/.w && echo ok $d; done; "
            "for d in /etc /usr /var/lib /; do touch $d/.w 2>/dev/null && echo writable $d; done; "
            "df -Pk /tmp /var/tmp /run /dev/shm | tail -n +2 | awk '{print $6, $2}'"
        )
        out = box.exec(["bash", "-c", script]).output
    for path in ("/work", "/tmp", "/var/tmp", "/run", "/dev/shm", SANDBOX_HOME):
        assert f"ok {path}\n" in out
    assert "writable" not in out
    sizes = dict(
        line.split() for line in out.splitlines() if line.startswith("/") and " " in line and "ok" not in line
    )
    assert sizes == {
        "/tmp": str(8 * 1024),
        "/var/tmp": str(8 * 1024),
        "/run": str(4 * 1024),
        "/dev/shm": str(6 * 1024),
    }


def conmon_processes(container_id: str) -> int:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if "conmon" in line.split(" ")[0] and container_id[:12] in line)


@pytest.mark.slow
def test_finished_execs_leave_no_conmon_behind(tmp_path: Path) -> None:
    """With the project's engine configuration (infra/containers.conf), a long run's helper execs do
    not pile up Podman's conmon processes. A private service reads the file as `make setup` does."""
    conf = Path(__file__).resolve().parents[2] / "infra" / "containers.conf"
    sock = tmp_path / "podman.sock"
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{sock}"],
        env={**os.environ, "CONTAINERS_CONF": str(conf)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        client = DockerClient(base_url=f"unix://{sock}", timeout=60)
        with Sandbox.create(client, engine.DEBIAN_IMAGE, SandboxLimits()) as box:
            for _ in range(20):
                box.exec(["true"])
            deadline = time.monotonic() + 30
            while conmon_processes(box.container.id) > 1 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert conmon_processes(box.container.id) == 1  # the container's own, none per exec
        client.close()
    finally:
        os.killpg(service.pid, signal.SIGTERM)
        service.wait(timeout=30)
