"""Shard IO throughput: worldline's ShardWriter / readers vs plain pyarrow write_table / read_table.

Writes and reads the same 100k synthetic turns both ways in one process and prints the ratios
(goal: ours within 1.5x of the plain pyarrow baseline).

    .venv/bin/python benchmarks/shard_io.py [--turns 100000] [--turns-per-trajectory 10]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from schemas import Action, Observation, Source, Trajectory, Turn, stable_id, to_table
from schemas.shards import ShardWriter, arrow_dataset, iter_record_batches

WORDS = "ls cd git diff status commit python3 pytest error warning ok file line build test run".split()


def synthetic(n_turns: int, per_traj: int, seed: int = 0) -> list[Trajectory]:
    rng = random.Random(seed)
    trajs = []
    for i in range(n_turns // per_traj):
        turns = [
            Turn(
                Action("command", " ".join(rng.choices(WORDS, k=4))),
                Observation("\n".join(" ".join(rng.choices(WORDS, k=12)) for _ in range(8)), "terminal"),
                duration_s=rng.random(),
                exit_code=rng.choice([0, 0, 0, 1]),
                metadata={"step": t},
            )
            for t in range(per_traj)
        ]
        trajs.append(
            Trajectory(
                id=stable_id("bench", str(i)),
                domain="terminal",
                source=Source(kind="infra", name="bench"),
                task="synthetic task " + str(i),
                turns=turns,
            )
        )
    return trajs


def timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--turns-per-trajectory", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3, help="take the best of N runs")
    args = parser.parse_args()

    trajs = synthetic(args.turns, args.turns_per_trajectory)
    table = to_table(trajs)
    mb = table.nbytes / 1e6
    tmp = Path(tempfile.mkdtemp(prefix="wl-shard-bench-"))
    results: dict[str, float] = {}

    def best(name: str, fn) -> None:  # type: ignore[no-untyped-def]
        results[name] = min(timed(fn)[0] for _ in range(args.repeat))

    def plain_write() -> None:
        pq.write_table(table, tmp / "plain.parquet", compression="zstd")

    def ours_write() -> None:
        shutil.rmtree(tmp / "ours", ignore_errors=True)
        with ShardWriter(tmp / "ours") as w:
            w.write_table(table)

    def ours_write_models() -> None:
        shutil.rmtree(tmp / "models", ignore_errors=True)
        with ShardWriter(tmp / "models") as w:
            w.write_many(trajs)

    best("plain write_table", plain_write)
    best("ours ShardWriter.write_table", ours_write)
    best("ours ShardWriter.write (from models)", ours_write_models)
    best("plain read_table", lambda: pq.read_table(tmp / "plain.parquet"))
    best("ours arrow_dataset().to_table()", lambda: arrow_dataset(tmp / "ours").to_table())
    best(
        "ours streaming batches",
        lambda: sum(b.num_rows for _, b in iter_record_batches(tmp / "ours", batch_size=1024)),
    )

    print(f"data: {args.turns:,} turns in {len(trajs):,} trajectories, {mb:.1f} MB in Arrow")
    for name, secs in results.items():
        print(
            f"  {name:40s} {secs * 1000:8.1f} ms  {args.turns / secs / 1e3:8.1f} k turns/s  {mb / secs:7.1f} MB/s"
        )
    w = results["ours ShardWriter.write_table"] / results["plain write_table"]
    r = results["ours arrow_dataset().to_table()"] / results["plain read_table"]
    s = results["ours streaming batches"] / results["plain read_table"]
    print(
        f"ratio write (ours/plain): {w:.2f}x   read (ours/plain): {r:.2f}x   streaming read: {s:.2f}x   (goal <= 1.5x)"
    )
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
