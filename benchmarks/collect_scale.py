"""Collection at scale: generate N tasks per local domain (`worldline tasks generate`), collect them with
the explore policy, and print per domain trajectories/min, turns/min per core, unexpected env_failures
(the goal is 0: every generated task is valid and its environment should start) and the ratio of the
run's wall time to its own floor.

The floor is what the run could not go below at its concurrency: every episode's environment start
(measured here, median of a few resets and closes of one generated task) plus its turns at the run's
median step latency, divided by the concurrency. Goal: within 1.5x of the floor.

    .venv/bin/python benchmarks/collect_scale.py                     # 1,000 tasks per domain
    .venv/bin/python benchmarks/collect_scale.py --n 50 --domains terminal,mcp -j 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors import engine
from collectors.collection import CollectConfig, collect
from collectors.environment import EnvironmentOptions, Task, environment_class
from collectors.generators import generate, write_tasks
from schemas import TrajectoryStatus, iter_trajectories
from schemas.domains import registered_domains

# The domains this machine collects alone that have a task generator (android needs a device).
DOMAINS = tuple(s.value for s in registered_domains() if s.local and s.generator)


def start_seconds(domain: str, task: dict[str, Any], client: Any, rounds: int) -> float:
    """Median seconds of one environment's reset and close for `task`."""
    env_cls = environment_class(domain)
    parsed = Task.from_json(task)
    times = []
    for _ in range(rounds):
        env = env_cls(EnvironmentOptions(client=client if env_cls.needs_engine(parsed) else None))
        t0 = time.monotonic()
        try:
            env.reset(parsed)
        finally:
            env.close()
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def run_domain(domain: str, n: int, seed: int, concurrency: int, folder: Path, client: Any) -> dict[str, Any]:
    t0 = time.monotonic()
    tasks = generate(domain, n, seed)
    gen_s = time.monotonic() - t0
    path = folder / f"{domain}.jsonl"
    write_tasks(path, tasks)
    start_s = start_seconds(domain, tasks[0], client, rounds=3)
    out = folder / f"out-{domain}"
    t0 = time.monotonic()
    summary = collect(
        CollectConfig(env=domain, tasks_path=path, policy="explore", out=out, concurrency=concurrency)
    )
    wall = time.monotonic() - t0
    trajectories = list(iter_trajectories(out))
    turns = [t for traj in trajectories for t in traj.turns]
    step_s = statistics.median(t.duration_s or 0.0 for t in turns) if turns else 0.0
    floor = (len(trajectories) * start_s + len(turns) * step_s) / concurrency
    # The bundled sites' failure pages (/status/: an HTTP 500, a CAPTCHA) end a web episode as
    # env_failure by design; exploration may reach them. Every other env_failure is unexpected.
    failed = [t for t in trajectories if t.status == TrajectoryStatus.ENV_FAILURE]
    expected = [t for t in failed if domain == "web" and "/status/" in (t.status_reason or "")]
    failures = Counter((t.status_reason or "")[:100] for t in failed if t not in expected)
    cores = os.cpu_count() or 1
    return {
        "domain": domain,
        "tasks": len(tasks),
        "generate_s": gen_s,
        "wall_s": wall,
        "trajectories": summary.written,
        "status": dict(summary.by_status),
        "turns": len(turns),
        "traj_per_min": summary.written / wall * 60,
        "turns_per_min_core": len(turns) / wall * 60 / cores,
        "start_s": start_s,
        "step_s": step_s,
        "floor_s": floor,
        "ratio": wall / floor if floor else float("nan"),
        "env_failures": sum(failures.values()),
        "failure_pages": len(expected),
        "failure_reasons": failures.most_common(3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000, help="tasks per domain (default 1000)")
    parser.add_argument("--domains", default=",".join(DOMAINS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-j", "--concurrency", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=None, help="keep the task files and datasets here")
    args = parser.parse_args()
    os.environ.setdefault("DOCKER_HOST", "unix:///tmp/worldline-podman.sock")
    client = engine.connect()
    folder = args.out or Path(tempfile.mkdtemp(prefix="collect-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(
        f"{args.n} tasks per domain, explore policy, concurrency {args.concurrency}, {os.cpu_count()} cores; data in {folder}"
    )
    for domain in args.domains.split(","):
        r = run_domain(domain, args.n, args.seed, args.concurrency, folder, client)
        print(
            f"{domain:9s} {r['trajectories']} trajectories ({r['status']}), {r['turns']} turns in {r['wall_s']:.0f} s "
            f"(tasks generated in {r['generate_s']:.1f} s): {r['traj_per_min']:.1f} trajectories/min, "
            f"{r['turns_per_min_core']:.0f} turns/min per core; unexpected env_failures {r['env_failures']} "
            f"(bundled failure pages reached: {r['failure_pages']}); "
            f"floor {r['floor_s']:.0f} s (start {r['start_s']:.2f} s, step {r['step_s'] * 1000:.0f} ms), "
            f"ratio {r['ratio']:.2f}x (goal <= 1.5x)"
        )
        for reason, count in r["failure_reasons"]:
            print(f"          env_failure x{count}: {reason}")


if __name__ == "__main__":
    main()
