"""Containment: no network, no host writes, pids limit, disk limit, and cleanup on crash and signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from docker import DockerClient

from collectors import engine
from collectors.environment import EnvironmentOptions, Task
from collectors.sandbox import LABEL, Sandbox, SandboxLimits
from collectors.terminal import TerminalEnvironment
from schemas import Action, ActionKind

pytestmark = pytest.mark.engine


@pytest.fixture(scope="session")
def engine_client() -> DockerClient:
    return engine.connect()


def test_no_network_unless_asked(engine_client: DockerClient) -> None:
    with Sandbox.create(engine_client, engine.DEBIAN_IMAGE, SandboxLimits()) as sandbox:
        probe = sandbox.exec(["python3", "-c", "import socket; print(socket.if_nameindex())"])
        assert "eth0" not in probe.output and "lo" in probe.output
        connect = sandbox.exec(
            ["python3", "-c", "import socket; socket.create_connection(('1.1.1.1', 80), timeout=2)"]
        )
        assert connect.exit_code != 0 and "unreachable" in connect.output.lower()


def test_commands_never_write_to_the_host(engine_client: DockerClient, tmp_path: Path) -> None:
    target = tmp_path / "escape.txt"
    with Sandbox.create(engine_client, engine.DEBIAN_IMAGE, SandboxLimits()) as sandbox:
        result = sandbox.exec(f"echo pwned > {target}; echo x > /etc/passwd; echo $?")
        assert "Read-only file system" in result.output or "No such file" in result.output
        assert sandbox.exec(f"test -e {tmp_path}; echo $?").output.strip() == "1"  # host paths are absent
    assert not target.exists()


def test_fork_bomb_is_contained_by_the_pids_limit(engine_client: DockerClient) -> None:
    env = TerminalEnvironment(
        EnvironmentOptions(client=engine_client, limits=SandboxLimits(pids=64, step_timeout_s=3.0))
    )
    with env:
        env.reset(Task(id="bomb", instruction="x"))
        assert env.sandbox is not None
        bomb = env.step(Action(kind=ActionKind.COMMAND, text="bomb() { bomb | bomb & }; bomb"))
        assert bomb.observation.text
        time.sleep(1.0)
        count = env.sandbox.exec("ls /proc | grep -c '^[0-9]'")
        if count.exit_code == 0:
            assert int(count.output.strip() or 0) <= 64 + 2
        else:  # the pids limit is exhausted: even the probe cannot fork, which is the containment
            assert "resource temporarily unavailable" in count.output.lower() or count.exit_code != 0
    assert engine_client.containers.list(all=True, filters={"label": LABEL}) == []
    # The host is unaffected: a new sandbox starts and works.
    with Sandbox.create(engine_client, engine.BUSYBOX_IMAGE, SandboxLimits()) as sandbox:
        assert sandbox.exec("echo fine").output.strip() == "fine"


def test_disk_fill_hits_the_work_dir_limit(engine_client: DockerClient) -> None:
    limits = SandboxLimits(work_dir_mb=16, memory_mb=256)
    with Sandbox.create(engine_client, engine.BUSYBOX_IMAGE, limits) as sandbox:
        fill = sandbox.exec("dd if=/dev/zero of=/work/fill bs=1M count=64 2>&1; echo rc=$?")
        assert "No space left on device" in fill.output and "rc=1" in fill.output
        assert "Read-only file system" in sandbox.exec("dd if=/dev/zero of=/fill bs=1M count=1 2>&1").output
        assert sandbox.exec("echo still-ok > /work/small 2>&1 || df /work").exit_code in (0, 1)


SIGNAL_SCRIPT = """
import sys, time
from collectors import engine
from collectors.sandbox import Sandbox, SandboxLimits, install_signal_cleanup
install_signal_cleanup()
client = engine.connect()
box = Sandbox.create(client, engine.BUSYBOX_IMAGE, SandboxLimits(), run_label=sys.argv[1])
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sandboxes_removed_on_signal(engine_client: DockerClient, sig: signal.Signals) -> None:
    label = f"signal-test-{sig.name}-{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-c", SIGNAL_SCRIPT, label], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    assert engine_client.containers.list(all=True, filters={"label": f"worldline.run={label}"})
    proc.send_signal(sig)
    proc.wait(timeout=30)
    assert engine_client.containers.list(all=True, filters={"label": f"worldline.run={label}"}) == []
