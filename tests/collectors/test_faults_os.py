"""The os domain leaves nothing behind: its desktop (Xvfb, the session and accessibility buses, the
registry daemon, the apps) runs inside the task's sandbox, so on SIGTERM the run removes it and after
kill -9 `worldline sandbox reap` does; no temporary folder is created on the host."""

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
from collectors.os_desktop import DESKTOP_IMAGE
from tests.helpers.sandboxes import owned_by, private_host

pytestmark = [pytest.mark.engine, pytest.mark.slow]
DESKTOP_PROGRAMS = {"Xvfb", "dbus-daemon", "at-spi-bus-laun", "at-spi2-registr", "gedit"}


def processes_of(container_id: str) -> dict[int, str]:
    """Host pid -> command name of every process in the container's cgroup, and of its conmon."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cgroup = Path(f"/proc/{entry}/cgroup").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
        except OSError:
            continue
        if container_id in cgroup or container_id.encode() in cmdline:
            found[int(entry)] = comm
    return found


def alive(pids: dict[int, str]) -> dict[int, str]:
    still = {}
    for pid, comm in pids.items():
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                still[pid] = comm
        except OSError:
            continue
    return still


def desktop_temp_folders() -> set[str]:
    return {p.name for p in Path("/tmp").glob("worldline-desktop-*")}


@pytest.mark.parametrize("how", ["SIGTERM", "kill -9 then reap"])
def test_no_desktop_process_or_folder_outlives_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    client: DockerClient = engine.connect()
    try:
        engine.image_reference(client, DESKTOP_IMAGE)
    except Exception as exc:  # any lookup failure means the image is not built
        pytest.skip(f"{DESKTOP_IMAGE} is not built ({exc}); make setup builds it")
    as_this_host = private_host(monkeypatch)
    folders_before = desktop_temp_folders()
    tasks = tmp_path / "t.jsonl"
    task = {"id": "idle", "instruction": "x", "files": {"a.txt": "a\n"}, "os": {"apps": [["gedit", "a.txt"]]}}
    task["actions"] = ["wait(5)"] * 12
    tasks.write_text(json.dumps(task) + "\n")
    argv = ["collect", "--env", "os", "--tasks", str(tasks), "--out", str(tmp_path / "out"), "--no-progress"]
    runner = subprocess.Popen(
        [sys.executable, "-c", f"{as_this_host}from worldline.cli import main; main()", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        desktop: dict[int, str] = {}
        while time.monotonic() < deadline:
            boxes = owned_by(client, runner.pid)
            desktop = processes_of(boxes[0]) if boxes else {}
            if "gedit" in desktop.values():
                break
            time.sleep(0.2)
        assert DESKTOP_PROGRAMS <= set(desktop.values()), desktop
        if how == "SIGTERM":
            os.kill(runner.pid, signal.SIGTERM)
            runner.wait(timeout=60)
        else:
            os.kill(runner.pid, signal.SIGKILL)
            runner.wait(timeout=10)
            assert alive(desktop), "the desktop went with the runner: nothing for reap to do"
            reap = subprocess.run(
                [sys.executable, "-c", f"{as_this_host}from worldline.cli import main; main()"]
                + ["sandbox", "reap"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert reap.returncode == 0 and "removed 1 sandbox" in reap.stdout, reap.stdout + reap.stderr
    finally:
        if runner.poll() is None:
            runner.kill()
    assert owned_by(client, runner.pid) == []
    deadline = time.monotonic() + 15
    while alive(desktop) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive(desktop) == {}
    assert desktop_temp_folders() <= folders_before
