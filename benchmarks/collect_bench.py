"""Collector throughput: container start, persistent-session round trip vs exec_run, trajectories/min.

Run: .venv/bin/python benchmarks/collect_bench.py [--rounds 50] [--tasks 16]
Goal: our per-step overhead (with the confirmed step synchronisation) <= 0.1x of a fresh exec_run per
command, and 16 concurrent sandboxes without errors. The baseline for the synchronisation is the old
prompt marker (a fixed OSC sequence at every prompt, no secret, no pending-input check), driven the same
way in the same sandbox. Prints every number measured in this one run.
"""

from __future__ import annotations

import argparse
import json
import re
import select
import statistics
import tempfile
import time
from pathlib import Path

from collectors import engine
from collectors.collection import CollectConfig, collect
from collectors.sandbox import Sandbox, SandboxLimits
from collectors.shell import PersistentShell


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=32)
    args = parser.parse_args()
    client = engine.connect()
    info = engine.engine_info(client)
    print(f"engine: {info.product} {info.version}")

    starts = []
    for _ in range(10):
        t0 = time.perf_counter()
        box = Sandbox.create(client, engine.DEBIAN_IMAGE, SandboxLimits())
        starts.append(time.perf_counter() - t0)
        box.close()
    print(
        f"container start (create+run, limits, no network): median {statistics.median(starts) * 1000:.1f} ms"
    )

    with Sandbox.create(client, engine.DEBIAN_IMAGE, SandboxLimits()) as box:
        execs = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            box.exec(["true"])
            execs.append(time.perf_counter() - t0)
        shell = PersistentShell(box)
        shell.start()
        steps = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            shell.run_command("true", timeout_s=10)
            steps.append(time.perf_counter() - t0)
        shell.close()
        old = old_marker_steps(client, box, args.rounds)
    exec_ms, step_ms = statistics.median(execs) * 1000, statistics.median(steps) * 1000
    old_ms = statistics.median(old) * 1000
    print(f"trivial command, fresh exec_run:                       median {exec_ms:.2f} ms")
    print(f"trivial command, PTY shell, old unconfirmed marker:    median {old_ms:.2f} ms")
    print(f"trivial command, PTY shell, confirmed synchronisation: median {step_ms:.2f} ms")
    print(f"ratio new sync/old marker: {step_ms / old_ms:.2f}x")
    print(f"ratio persistent/exec: {step_ms / exec_ms:.3f}x (goal <= 0.1x)")

    with tempfile.TemporaryDirectory() as tmp:
        tasks = Path(tmp) / "tasks.jsonl"
        actions = [
            "cd /tmp && echo start",
            "seq 1 200 | tail -n 1",
            "python3 -c 'print(6*7)'",
            "ls -la /work",
        ]
        tasks.write_text(
            "".join(
                json.dumps({"id": f"b{i}", "instruction": "bench", "actions": actions}) + "\n"
                for i in range(args.tasks)
            )
        )
        for concurrency in (1, 4, 8, 16):
            out = Path(tmp) / f"out-{concurrency}"
            summary = collect(
                CollectConfig(
                    env="terminal", tasks_path=tasks, policy="scripted", out=out, concurrency=concurrency
                )
            )
            errors = summary.written - summary.by_status.get("complete", 0)
            rate = summary.written / summary.seconds * 60
            print(
                f"concurrency {concurrency}: {summary.written} trajectories in {summary.seconds:.2f} s = "
                f"{rate:.0f} trajectories/min, {errors} not complete"
            )


OLD_MARKER = re.compile(rb"\x1b\]697;(\d+)\x07")
OLD_PROMPT_COMMAND = (
    "__wl_rc=$?; case \"$PS1\" in *']697;'*) ;; *) PS1=\"$PS1\"'\\[\\e]697;${__wl_rc}\\a\\]';; esac"
)


def old_marker_steps(client: object, box: Sandbox, rounds: int) -> list[float]:
    """The previous design, for comparison: every prompt ends with a fixed marker; a step ends at the
    first one seen."""
    api = box.client.api
    exec_id = api.exec_create(
        box.container.id,
        ["bash", "--noprofile", "--norc", "-i"],
        stdin=True,
        tty=True,
        environment={"TERM": "xterm", "PROMPT_COMMAND": OLD_PROMPT_COMMAND},
    )["Id"]
    conn = api.exec_start(exec_id, socket=True, tty=True)
    sock = getattr(conn, "_sock", conn)

    def until_marker() -> None:
        buf = b""
        while not OLD_MARKER.search(buf):
            ready, _, _ = select.select([sock], [], [], 10)
            if not ready:
                raise RuntimeError("old-style shell: no marker within 10 s")
            buf += sock.recv(65536)

    until_marker()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        sock.sendall(b"true\n")
        until_marker()
        times.append(time.perf_counter() - t0)
    sock.close()
    return times


if __name__ == "__main__":
    main()
