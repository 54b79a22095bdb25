"""Pool-build throughput, MinHash speed/agreement and peak memory, each against a baseline in this run.

    .venv/bin/python benchmarks/pools_bench.py [--trajectories 12000] [--turns 10] [--repeats 1]
        [--memory-base 300] [--skip dask,minhash,memory,verify]

Prints: the wall time and turns/s of the full Beam build (a whole `worldline pools build` process:
start-up, filters, dedup, rendering, parts, exports, cards) on the default in-process runner (1 worker)
and on the multi-process runner with 1 and with 2 workers, next to a single-process pyarrow
implementation of the same expansion and masking that writes the same pool rows; the fixed cost of
each (the same build of a 10-trajectory input) so throughput can also be read without it; MinHash
docs/s of rensa vs datasketch's MinHash with their agreement on a labelled near-duplicate set; peak
memory of the build at 1x and 10x input; the build on Beam's DaskRunner (LocalCluster) with 1 and 2
workers; `pools verify` throughput and peak memory at 1x and 10x input. Every ratio is printed from raw wall-clock times, which are
printed too. The default input (120,000 turns) keeps start-up from dominating; ~10 min on 2 cores.
`--skip` leaves parts out, e.g. `--trajectories 36000 --skip dask,minhash,memory,verify` times the
runners alone where the fixed start-up cost is a small share.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.config import PoolsConfig
from schemas.shards import write_trajectories
from schemas.trajectory import (
    Action,
    ActionKind,
    ActionSpace,
    Domain,
    Observation,
    Source,
    SourceKind,
    Trajectory,
    Turn,
)

VOCAB = [
    "".join("abcdefghijklmnopqrstuvwxyz"[(i // 26**k) % 26] for k in range(3)) + "x" for i in range(5000)
]
"""Letter-only words: normalisation folds digits, so numbered words would all look alike."""
CONFIG = {"assignment": {"mode": "by_ratio", "ratios": {"cpt": 0.5, "sft": 0.5}}}


def make_trajectories(n: int, turns: int, seed: int = 0) -> list[Trajectory]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ts = []
        for t in range(turns):
            cmd = f"cat file_{VOCAB[i % 5000]}_{VOCAB[t]}.txt | grep {rng.choice(VOCAB)}"
            obs = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(20, 200)))
            if t % 4 == 3:
                obs = cmd + "\n" + cmd  # an echo turn
            ts.append(Turn(Action(ActionKind.COMMAND, cmd), Observation(obs)))
        out.append(
            Trajectory(
                id=f"b{seed}-{i}",
                domain=Domain.TERMINAL,
                source=Source(kind=SourceKind.INHOUSE, name=f"group{i % 40}"),
                task=f"bench task {i}",
                action_space=ActionSpace(description="bash"),
                turns=ts,
            )
        )
    return out


def baseline(shards: Path, cfg: PoolsConfig, out: Path) -> tuple[int, float, dict[str, int]]:
    """Single process, no Beam: pyarrow reading, the same expansion and masking functions, and the
    pool rows written as sorted Parquet parts (what a pyarrow implementation has to produce too)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines.render import Lineage, cpt_row, sft_rows
    from pipelines.rows import POOL_SCHEMAS
    from pipelines.stages.assign import choose_pool, record_group
    from schemas.shards import shard_files
    from schemas.templates import load_template_set
    from worldline.tokenizer import get_token_counter

    templates, counter = load_template_set(), get_token_counter()
    turns = 0
    start = time.perf_counter()
    rows: dict[str, list[dict[str, object]]] = {"cpt": [], "sft": []}
    for f in shard_files(shards):
        for batch in pq.ParquetFile(f).iter_batches(batch_size=256):
            for rec in batch.to_pylist():
                traj = Trajectory.from_record(rec)
                turns += len(traj.turns)
                # The group and pool the build chooses (one group per task by default), so both
                # sides render the same trajectories into the same pools.
                group, _ = record_group(traj.source, traj.task, traj.id, cfg.assignment.group_by)
                lineage = Lineage(group, "inhouse", traj.id)
                pool = choose_pool(cfg.assignment.ratios.pools, cfg.assignment.seed, group)
                if pool == "cpt":
                    rows["cpt"].append(cpt_row(traj, lineage, cfg, templates, counter))
                else:
                    rows["sft"].extend(sft_rows(traj, lineage, cfg, templates, counter)[0])
    for pool, items in rows.items():
        table = pa.Table.from_pylist(items, schema=POOL_SCHEMAS[pool]).sort_by("sample_id")
        (out / pool).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out / pool / "part-00000.parquet", compression="zstd", row_group_size=1000)
    return turns, time.perf_counter() - start, {pool: len(items) for pool, items in rows.items()}


def same_work(baseline_samples: dict[str, int], out: Path) -> str:
    """Whether the build wrote as many samples per pool as the baseline: the two sides did the same work."""
    built = {
        p: json.loads((out / "manifest.json").read_text())["stats"].get(f"samples.{p}", 0)
        for p in baseline_samples
    }
    verdict = "same" if built == baseline_samples else "DIFFERENT: the ratio compares different work"
    return f"samples per pool: baseline {baseline_samples}, build {built} ({verdict})"


RUNNERS: dict[str, list[str]] = {
    "in-process, 1 worker (default runner)": [],
    "multi-process, 1 worker": ["--direct_num_workers", "1", "--direct_running_mode", "multi_processing"],
    "multi-process, 2 workers": ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"],
}
"""The runner configurations timed: the default runner, and the multi-process runner at 1 and 2 workers
(the same runner at two worker counts: the scaling measurement)."""


def beam_build(shards: Path, out: Path, args: list[str]) -> float:
    """Wall time of one full `worldline pools build` in a fresh process; returns seconds."""
    cfg_path = out.parent / "bench.yaml"
    cfg_path.write_text(json.dumps(CONFIG))
    if out.exists():
        shutil.rmtree(out)
    cmd = [
        sys.executable,
        "-m",
        "worldline",
        "pools",
        "build",
        "--config",
        str(cfg_path),
        "--in",
        str(shards),
        "--out",
        str(out),
        *(["--", *args] if args else []),
    ]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


def dask_builds(shards: Path, root: Path, repeats: int) -> dict[int, float]:
    """Best wall time of the build on Beam's DaskRunner against a LocalCluster of 1 and of 2 workers."""
    import distributed

    best: dict[int, float] = {}
    for workers in (1, 2):
        with distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster:
            args = [f"--runner={DASK_RUNNER}", f"--dask_client_address={cluster.scheduler_address}"]
            best[workers] = min(beam_build(shards, root / f"dask{workers}-{i}", args) for i in range(repeats))
    return best


def verify_run(out: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of `worldline pools verify OUT` in a fresh process."""
    code = (
        "import resource,subprocess,sys,time;t=time.perf_counter();"
        f"subprocess.run([sys.executable,'-m','worldline','pools','verify',{str(out)!r}],check=True,"
        "capture_output=True);print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    res = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    wall, rss = res.stdout.strip().splitlines()[-1].split()
    return float(wall), int(rss) / 1024


def background_cpu_busy(seconds: float = 1.0) -> float:
    """Share of all CPUs busy over `seconds` before a measurement (other work on a shared machine)."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields) - idle, sum(fields)

    try:
        b0, t0 = sample()
        time.sleep(seconds)
        b1, t1 = sample()
    except (OSError, ValueError, IndexError):
        return float("nan")
    return (b1 - b0) / max(t1 - t0, 1)


def peak_rss_mib(shards: Path, out: Path, trajectories_per_part: int | None = None) -> float:
    """Peak RSS of a build process (the largest of it and its children), measured by the kernel."""
    extra: list[str] = []
    if trajectories_per_part is not None:
        cfg_path = out.parent / f"memory-{trajectories_per_part}.yaml"
        cfg_path.write_text(json.dumps({"trajectories_per_shard": trajectories_per_part}))
        extra = ["--config", str(cfg_path)]
    code = (
        "import resource,subprocess,sys;"
        f"subprocess.run([sys.executable,'-m','worldline','pools','build','--in',{str(shards)!r},"
        f"'--out',{str(out)!r},*{extra!r}],check=True,capture_output=True);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    res = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return int(res.stdout.strip().splitlines()[-1]) / 1024


def minhash_bench(n_docs: int) -> None:
    import datasketch
    import rensa

    from pipelines.minhash import estimated_jaccard, normalise, shingles, signatures

    rng = random.Random(7)
    base = [" ".join(rng.choice(VOCAB) for _ in range(300)) for _ in range(n_docs)]
    sets = [shingles(normalise(t), 5) for t in base]  # shared preparation, not timed
    encoded = [[s.encode() for s in ss] for ss in sets]
    start = time.perf_counter()
    rensa.RMinHash.digests_from_token_sets(sets, 128, 1)
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    for enc in encoded:
        m = datasketch.MinHash(num_perm=128, seed=1)
        m.update_batch(enc)
    t_ds = time.perf_counter() - start
    print(
        f"MinHash docs/s: rensa {n_docs / t_ours:,.0f}  datasketch {n_docs / t_ds:,.0f}  "
        f"ratio {t_ds / t_ours:.1f}x (goal >= 10x)"
    )
    # labelled near-duplicate set: mutate 1% of words (dup) or 60% (not dup)
    pairs = []
    for i in range(400):
        words = base[i].split()
        rate = 0.01 if i % 2 == 0 else 0.6
        mutated = [rng.choice(VOCAB) if rng.random() < rate else w for w in words]
        pairs.append((normalise(base[i]), normalise(" ".join(mutated)), i % 2 == 0))
    a = signatures([p[0] for p in pairs], num_perm=128, seed=1, width=5)
    b = signatures([p[1] for p in pairs], num_perm=128, seed=1, width=5)
    agree = correct_ours = correct_ds = 0
    for (x, y, label), sa, sb in zip(pairs, a, b, strict=True):
        ours_dup = estimated_jaccard(sa, sb) >= 0.8
        ma, mb = datasketch.MinHash(num_perm=128, seed=1), datasketch.MinHash(num_perm=128, seed=1)
        ma.update_batch([s.encode() for s in shingles(x, 5)])
        mb.update_batch([s.encode() for s in shingles(y, 5)])
        ds_dup = ma.jaccard(mb) >= 0.8
        agree += ours_dup == ds_dup
        correct_ours += ours_dup == label
        correct_ds += ds_dup == label
    n = len(pairs)
    print(
        f"labelled near-duplicates ({n} pairs): agreement {agree / n:.1%}, accuracy rensa {correct_ours / n:.1%}, "
        f"datasketch {correct_ds / n:.1%}"
    )


OPTIONAL_PARTS = ("dask", "minhash", "memory", "verify")
"""Parts after the runner comparison that `--skip` can leave out."""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trajectories", type=int, default=12000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=1, help="builds per runner; the best is compared")
    ap.add_argument("--memory-base", type=int, default=300)
    ap.add_argument(
        "--skip",
        default="",
        help=f"comma-separated parts not to run ({', '.join(OPTIONAL_PARTS)}), e.g. to time the runners "
        "alone on a large input",
    )
    args = ap.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if skip - set(OPTIONAL_PARTS):
        ap.error(
            f"--skip: unknown part(s) {', '.join(sorted(skip - set(OPTIONAL_PARTS)))}; known: {', '.join(OPTIONAL_PARTS)}"
        )
    cfg = PoolsConfig.from_dict(CONFIG)
    print(
        f"machine: {os.cpu_count()} CPUs; other work before start: {background_cpu_busy():.0%} of all CPUs busy"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shards, tiny = root / "shards", root / "tiny"
        write_trajectories(shards, make_trajectories(args.trajectories, args.turns))
        write_trajectories(tiny, make_trajectories(10, args.turns, seed=3))
        turns, t_base, base_samples = baseline(shards, cfg, root / "base")
        full: dict[str, list[float]] = {}
        fixed: dict[str, list[float]] = {}
        for name, runner_args in RUNNERS.items():
            for i in range(args.repeats):
                full.setdefault(name, []).append(beam_build(shards, root / f"out{i}", runner_args))
                fixed.setdefault(name, []).append(beam_build(tiny, root / f"tiny{i}", runner_args))
        print(f"input: {args.trajectories} trajectories x {args.turns} turns = {turns} turns")
        print(same_work(base_samples, root / "out0"))
        print(
            f"pyarrow baseline (single process, no Beam): {t_base:.1f} s wall, {turns / t_base:,.0f} turns/s"
        )
        print(
            "Beam: whole `worldline pools build` processes (start-up, validate, filter, dedup, decontaminate, "
            "assign, render, parts, exports, cards); fixed cost = the same build of a 10-trajectory input"
        )
        best = {name: min(times) for name, times in full.items()}
        best_fixed = {name: min(times) for name, times in fixed.items()}
        for name in RUNNERS:
            raw = ", ".join(f"{t:.1f}" for t in full[name])
            raw_fixed = ", ".join(f"{t:.1f}" for t in fixed[name])
            print(
                f"  {name:38s} wall {raw} s (best {best[name]:.1f} s) -> {turns / best[name]:,.0f} turns/s;"
                f" fixed cost {raw_fixed} s"
            )
        ip, mp1, mp2 = (best[n] for n in RUNNERS)
        ip_f, mp1_f, mp2_f = (best_fixed[n] for n in RUNNERS)

        def net(t: float, f: float) -> float:
            return max(t - f, 1e-9)

        print(f"1 worker (default runner) / baseline: {t_base / ip:.2f}x wall (goal >= 0.8x)")
        print(
            f"2 workers / 1 worker, same multi-process runner: {mp1 / mp2:.2f}x wall (goal >= 1.8x); "
            f"{net(mp1, mp1_f) / net(mp2, mp2_f):.2f}x without the measured fixed cost"
        )
        print(
            f"2 workers (multi-process) / 1 worker (default in-process runner): {ip / mp2:.2f}x wall; "
            f"{net(ip, ip_f) / net(mp2, mp2_f):.2f}x without the measured fixed cost"
        )
        if "dask" not in skip:
            dask = dask_builds(shards, root, args.repeats)
            print(
                f"DaskRunner (dask.distributed LocalCluster): 1 worker {dask[1]:.1f} s, 2 workers {dask[2]:.1f} s "
                f"-> 2 workers / 1 worker {dask[1] / dask[2]:.2f}x wall; default runner / DaskRunner 1 worker "
                f"{dask[1] / ip:.2f}x slower"
            )
        if "minhash" not in skip:
            minhash_bench(2000)
        if {"memory", "verify"} <= skip:
            return
        small, large = root / "m1", root / "m10"
        write_trajectories(small, make_trajectories(args.memory_base, args.turns, seed=1))
        write_trajectories(large, make_trajectories(args.memory_base * 10, args.turns, seed=2))
        m1, m10 = peak_rss_mib(small, root / "mo1"), peak_rss_mib(large, root / "mo10")
        if "verify" not in skip:  # verifies the two builds just measured
            for label, out, n in (
                ("1x", root / "mo1", args.memory_base),
                ("10x", root / "mo10", args.memory_base * 10),
            ):
                wall, rss = verify_run(out)
                print(
                    f"pools verify {label} ({n} traj): {wall:.1f} s wall, {n / wall:,.0f} trajectories/s, "
                    f"peak RSS {rss:,.0f} MiB"
                )
        if "memory" in skip:
            return
        print(
            f"peak RSS (default runner, default config): 1x ({args.memory_base} traj) {m1:,.0f} MiB  "
            f"10x {m10:,.0f} MiB  ratio {m10 / m1:.2f} (goal: flat)"
        )
        # A part is sorted in memory, so memory grows until parts reach trajectories_per_shard
        # (2,000 by default) and stays flat after; with parts of the 1x input's size both inputs fill
        # whole parts, which shows what else grows with the input.
        p1 = peak_rss_mib(small, root / "mp1", args.memory_base)
        p10 = peak_rss_mib(large, root / "mp10", args.memory_base)
        print(
            f"peak RSS (default runner, trajectories_per_shard {args.memory_base}): 1x {p1:,.0f} MiB  "
            f"10x {p10:,.0f} MiB  ratio {p10 / p1:.2f}"
        )


if __name__ == "__main__":
    main()
