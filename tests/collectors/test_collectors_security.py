"""Containment: no network, read-only root, no host writes, pids limit, disk limit, cleanup on signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from docker import DockerClient

from collectors import engine
from collectors.environment import EnvironmentOptions, Task
from collectors.sandbox import Sandbox, SandboxLimits
from collectors.terminal import TerminalEnvironment
from schemas import Action, ActionKind
from tests.helpers.sandboxes import still_present, track_sandboxes

pytestmark = pytest.mark.engine


@pytest.fixture(scope="session")
def engine_client() -> DockerClient:
    return engine.connect()


CONNECT_PROBE = """
import errno, socket
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2)
    print("connected")
except OSError as exc:
    print(errno.errorcode.get(exc.errno or 0, repr(exc)))
"""


def test_no_network_unless_asked(engine_client: DockerClient) -> None:
    with Sandbox.create(engine_client, engine.DEBIAN_IMAGE, SandboxLimits()) as sandbox:
        probe = sandbox.exec(["python3", "-c", "import socket; print([n for _, n in socket.if_nameindex()])"])
        assert probe.output.strip() == "['lo']"
        assert sandbox.exec(["python3", "-c", CONNECT_PROBE]).output.strip() == "ENETUNREACH"


WRITE_PROBE = """
import errno, os, sys
path = sys.argv[1]
try:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write("pwned")
    print("written")
except OSError as exc:
    print(errno.errorcode[exc.errno])
"""


def root_mount_options(sandbox: Sandbox) -> list[str]:
    """The mount options of the sandbox's / as its kernel reports them."""
    mounts = sandbox.exec("cat /proc/mounts").output.splitlines()
    root = [line.split() for line in mounts if len(line.split()) > 3 and line.split()[1] == "/"]
    assert root, mounts
    return root[-1][3].split(",")


def test_the_root_filesystem_is_read_only(engine_client: DockerClient) -> None:
    with Sandbox.create(engine_client, engine.DEBIAN_IMAGE, SandboxLimits()) as sandbox:
        assert "ro" in root_mount_options(sandbox)
        for path in ("/etc/passwd", "/usr/bin/worldline-probe", "/new-file"):
            assert sandbox.exec(["python3", "-c", WRITE_PROBE, path]).output.strip() == "EROFS", path
        # The writable places are the size-limited tmpfs mounts.
        assert sandbox.exec(["python3", "-c", WRITE_PROBE, "/work/ok.txt"]).output.strip() == "written"


def test_commands_never_write_to_the_host(engine_client: DockerClient, tmp_path: Path) -> None:
    target = tmp_path / "escape" / "pwned.txt"
    with Sandbox.create(engine_client, engine.DEBIAN_IMAGE, SandboxLimits()) as sandbox:
        assert sandbox.exec(f"test -e {tmp_path}; echo $?").output.strip() == "1"  # host paths are absent
        # Under /tmp (a tmpfs of the sandbox) the write succeeds, and stays inside the sandbox.
        assert sandbox.exec(["python3", "-c", WRITE_PROBE, str(target)]).output.strip() == "written"
        assert sandbox.exec(["cat", str(target)]).output == "pwned"
    assert not target.exists() and not target.parent.exists()


def pids_in_use(client: DockerClient, sandbox: Sandbox) -> int:
    """The sandbox's process count as the engine reports it (no process inside is needed)."""
    stats = client.api.stats(sandbox.container.id, stream=False)
    return int(stats["pids_stats"]["current"])


def test_fork_bomb_is_contained_by_the_pids_limit(
    engine_client: DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = track_sandboxes(monkeypatch)
    limit = 64
    env = TerminalEnvironment(
        EnvironmentOptions(client=engine_client, limits=SandboxLimits(pids=limit, step_timeout_s=3.0))
    )
    with env:
        env.reset(Task(id="bomb", instruction="x"))
        assert env.sandbox is not None
        before = pids_in_use(engine_client, env.sandbox)
        assert before < limit // 2
        bomb = env.step(Action(kind=ActionKind.COMMAND, text="bomb() { bomb | bomb & }; bomb"))
        assert bomb.observation.text
        # The bomb keeps forking in the background: sample the count the engine sees until it
        # presses on the limit (a bounded number of samples, so a bomb that never fills it fails).
        # Bombs whose forks fail exit while others fork, so the table can settle a few pids short
        # of the limit on a busy machine: "pressing" is within an eighth of it.
        full = limit - limit // 8
        counts: list[int] = []
        while len(counts) < 200 and (not counts or counts[-1] < full):
            counts.append(pids_in_use(engine_client, env.sandbox))
        if counts[-1] < full:
            # On a loaded host the bomb's population can collapse (every fork failing at
            # once) before a sample sees it full. Press on the limit with long-lived
            # processes instead: the table fills up to the limit and no further.
            env.step(
                Action(
                    kind=ActionKind.COMMAND,
                    text="i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; echo pressed",
                )
            )
            while len(counts) < 400 and counts[-1] < full:
                counts.append(pids_in_use(engine_client, env.sandbox))
        assert max(counts) <= limit, counts  # never beyond the limit...
        assert counts[-1] >= full, counts  # ...which the bomb did press on
    assert len(created) == 1 and still_present(engine_client, created) == []
    # The host is unaffected: a new sandbox starts and works.
    with Sandbox.create(engine_client, engine.BUSYBOX_IMAGE, SandboxLimits()) as sandbox:
        assert sandbox.exec("echo fine").output.strip() == "fine"


def test_disk_fill_hits_the_work_dir_limit(engine_client: DockerClient) -> None:
    limits = SandboxLimits(work_dir_mb=16, memory_mb=256)
    with Sandbox.create(engine_client, engine.BUSYBOX_IMAGE, limits) as sandbox:
        fill = sandbox.exec("dd if=/dev/zero of=/work/fill bs=1M count=64 2>/dev/null; echo rc=$?")
        assert fill.output.strip() == "rc=1"
        size = int(sandbox.exec("stat -c %s /work/fill").output.strip())
        assert 15 * 2**20 <= size <= 16 * 2**20  # filled up to the limit, not beyond
        assert sandbox.exec("echo more >> /work/fill").exit_code != 0
        # Freeing the space makes the work dir usable again: the limit is the tmpfs size, nothing else.
        assert (
            sandbox.exec("rm /work/fill && echo ok > /work/small && cat /work/small").output.strip() == "ok"
        )


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
