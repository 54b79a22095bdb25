"""A terminal step that prints about 4 KB, against a fresh exec_run printing the same bytes.

Run: .venv/bin/python benchmarks/terminal_step.py [--rounds 40]
Goal: the step (type the command, read its output, confirm the prompt, render the observation) <= 0.1x
of a fresh exec_run of the same command. Both run in one sandbox in interleaved rounds; the file they
print is an `ls -la` listing cut to 4,096 bytes, once plain and once coloured (`ls --color`). Also
prints the CPU this process spends per step (most of it rendering the observation) and the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from collectors import engine
from collectors.sandbox import Sandbox, SandboxLimits
from collectors.shell import PersistentShell

SIZE = 4096
FILES = {
    "plain": f"ls -la /usr/bin | head -c {SIZE - 1} > /tmp/plain.txt; echo >> /tmp/plain.txt",
    "coloured": (
        f"ls -la --color=always /usr/bin /etc | head -c {SIZE - 1} > /tmp/coloured.txt; "
        "printf '\\033[0m\\n' >> /tmp/coloured.txt"
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    client = engine.connect()
    info = engine.engine_info(client)
    print(f"engine: {info.product} {info.version}; load before: {_load()}")
    with Sandbox.create(client, engine.DEBIAN_IMAGE, SandboxLimits()) as box:
        for command in FILES.values():
            box.exec(command)
        shell = PersistentShell(box)
        shell.start()
        for name in FILES:
            command = f"cat /tmp/{name}.txt"
            printed = len(box.exec(command).output.encode())
            for _ in range(3):  # warm both paths
                box.exec(command)
                shell.run_command(command, timeout_s=10)
            execs, steps, cpu = [], [], []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                box.exec(command)
                execs.append(time.perf_counter() - t0)
                t0, c0 = time.perf_counter(), time.process_time()
                out = shell.run_command(command, timeout_s=10)
                steps.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
                assert out.exit_code == 0 and out.total_bytes > SIZE, out
            exec_ms, step_ms = statistics.median(execs) * 1000, statistics.median(steps) * 1000
            cpu_ms = statistics.median(cpu) * 1000
            print(f"{name}, {printed} bytes: fresh exec_run median {exec_ms:.2f} ms")
            print(
                f"{name}, {printed} bytes: terminal step median {step_ms:.2f} ms "
                f"(CPU in this process {cpu_ms:.2f} ms)"
            )
            print(f"{name}: ratio step/exec_run {step_ms / exec_ms:.3f}x (goal <= 0.1x)")
        trivial = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            shell.run_command("true", timeout_s=10)
            trivial.append(time.perf_counter() - t0)
        print(f"trivial step (no output) median {statistics.median(trivial) * 1000:.2f} ms")
        shell.close()
    print(f"load after: {_load()}")


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


if __name__ == "__main__":
    main()
