"""Where a collection's time goes: CPU seconds per trajectory by component, at several concurrencies.

    .venv/bin/python benchmarks/collect_cpu.py [--env terminal] [--n 24] [-j 1,4,8,16] [--seed 0]

Generates N tasks of one domain, collects them with the explore policy at each concurrency (a fresh
output folder each time, the same tasks), and prints per run: wall time, trajectories/min, and the CPU
seconds per trajectory spent by this process (the collector: policy, PTY reading, terminal rendering,
redaction, Parquet), by the sandboxes (the containers' cgroup, conmon included: the commands
themselves, the shell), by the container engine (the Podman API service: create, exec, remove) and
by everything else on the machine (the kernel's share outside those, and other jobs), with the
machine's busy share (CPU seconds over wall x cores). When the machine is busy all the time, more
concurrency cannot help: trajectories/min per core is then 60 / (CPU seconds per trajectory), which
the last column prints. Run it with nothing else on the machine: the engine and the "other" columns
count every process.

Reads Linux's /proc/stat, /proc/<pid>/stat and the cgroup-v1 cpuacct of Podman's `libpod_parent`
(cgroupfs manager, as infra/containers.conf sets); a column whose source is missing prints "-".
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.collection import CollectConfig, collect
from collectors.generators import generate, write_tasks

TICK = os.sysconf("SC_CLK_TCK")
CGROUP = Path("/sys/fs/cgroup/cpuacct/libpod_parent/cpuacct.usage")


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all cores), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / TICK


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def sandboxes_cpu_s() -> float | None:
    try:
        return int(CGROUP.read_text()) / 1e9
    except OSError:
        return None


def engine_pids() -> list[int]:
    found = subprocess.run(["pgrep", "-f", "podman system service"], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def engine_cpu_s(pids: list[int]) -> float | None:
    total = 0.0
    for pid in pids:
        try:
            parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += (int(parts[11]) + int(parts[12])) / TICK  # utime, stime
    return total if pids else None


def run(env: str, tasks: Path, out: Path, concurrency: int) -> dict[str, float | None]:
    pids = engine_pids()
    before = (time.perf_counter(), machine_busy_s(), own_cpu_s(), sandboxes_cpu_s(), engine_cpu_s(pids))
    summary = collect(
        CollectConfig(env=env, tasks_path=tasks, policy="explore", out=out, concurrency=concurrency)
    )
    after = (time.perf_counter(), machine_busy_s(), own_cpu_s(), sandboxes_cpu_s(), engine_cpu_s(pids))
    n = max(1, summary.written)
    wall = after[0] - before[0]

    def delta(i: int) -> float | None:
        a, b = after[i], before[i]
        return None if a is None or b is None else (a - b) / n

    busy, ours, boxes, eng = delta(1), delta(2), delta(3), delta(4)
    other = None if None in (busy, ours, boxes, eng) else busy - ours - boxes - eng  # type: ignore[operator]
    return {
        "written": float(summary.written),
        "wall": wall,
        "per_min": 60 * summary.written / wall,
        "busy": busy,
        "ours": ours,
        "sandboxes": boxes,
        "engine": eng,
        "other": other,
        "busy_share": None if busy is None else busy * n / (wall * (os.cpu_count() or 1)),
    }


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="terminal")
    parser.add_argument("--n", type=int, default=24, help="tasks per run (default 24)")
    parser.add_argument("-j", "--concurrency", default="1,4,8,16", help="comma-separated (default 1,4,8,16)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="worldline-collect-cpu-") as tmp:
        root = Path(tmp)
        tasks = root / "tasks.jsonl"
        write_tasks(tasks, generate(args.env, args.n, args.seed))
        print(f"{args.env}: {args.n} generated tasks (seed {args.seed}), explore policy, {cores} cores")
        print(f"load average at start: {os.getloadavg()[0]:.2f}")
        print(
            f"{'-j':>4} {'traj':>5} {'wall s':>7} {'traj/min':>9} | CPU s per trajectory: {'ours':>6} "
            f"{'boxes':>6} {'engine':>6} {'other':>6} {'total':>6} | {'busy':>5} {'traj/min/core at full':>22}"
        )
        for j in [int(x) for x in args.concurrency.split(",") if x.strip()]:
            r = run(args.env, tasks, root / f"out-j{j}", j)
            busy = r["busy"]
            per_core = None if not busy else 60 / busy
            print(
                f"{j:>4} {int(r['written'] or 0):>5} {fmt(r['wall'], '.1f'):>7} {fmt(r['per_min'], '.1f'):>9} | "
                f"{'':>21}{fmt(r['ours']):>6} {fmt(r['sandboxes']):>6} {fmt(r['engine']):>6} "
                f"{fmt(r['other']):>6} {fmt(busy):>6} | {fmt(r['busy_share'], '.0%'):>5} {fmt(per_core, '.1f'):>22}"
            )
        print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
