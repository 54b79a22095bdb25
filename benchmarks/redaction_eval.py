"""Recall and false positives of the cleaner's redaction, and of detect-secrets, on the labelled corpus.

    .venv/bin/python benchmarks/redaction_eval.py --seeds 20

A planted secret counts as caught when its value no longer appears in the output; a look-alike counts
as a false positive when it no longer appears intact. For detect-secrets (all default plugins, line by
line) a secret is caught when a reported value overlaps it, and a look-alike is a false positive when a
reported value lies inside it. Prints one row per secret class and a total.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation_agents.redact import redact_text_or_json
from tests.redaction_corpus import Sample, build_corpus


def ours(samples: list[Sample]) -> tuple[Counter[str], Counter[str], int, int, float]:
    caught: Counter[str] = Counter()
    total: Counter[str] = Counter()
    fp = n_look = 0
    start = time.perf_counter()
    for s in samples:
        out = redact_text_or_json(s.text, Counter(), s.pii)
        for kind, value in s.secrets:
            total[kind] += 1
            caught[kind] += value not in out
        for la in s.lookalikes:
            n_look += 1
            fp += la not in out
    return caught, total, fp, n_look, time.perf_counter() - start


def detect_secrets_scan(samples: list[Sample]) -> tuple[Counter[str], Counter[str], int, int, float]:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    caught: Counter[str] = Counter()
    total: Counter[str] = Counter()
    fp = n_look = 0
    start = time.perf_counter()
    with default_settings():
        for s in samples:
            found = [
                str(p.secret_value)
                for line in s.text.replace("\r\n", "\n").split("\n")
                for p in scan_line(line)
                if p.secret_value
            ]
            for kind, value in s.secrets:
                total[kind] += 1
                caught[kind] += any(f in value or value in f for f in found if len(f) >= 6)
            for la in s.lookalikes:
                n_look += 1
                fp += any(f in la for f in found if len(f) >= 6)
    return caught, total, fp, n_look, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    samples = [s for seed in range(args.seeds) for s in build_corpus(seed)]
    results = {"ours": ours(samples)}
    try:
        results["detect-secrets"] = detect_secrets_scan(samples)
    except ImportError:
        print("detect-secrets is not installed; `pip install detect-secrets` to compare")
    kinds = sorted(results["ours"][1])
    names = list(results)
    print(f"{len(samples)} samples, {sum(results['ours'][1].values())} planted secrets")
    print(f"{'class':<20}" + "".join(f"{n + ' recall':>24}" for n in names))
    for kind in kinds:
        row = f"{kind:<20}"
        for n in names:
            hit, planted = results[n][0][kind], results[n][1][kind]
            row += f"{hit:>12}/{planted:<5} {hit / planted:6.1%}"
        print(row)
    for n in names:
        caught, total, fp, n_look, secs = results[n]
        c, t = sum(caught.values()), sum(total.values())
        precision = c / (c + fp) if c + fp else 1.0
        print(
            f"{n}: recall {c}/{t} = {c / t:.1%}, look-alikes damaged {fp}/{n_look}, "
            f"precision {precision:.1%}, {secs * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
