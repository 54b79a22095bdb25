"""A large collection interrupted with kill -9 (or SIGTERM) and resumed, against the same run uninterrupted.

Generates N tasks (default 1,000) for one domain, collects them once without interruption (the
reference), then collects them again into a fresh folder, killing the `worldline collect` process
group at seeded random points (--kills, default 2) and resuming with `--resume` until the run ends on
its own. Both runs use the explore policy at the same concurrency, with the progress bar on (its last
lines are printed, so a reader sees the interrupted run showed progress).

Printed: wall time and trajectories/min of each run; for the resumed dataset, the tasks with no
trajectory (lost), the tasks with more than one (duplicated), the ids missing or extra against the
reference, how many trajectories equal the reference's in status and turn count, and in every
action and observation; `worldline validate` of the result; casts of no trajectory (orphans);
sandboxes the killed runs left behind. Goal: 0 lost, 0 duplicated, the same ids, 0 orphans, 0
sandboxes left, validate clean.

    .venv/bin/python benchmarks/collect_resume.py                          # search, 1,000 tasks
    .venv/bin/python benchmarks/collect_resume.py --env terminal --n 100 -j 4 --signal term
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from schemas import iter_trajectories  # noqa: E402

SIGNALS = {"kill": signal.SIGKILL, "term": signal.SIGTERM}


def worldline(*args: str) -> list[str]:
    return [sys.executable, "-m", "worldline", *args]


def collect_command(env: str, tasks: Path, out: Path, concurrency: int) -> list[str]:
    return worldline(
        "collect", "--env", env, "--tasks", str(tasks), "--policy", "explore", "--out", str(out),
        "-j", str(concurrency),
    )  # fmt: skip


def run_to_end(cmd: list[str], log: Path) -> tuple[int, float]:
    t0 = time.monotonic()
    with open(log, "ab") as fh:
        code = subprocess.run(
            cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        ).returncode
    return code, time.monotonic() - t0


def run_killed(cmd: list[str], log: Path, after_s: float, sig: signal.Signals) -> tuple[bool, float, int]:
    """Start `cmd`; signal its whole process group after `after_s`.
    Returns (it was still running, seconds, its session id)."""
    t0 = time.monotonic()
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=after_s)
            return False, time.monotonic() - t0, proc.pid
        except subprocess.TimeoutExpired:
            pass
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return True, time.monotonic() - t0, proc.pid


def content(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    for traj in iter_trajectories(path):
        turns = [(t.action.to_record().get("text", ""), t.observation.text) for t in traj.turns]
        out.setdefault(traj.id, []).append((traj.status.value, len(traj.turns), turns))
    return out


def orphan_casts(out: Path) -> int:
    casts = out / "casts"
    if not casts.is_dir():
        return 0
    named = {str(t.metadata.get("asciicast")) for t in iter_trajectories(out) if t.metadata.get("asciicast")}
    return sum(1 for p in casts.rglob("*") if p.is_file() and str(p.relative_to(out)) not in named)


def sandboxes_left(session_ids: list[int]) -> int:
    try:
        from collectors import engine
        from tests.helpers.sandboxes import owned_by
    except Exception:
        return -1
    client = engine.connect()
    return sum(len(owned_by(client, sid)) for sid in session_ids)


def tail(log: Path, lines: int = 3) -> str:
    text = log.read_bytes().decode("utf-8", "replace").replace("\r", "\n")
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return "\n".join("    " + line[:160] for line in kept[-lines:])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="search", help="domain (default search, the fastest to collect)")
    parser.add_argument("--n", type=int, default=1000, help="tasks (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed and kill-point seed")
    parser.add_argument("-j", "--concurrency", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--kills", type=int, default=2, help="interruptions before the run may finish")
    parser.add_argument("--signal", choices=sorted(SIGNALS), default="kill")
    parser.add_argument("--out", type=Path, default=None, help="keep the task file and datasets here")
    args = parser.parse_args()
    os.environ.setdefault("DOCKER_HOST", "unix:///tmp/worldline-podman.sock")
    folder = args.out or Path(tempfile.mkdtemp(prefix="collect-resume-"))
    folder.mkdir(parents=True, exist_ok=True)
    tasks = folder / "tasks.jsonl"
    subprocess.run(
        worldline("tasks", "generate", "--env", args.env, "--n", str(args.n), "--seed", str(args.seed), "--out", str(tasks)),
        cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    print(
        f"{args.n} {args.env} tasks, explore, -j {args.concurrency}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; in {folder}"
    )

    reference, interrupted = folder / "reference", folder / "interrupted"
    code, ref_s = run_to_end(
        collect_command(args.env, tasks, reference, args.concurrency), folder / "reference.log"
    )
    ref = content(reference)
    print(
        f"reference: exit {code}, {len(ref)} trajectories in {ref_s:.0f} s ({len(ref) / ref_s * 60:.1f}/min)"
    )

    rng = random.Random(f"collect-resume-{args.seed}")
    log = folder / "interrupted.log"
    base = collect_command(args.env, tasks, interrupted, args.concurrency)
    sessions: list[int] = []
    spent, hits = 0.0, 0
    for k in range(args.kills):
        # Spread the kill points over the run: each lands in the next share of the reference's time.
        after = rng.uniform(0.2, 0.8) * ref_s / args.kills
        cmd = base if k == 0 else [*base, "--resume"]
        hit, seconds, sid = run_killed(cmd, log, after, SIGNALS[args.signal])
        sessions.append(sid)
        spent += seconds
        hits += hit
        done = len(content(interrupted)) if (interrupted / "manifest.json").is_file() else 0
        print(
            f"  {args.signal} -{SIGNALS[args.signal].value} after {seconds:.0f} s: {done} trajectories published so far"
        )
    code, rest_s = run_to_end([*base, "--resume"], log)
    spent += rest_s
    got = content(interrupted)
    print(f"resumed: exit {code}, {sum(len(v) for v in got.values())} trajectories, {spent:.0f} s in all")
    print("  progress, last lines of the resumed run:\n" + tail(log))

    ids = Counter({tid: len(v) for tid, v in got.items()})
    lost = len(set(ref) - set(got))
    extra = len(set(got) - set(ref))
    duplicated = sum(n - 1 for n in ids.values())
    same_shape = sum(1 for tid in ref if tid in got and got[tid][0][:2] == ref[tid][0][:2])
    same_content = sum(1 for tid in ref if tid in got and got[tid][0] == ref[tid][0])
    validate = subprocess.run(
        worldline("validate", str(interrupted)), cwd=ROOT, capture_output=True, text=True
    )
    print(
        f"lost {lost}, duplicated {duplicated}, ids not in the reference {extra}; "
        f"equal status and turns {same_shape}/{len(ref)}, equal actions and observations {same_content}/{len(ref)}; "
        f"orphan casts {orphan_casts(interrupted)}; sandboxes left {sandboxes_left(sessions)}; "
        f"kills that hit a running collect {hits}/{args.kills}; validate exit {validate.returncode}"
    )
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
