"""Throughput and memory of the cleaner's deterministic path against a json.loads + regex baseline.

Generates terminal recordings (typed commands, colours, progress bars) and JSON agent logs, then, in
one run: the baseline (json.loads every line, strip ANSI with a regex) and `worldline clean`'s graph
over the same files, at 1x and 10x the input size. Each measurement runs in a fresh child process so
its peak RSS is its own. Prints MB/s, records/s, the ratio to the baseline and peak memory.

    .venv/bin/python benchmarks/clean_bench.py --mb 30 --factor 10
"""

from __future__ import annotations

import argparse
import json
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
    start, size, records = time.perf_counter(), 0, 0
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
    return {"seconds": time.perf_counter() - start, "bytes": size, "records": records}


def child_ours(inputs: Path, out: Path) -> dict[str, float]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from curation_agents.model import CleanConfig
    from curation_agents.runner import CleanRun

    size = sum(p.stat().st_size for p in inputs.iterdir())
    start = time.perf_counter()
    summary = CleanRun(
        [str(inputs)], out, CleanConfig(), workers=1, checkpoint="never", flush_every=2000
    ).run()
    return {
        "seconds": time.perf_counter() - start,
        "bytes": size,
        "records": summary["records_in"],
        "accepted": summary["accepted"],
    }


def measure(kind: str, inputs: Path, out: Path) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--inputs", str(inputs), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=30.0, help="input size at 1x, in MB")
    parser.add_argument("--factor", type=int, default=10, help="the larger run is this many times bigger")
    parser.add_argument("--child", choices=["baseline", "ours"])
    parser.add_argument("--inputs", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        res = child_baseline(args.inputs) if args.child == "baseline" else child_ours(args.inputs, args.out)
        res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(res))
        return
    work = Path(tempfile.mkdtemp(prefix="clean-bench-"))
    try:
        rows = []
        for scale in (1, args.factor):
            inputs = work / f"in-{scale}x"
            generate(inputs, args.mb * scale)
            base = measure("baseline", inputs, work / "unused")
            ours = measure("ours", inputs, work / f"out-{scale}x")
            rows.append((scale, base, ours))
            shutil.rmtree(inputs)
        print(
            f"{'scale':>5} {'MB':>8} {'records':>8} | {'baseline MB/s':>13} {'rec/s':>9} | "
            f"{'ours MB/s':>9} {'rec/s':>9} {'ours/base':>9} | {'peak RSS base':>13} {'peak RSS ours':>13}"
        )
        for scale, base, ours in rows:
            mb = ours["bytes"] / 1e6
            print(
                f"{scale:>4}x {mb:>8.1f} {ours['records']:>8.0f} | {mb / base['seconds']:>13.1f} "
                f"{base['records'] / base['seconds']:>9.0f} | {mb / ours['seconds']:>9.2f} "
                f"{ours['records'] / ours['seconds']:>9.0f} {base['seconds'] / ours['seconds']:>9.3f} | "
                f"{base['peak_rss_mb']:>10.0f} MB {ours['peak_rss_mb']:>10.0f} MB"
            )
        growth = rows[-1][2]["peak_rss_mb"] / rows[0][2]["peak_rss_mb"]
        print(f"peak memory of ours grows {growth:.2f}x while the input grows {args.factor}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
