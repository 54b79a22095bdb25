"""Throughput and memory of the cleaner's deterministic path against a json.loads + regex baseline.

Generates terminal recordings (typed commands, colours, progress bars) and JSON agent logs, then, in
one run: the baseline (json.loads every line, strip ANSI with a regex) and `worldline clean`'s graph
over the same files, at 1x and 10x the input size, in one process and with `--workers N`. Each
measurement runs in a fresh child process so its peak RSS is its own. Prints MB/s, records/s, the
ratio to the baseline (wall time, and CPU time, which moves less when other jobs share the machine),
peak memory, and the memory the imports alone take (a constant).

    .venv/bin/python benchmarks/clean_bench.py --mb 30 --factor 10 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ANSI = r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07"


def _cast(rng: random.Random, commands: int) -> str:
    prompt = "\x1b[?2004h\x1b[01;32mdev@box\x1b[00m:\x1b[01;34m~\x1b[00m# "
    t = 0.0
    lines = [
        json.dumps({"version": 2, "width": 120, "height": 32, "timestamp": 1700000000}),
        json.dumps([t, "o", prompt]),
    ]
    for c in range(commands):
        cmd = (
            rng.choice(
                [
                    "ls -la /usr/lib",
                    "pip install requests",
                    "git status",
                    "python3 train.py --epochs 3",
                    "grep -rn TODO src",
                    "make -j4",
                ]
            )
            + f" # {c}"
        )
        for ch in cmd:
            t += 0.01
            lines += [json.dumps([round(t, 4), "i", ch]), json.dumps([round(t + 0.0005, 4), "o", ch])]
        t += 0.01
        lines.append(json.dumps([round(t, 4), "i", "\r"]))
        out = "\r\n\x1b[?2004l\r"
        for p in range(0, 101, 5):
            out += f"\rDownloading [{'#' * (p // 5):<20}] {p}%"
        out += (
            "\r\n"
            + "\n".join(f"\x1b[33mline {k}\x1b[0m of output {rng.random():.6f}\r" for k in range(40))
            + "\n"
        )
        lines.append(json.dumps([round(t + 0.2, 4), "o", out + prompt]))
        t += 0.5
    return "\n".join(lines) + "\n"


def _sharegpt_line(rng: random.Random, index: int) -> str:
    conv = [{"from": "human", "value": f"Fix issue #{index} in the parser."}]
    for k in range(rng.randint(3, 12)):
        conv.append(
            {"from": "function_call", "value": f"Look around.\n```bash\ngrep -n foo src/mod{k}.py\n```"}
        )
        conv.append(
            {
                "from": "observation",
                "value": "\n".join(
                    f"src/mod{k}.py:{j}: foo = {rng.random()}" for j in range(rng.randint(5, 60))
                ),
            }
        )
    return json.dumps({"id": f"s{index}", "conversations": conv})


def generate(root: Path, megabytes: float, seed: int = 7) -> None:
    """Half recordings, half JSONL logs, about `megabytes` in total."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    target = int(megabytes * 1024 * 1024)
    written, casts, logs = 0, 0, 0
    while written < target:
        if written < target // 2:
            text = _cast(rng, commands=rng.randint(20, 60))
            path = root / f"session-{casts:05d}.cast"
            casts += 1
        else:
            text = "\n".join(_sharegpt_line(rng, logs * 500 + i) for i in range(500)) + "\n"
            path = root / f"agent-log-{logs:04d}.jsonl"
            logs += 1
        path.write_text(text)
        written += len(text.encode())


def child_baseline(inputs: Path) -> dict[str, float]:
    import re

    ansi = re.compile(ANSI)
    cpu, start, size, records = _cpu_seconds(), time.perf_counter(), 0, 0
    for path in sorted(inputs.iterdir()):
        with open(path, "rb") as fh:
            for line in fh:
                size += len(line)
                obj = json.loads(line)
                if isinstance(obj, list) and len(obj) == 3 and isinstance(obj[2], str):
                    ansi.sub("", obj[2])
                elif isinstance(obj, dict):
                    records += 1
                    for msg in obj.get("conversations", []):
                        ansi.sub("", msg.get("value", ""))
        if path.suffix == ".cast":
            records += 1
    return {
        "seconds": time.perf_counter() - start,
        "cpu_seconds": _cpu_seconds() - cpu,
        "bytes": size,
        "records": records,
    }


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children: steadier than wall time on a shared machine."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child_ours(inputs: Path, out: Path, workers: int) -> dict[str, float]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import pyarrow as pa

    from curation_agents.clean_run import CleanRun
    from curation_agents.model import CleanConfig

    # pyarrow imports pandas on its first conversion of Python objects (~0.3 s, ~50 MB): do that here,
    # with the other imports, so the timed run holds no import at all.
    pa.array([0])
    import_rss = _rss_mb()  # modules (pyarrow, pandas, polars, langgraph): a constant, whatever the input
    size = sum(p.stat().st_size for p in inputs.iterdir())
    cpu, start = _cpu_seconds(), time.perf_counter()
    summary = CleanRun(
        [str(inputs)], out, CleanConfig(), workers=workers, checkpoint="never", flush_every=2000
    ).run()
    return {
        "seconds": time.perf_counter() - start,
        "cpu_seconds": _cpu_seconds() - cpu,
        "bytes": size,
        "records": summary["records_in"],
        "accepted": summary["accepted"],
        "import_rss_mb": import_rss,
        # Worker processes (workers > 1) each hold their own copy of the imports.
        "peak_rss_workers_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def measure(kind: str, inputs: Path, out: Path, workers: int = 1) -> dict[str, float]:
    result = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            kind,
            "--inputs",
            str(inputs),
            "--out",
            str(out),
            "--workers",
            str(workers),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    measured: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=30.0, help="input size at 1x, in MB")
    parser.add_argument("--factor", type=int, default=10, help="the larger run is this many times bigger")
    parser.add_argument("--child", choices=["baseline", "ours"])
    parser.add_argument("--inputs", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--workers", type=int, default=2, help="also measure `--workers N` (N > 1) next to one process"
    )
    args = parser.parse_args()
    if args.child:
        res = (
            child_baseline(args.inputs)
            if args.child == "baseline"
            else child_ours(args.inputs, args.out, args.workers)
        )
        res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(res))
        return
    work = Path(tempfile.mkdtemp(prefix="clean-bench-"))
    try:
        worker_counts = [1] + ([args.workers] if args.workers > 1 else [])
        rows = []
        for scale in (1, args.factor):
            inputs = work / f"in-{scale}x"
            generate(inputs, args.mb * scale)
            base = measure("baseline", inputs, work / "unused")
            for workers in worker_counts:
                out = work / f"out-{scale}x-{workers}w"
                rows.append((scale, workers, base, measure("ours", inputs, out, workers)))
                shutil.rmtree(out)
            shutil.rmtree(inputs)
        print(
            f"{'scale':>5} {'MB':>7} {'records':>7} | {'baseline MB/s':>13} {'rec/s':>6} | "
            f"{'ours':>7} {'MB/s':>6} {'rec/s':>6} {'ours/base':>9} {'(CPU)':>6} | {'peak RSS base':>13} "
            f"{'ours':>7} {'(imports)':>9} {'workers':>7}"
        )
        for scale, workers, base, ours in rows:
            mb = ours["bytes"] / 1e6
            print(
                f"{scale:>4}x {mb:>7.1f} {ours['records']:>7.0f} | {mb / base['seconds']:>13.1f} "
                f"{base['records'] / base['seconds']:>6.0f} | {workers:>2} proc {mb / ours['seconds']:>6.2f} "
                f"{ours['records'] / ours['seconds']:>6.0f} {base['seconds'] / ours['seconds']:>9.3f} "
                f"{base['cpu_seconds'] / ours['cpu_seconds']:>6.3f} | "
                f"{base['peak_rss_mb']:>10.0f} MB {ours['peak_rss_mb']:>4.0f} MB {ours['import_rss_mb']:>6.0f} MB "
                + (f"{ours['peak_rss_workers_mb']:>4.0f} MB" if workers > 1 else f"{'-':>7}")
            )
        for workers in worker_counts:
            small, large = (r[3] for r in rows if r[1] == workers)
            growth = large["peak_rss_mb"] / small["peak_rss_mb"]
            working_small = small["peak_rss_mb"] - small["import_rss_mb"]
            working_large = large["peak_rss_mb"] - large["import_rss_mb"]
            print(
                f"{workers} process(es): peak memory grows {growth:.2f}x while the input grows "
                f"{args.factor}x (above the imports: {working_small:.0f} MB -> {working_large:.0f} MB)"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
