"""Desktop containment: hostile os tasks through the real collector, the real engine and the real
desktop (Xvfb, AT-SPI, gedit) in its sandbox (worldline/desktop), against the host canary.

A task's `os.apps` are commands and its actions drive real applications, so a task can try anything
the desktop's user can: save a document to a host path, open host files into the trajectory, run a
program that connects to the host's loopback, abstract unix sockets, X server or buses. Every attempt
acts on the sandbox, whose filesystem, network namespace and processes are its own: the outcome is the
environment's own answer, recorded as it came (gedit's error dialog or info bar in the observation; an
application that exits at start ends the trajectory as `env_failure` with its exit and its output).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from collectors import engine
from collectors.collection import CollectConfig, collect
from collectors.environment import Task, TaskError
from collectors.os_desktop import DesktopEnvironment
from collectors.sandbox import LABEL, LABEL_OWNER_PID
from schemas import Trajectory, TrajectoryStatus, iter_trajectories
from schemas.shards import iter_record_batches
from tests.security.canary import HostCanary

pytestmark = pytest.mark.engine

# /proc/PID/comm of what a desktop runs (the kernel keeps 15 characters).
DESKTOP_COMMS = {
    "Xvfb",
    "dbus-daemon",
    "dbus-launch",
    "at-spi-bus-laun",
    "at-spi2-registr",
    "dconf-service",
    "gedit",
    "gnome-calculato",
    "xdotool",
}
HOST_SCREEN = (1234, 567)  # the host X server's size: seeing "1234 567" means reaching it


@dataclass
class HostDesktop:
    """An X server and a session bus on the host, as a developer's machine would have them."""

    display: str
    bus_addresses: dict[str, str]  # "path": a socket file in the host's /tmp, "abstract": the netns's
    pids: set[int]


@pytest.fixture
def host_desktop(tmp_path: Path) -> Iterator[HostDesktop]:
    number = next(n for n in range(600, 700) if not Path(f"/tmp/.X{n}-lock").exists())
    xvfb = subprocess.Popen(
        ["Xvfb", f":{number}", "-screen", "0", f"{HOST_SCREEN[0]}x{HOST_SCREEN[1]}x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    buses = {
        kind: subprocess.Popen(
            ["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1", *listen],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for kind, listen in (
            ("path", []),
            ("abstract", [f"--address=unix:abstract=/tmp/worldline-host-bus-{secrets.token_hex(4)}"]),
        )
    }
    try:
        addresses = {kind: bus.stdout.readline().strip() for kind, bus in buses.items() if bus.stdout}
        deadline = time.monotonic() + 10
        while not Path(f"/tmp/.X11-unix/X{number}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        # All answer on the host: the attacks below are refused by the sandbox, not by their absence.
        geometry = subprocess.run(
            ["xdotool", "getdisplaygeometry"],
            env={**os.environ, "DISPLAY": f":{number}"},
            capture_output=True,
            text=True,
            timeout=10,
        )
        assert geometry.stdout.split() == [str(v) for v in HOST_SCREEN], geometry.stderr
        for address in addresses.values():
            names = subprocess.run(
                ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus"]
                + ["/org/freedesktop/DBus", "org.freedesktop.DBus.ListNames"],
                env={**os.environ, "DBUS_SESSION_BUS_ADDRESS": address},
                capture_output=True,
                text=True,
                timeout=10,
            )
            assert names.returncode == 0 and "array [" in names.stdout, names.stderr
        pids = {xvfb.pid} | {bus.pid for bus in buses.values()}
        yield HostDesktop(display=f":{number}", bus_addresses=addresses, pids=pids)
    finally:
        for proc in (xvfb, *buses.values()):
            proc.terminate()
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()


def probe(code: str) -> list[str]:
    """An 'application' that is a Python program: the task's own code, run as the desktop runs apps."""
    return ["python3", "-c", code]


def attack_tasks(
    canary: HostCanary, host: HostDesktop, host_tmp_name: str
) -> dict[str, tuple[dict[str, Any], TrajectoryStatus, list[str]]]:
    """task id -> (task row, expected status, texts the outcome must show)."""
    connect_tcp = (
        "import socket\n"
        f"s = socket.create_connection(('127.0.0.1', {canary.tcp_port}), timeout=3)\n"
        "print('connected', s.recv(200))"
    )
    connect_abstract = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        f"s.connect('\\0{canary.abstract_name}')\n"
        "print('connected', s.recv(200))"
    )
    list_names = ["/org/freedesktop/DBus", "org.freedesktop.DBus.ListNames"]
    dbus_send = ["dbus-send", "--print-reply", "--dest=org.freedesktop.DBus"]
    rows: dict[str, tuple[dict[str, Any], TrajectoryStatus, list[str]]] = {
        # gedit's Save As: a path in the canary's host directory, then the host's /tmp.
        "save-to-host-paths": (
            {
                "os": {"apps": ["gedit"]},
                "actions": [
                    "typewrite('planted by a task')",
                    {"action": "click", "role": "toggle button", "name": "Menu"},
                    {"action": "click", "role": "push button", "name": "Save As…"},
                    "hotkey('ctrl', 'a')",
                    f"typewrite({str(canary.directory / 'planted.txt')!r})",
                    "press('enter')",
                    "wait(0.5)",
                    "press('enter')",  # the error dialog's OK
                    "hotkey('ctrl', 'a')",
                    f"typewrite('/tmp/{host_tmp_name}')",
                    "press('enter')",
                    "wait(0.8)",
                ],
            },
            TrajectoryStatus.COMPLETE,
            [
                f"Error when getting information for file “{canary.directory}”: No such file or directory",
                f'frame "{host_tmp_name} (/tmp) - gedit"',  # saved, in the sandbox's /tmp
            ],
        ),
        "open-host-canary": (
            {"os": {"apps": [["gedit", str(canary.file)]]}, "actions": ["wait(0.3)"]},
            TrajectoryStatus.COMPLETE,
            [f'label "{canary.directory}"', f"Loading file “{canary.file}”"],
        ),
        "read-host-canary": (
            {"os": {"apps": [["cat", str(canary.file)]]}, "actions": []},
            TrajectoryStatus.ENV_FAILURE,
            [f"the application cat exited with code 1: cat: {canary.file}: No such file or directory"],
        ),
        "open-shadow": (
            {"os": {"apps": [["gedit", "/etc/shadow"]]}, "actions": ["wait(0.3)"]},
            TrajectoryStatus.COMPLETE,
            ["You do not have the permissions necessary to open the file.", 'frame "shadow (/etc) - gedit"'],
        ),
        "read-shadow": (
            {"os": {"apps": [["cat", "/etc/shadow"]]}, "actions": []},
            TrajectoryStatus.ENV_FAILURE,
            ["cat: /etc/shadow: Permission denied"],
        ),
        "host-loopback": (
            {"os": {"apps": [probe(connect_tcp)]}, "actions": []},
            TrajectoryStatus.ENV_FAILURE,
            ["ConnectionRefusedError: [Errno 111] Connection refused"],
        ),
        "host-abstract-socket": (
            {"os": {"apps": [probe(connect_abstract)]}, "actions": []},
            TrajectoryStatus.ENV_FAILURE,
            ["ConnectionRefusedError: [Errno 111] Connection refused"],
        ),
        "host-x-server": (
            {
                "os": {"apps": [["env", f"DISPLAY={host.display}", "xdotool", "getdisplaygeometry"]]},
                "actions": [],
            },
            TrajectoryStatus.ENV_FAILURE,
            ["Error: Can't open display", "Failed creating new xdo instance"],
        ),
        "host-x-server-gedit": (
            {"os": {"apps": [["env", f"DISPLAY={host.display}", "gedit"]]}, "actions": []},
            TrajectoryStatus.ENV_FAILURE,
            ["the application env exited with code 1", "cannot open display"],
        ),
        **{
            f"host-session-bus-{kind}": (
                {
                    "os": {
                        "apps": [
                            ["env", f"DBUS_SESSION_BUS_ADDRESS={address}", *dbus_send, "--session"]
                            + list_names
                        ]
                    },
                    "actions": [],
                },
                TrajectoryStatus.ENV_FAILURE,
                [
                    'Failed to open connection to "session" message bus',
                    "No such file or directory" if kind == "path" else "Connection refused",
                ],
            )
            for kind, address in host.bus_addresses.items()
        },
        "host-system-bus": (
            {"os": {"apps": [[*dbus_send, "--system", *list_names]]}, "actions": []},
            TrajectoryStatus.ENV_FAILURE,
            ['Failed to open connection to "system" message bus', "No such file or directory"],
        ),
    }
    return {
        task_id: ({"id": task_id, "instruction": "attack", **row}, status, expected)
        for task_id, (row, status, expected) in rows.items()
    }


def desktop_processes() -> dict[int, str]:
    """Host processes of a desktop: its programs by name, and the helper by its source in argv."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if comm in DESKTOP_COMMS or (len(argv) > 2 and argv[1] == b"-c" and b"def cmd_tree(" in argv[2]):
            found[int(entry.name)] = comm
    return found


def own_desktop_sandboxes() -> list[Any]:
    client = engine.connect()
    return [
        c
        for c in client.containers.list(all=True, filters={"label": LABEL})
        if (c.labels or {}).get(LABEL_OWNER_PID) == str(os.getpid())
    ]


def produced_texts(out: Path) -> list[str]:
    """Every record the run wrote, as JSON text, and every text file beside the shards."""
    texts = [
        json.dumps(rec, default=str, ensure_ascii=False)
        for _, batch in iter_record_batches(out)
        for rec in batch.to_pylist()
    ]
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".txt", ".log"):
            texts.append(path.read_text("utf-8", errors="replace"))
    return texts


def told(trajectory: Trajectory) -> str:
    """What the trajectory says happened: its status reason, first screen and every observation."""
    parts = [trajectory.status_reason or "", str(trajectory.metadata.get("initial_observation", ""))]
    return "\n".join(parts + [t.observation.text for t in trajectory.turns])


def host_shadow_lines() -> list[str]:
    try:
        return [line for line in Path("/etc/shadow").read_text().splitlines() if line.strip()]
    except OSError:
        return []


@pytest.mark.slow  # about 30 s: a desktop per attack
@pytest.mark.timeout(480)
def test_hostile_desktop_tasks_act_on_the_sandbox_only(
    host_canary: HostCanary, host_desktop: HostDesktop, tmp_path: Path
) -> None:
    host_tmp_name = f"worldline-os-attack-{secrets.token_hex(4)}.txt"
    tasks = attack_tasks(host_canary, host_desktop, host_tmp_name)
    path = tmp_path / "attacks.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row, _, _ in tasks.values()))
    before = set(desktop_processes())
    out = tmp_path / "out"
    summary = collect(CollectConfig(env="os", tasks_path=path, policy="scripted", out=out, concurrency=2))
    assert summary.written == len(tasks)

    by_id = {t.metadata["task_id"]: t for t in iter_trajectories(out)}
    assert set(by_id) == set(tasks)
    for task_id, (_row, status, expected) in tasks.items():
        trajectory = by_id[task_id]
        text = told(trajectory)
        assert trajectory.status == status, (task_id, trajectory.status, trajectory.status_reason)
        for piece in expected:
            assert piece in text, (task_id, piece, text[-1500:])
    # gedit found no such file in the sandbox: the document it shows is a new, empty one.
    opened = by_id["open-host-canary"].turns[-1].observation.text.splitlines()
    assert [line for line in opened if "text (editable" in line and "value=" not in line]
    # Reaching the host's X server would have shown its size; no host bus answered a name list.
    texts = produced_texts(out)
    assert not any(f"{HOST_SCREEN[0]} {HOST_SCREEN[1]}" in t for t in texts)
    assert not any("array [" in t for t in texts)
    assert not any(
        "connected" in (by_id[i].status_reason or "") for i in ("host-loopback", "host-abstract-socket")
    )

    # Nothing was written on the host, nothing of it was read, nothing reached.
    assert sorted(p.name for p in host_canary.directory.iterdir()) == ["canary.txt"]
    assert not (Path("/tmp") / host_tmp_name).exists()
    host_canary.assert_untouched(texts)
    shadow = host_shadow_lines()
    assert not any(line in t for line in shadow for t in texts)
    # No desktop, helper or sandbox outlives the run.
    left = {pid: comm for pid, comm in desktop_processes().items() if pid not in before | host_desktop.pids}
    assert left == {}
    assert own_desktop_sandboxes() == []


def test_task_files_outside_the_home_are_refused() -> None:
    for rel in ("../../tmp/planted.txt", "/etc/cron.d/planted", "notes/../../x"):
        task = Task(id="files", instruction="x", files={rel: "x"}, config={"os": {"apps": ["gedit"]}})
        with pytest.raises(TaskError, match=r"id files\).*'files' key .*stays inside it"):
            DesktopEnvironment.validate_task(task)
