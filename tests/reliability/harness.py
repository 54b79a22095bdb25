"""Kill a real command at a random point, rerun it, and compare with an uninterrupted run.

Each trial starts the command as its own process group, sends SIGKILL (to the command's main process
only, as the OOM killer would) or SIGTERM (as a scheduler stopping it) after a seeded random delay
within the uninterrupted run's duration, then reruns the same command to completion. The outputs are
compared with the uninterrupted run's by content; what the killed run left (staging folders,
processes of its session, sandboxes it owned) must be gone once the rerun ends. Every trial is
appended to tests/artefacts/reliability.jsonl (tries, survived, lost), so the figures can be read
after the suite.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ARTEFACTS = Path(__file__).resolve().parents[1] / "artefacts"
ROOT = Path(__file__).resolve().parents[2]


def worldline(*args: str) -> list[str]:
    return [sys.executable, "-m", "worldline", *args]


@dataclass
class Trial:
    command: str
    sig: str
    delay_s: float
    killed_while_running: bool
    rerun_exit: int
    equal: bool
    debris: list[str] = field(default_factory=list)
    lost: int = 0
    duplicated: int = 0

    @property
    def survived(self) -> bool:
        return self.rerun_exit == 0 and self.equal and not self.debris


def run(
    cmd: Sequence[str], env: dict[str, str] | None = None, timeout: float = 900
) -> tuple[int, float, str]:
    started = time.monotonic()
    done = subprocess.run(
        list(cmd), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, start_new_session=True
    )
    return done.returncode, time.monotonic() - started, done.stdout[-3000:] + done.stderr[-3000:]


def session_processes(sid: int) -> list[psutil.Process]:
    """Processes still in session `sid` (the killed run's children, e.g. Beam workers)."""
    out = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getsid(proc.pid) == sid:
                out.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def interrupt(
    cmd: Sequence[str], sig: signal.Signals, delay_s: float, env: dict[str, str] | None = None
) -> tuple[bool, int]:
    """Start `cmd`, send `sig` after `delay_s`; returns (it was still running, its session id)."""
    proc = subprocess.Popen(
        list(cmd),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        proc.wait(timeout=delay_s)
        return False, proc.pid
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(sig)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return True, proc.pid


def trial(
    name: str,
    cmd: Sequence[str],
    sig: signal.Signals,
    rng: random.Random,
    duration_s: float,
    *,
    compare: Callable[[], tuple[bool, int, int]],
    debris: Callable[[int], list[str]],
    reset: Callable[[], None] | None = None,
    env: dict[str, str] | None = None,
    rerun: Sequence[str] | None = None,
) -> Trial:
    """One kill-and-rerun trial; `compare` returns (equal, lost, duplicated) against the reference."""
    if reset is not None:
        reset()
    delay = rng.uniform(0.15, 0.9) * duration_s
    running, sid = interrupt(cmd, sig, delay, env)
    code, _, log = run(rerun or cmd, env)
    # Processes of the killed run's session get a short grace period to notice and exit.
    deadline = time.monotonic() + 30
    while session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [f"process {p.pid} {' '.join(p.cmdline()[:3])}" for p in session_processes(sid) if p.is_running()]
    equal, lost, duplicated = compare() if code == 0 else (False, -1, -1)
    result = Trial(
        name, sig.name, round(delay, 2), running, code, equal, [*left, *debris(sid)], lost, duplicated
    )
    record(result, log if not result.survived else "")
    return result


def record(result: Trial, log: str) -> None:
    ARTEFACTS.mkdir(exist_ok=True)
    row: dict[str, Any] = {**result.__dict__, "survived": result.survived}
    if log:
        row["log_tail"] = log[-1500:]
    with open(ARTEFACTS / "reliability.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
