"""The near-duplicate detection curve of the pools dedup stage, measured on labelled pairs.

Pairs of documents are made from real agent transcripts (the public trajectory fixtures under
tests/fixtures: shell commands, tracebacks, diffs, test output): a window of words, and a copy edited
by word replacements, insertions, deletions and changed numbers until the exact Jaccard of the two
shingle sets (normalised and shingled as the pools build does) reaches a target drawn uniformly from
[0.5, 1.0]. That exact Jaccard is the truth. Each pair is then decided by the dedup stage's own code
(`signatures`, `band_entries`, a group by band key, `bucket_edges`: candidates from
`candidate_bands`, decided by exact shingle-set Jaccard after an estimate pre-filter). For
comparison, on the same signatures: the earlier decision (`lsh_bands`, midpoint just below the
threshold, candidates verified by estimated Jaccard: `NearDuplicateIndex`), estimated Jaccard on
every pair with no banding (the ceiling of any estimate-verified banding), and, when datatrove is
installed, datatrove's MinHash (its default 14 bands x 8 rows, no verification) with its signature
docs/s next to ours. Printed: precision and recall at the configured threshold and the detection
probability per Jaccard bucket for each.

    .venv/bin/python benchmarks/dedup_curve.py [--pairs 2000] [--threshold 0.8] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.config import PoolsConfig  # noqa: E402
from pipelines.minhash import (  # noqa: E402
    NearDuplicateIndex,
    band_keys,
    candidate_bands,
    estimated_jaccard,
    exact_key,
    lsh_bands,
    normalise,
    s_curve_midpoint,
    shingles,
    signatures,
)
from pipelines.minhash import shingle_set as build_shingle_set  # noqa: E402
from pipelines.stages.dedup import Fingerprint, band_entries, bucket_edges  # noqa: E402

FIXTURES = [
    "tests/fixtures/public/swe-agent_marshmallow-1867.traj",
    "tests/fixtures/public/openai_messages_mini-coder_sample.json",
    "tests/fixtures/public/sharegpt_toolcall_sample.json",
    "tests/fixtures/public/openhands_events_wrong_initial_state.json",
    "tests/fixtures/mini_swe_agent/github_issue.traj.json",
    "tests/fixtures/mini_swe_agent/local.traj.json",
]
BUCKETS = [(0.5 + 0.05 * i, 0.55 + 0.05 * i) for i in range(10)]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def transcript_words() -> list[str]:
    """The raw (un-normalised) whitespace-separated tokens of the fixtures' long strings, in order."""
    words: list[str] = []
    for rel in FIXTURES:
        path = ROOT / rel
        if path.exists():
            for text in _strings(json.loads(path.read_text())):
                if len(text) >= 80:
                    words += text.split()
    return words


def shingle_set(text: str, width: int) -> set[str]:
    """The shingle set the pools build fingerprints (observations keep digits: fold_digits False)."""
    return set(shingles(normalise(text, fold_digits=False), width))


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _edit(words: list[str], pool: list[str], rng: random.Random) -> None:
    i = rng.randrange(len(words))
    kind = rng.random()
    if kind < 0.55:
        words[i] = rng.choice(pool)
    elif kind < 0.75:
        words.insert(i, rng.choice(pool))
    elif kind < 0.9 and len(words) > 20:
        del words[i]
    else:
        words[i] = f"{words[i]}{rng.randrange(10, 10_000)}"  # a changed number: a PID, a count, a port


def make_pair(pool: list[str], rng: random.Random, width: int) -> tuple[str, str, float]:
    """A window of transcript words and an edited copy whose exact shingle Jaccard is near a target
    drawn from [0.5, 1.0]; the fewest edits of one seeded edit sequence that reach it (bisection)."""
    length = rng.randint(80, 700)
    start = rng.randrange(max(1, len(pool) - length))
    base = pool[start : start + length]
    target = rng.uniform(0.5, 1.0)
    seed = rng.randrange(2**32)
    a_text = " ".join(base)
    a_set = shingle_set(a_text, width)

    def edited(k: int) -> tuple[str, float]:
        r, words = random.Random(seed), list(base)
        for _ in range(k):
            _edit(words, pool, r)
        text = " ".join(words)
        return text, jaccard(a_set, shingle_set(text, width))

    lo, hi = 0, max(1, length)
    while lo < hi:
        mid = (lo + hi) // 2
        if edited(mid)[1] <= target:
            hi = mid
        else:
            lo = mid + 1
    b_text, j = edited(lo)
    return a_text, b_text, j


def decide(
    records: tuple[tuple[list[int], str, str], tuple[list[int], str, str]],
    cfg: PoolsConfig,
    bands: int,
    rows: int,
) -> bool:
    """The dedup stage's decision for two (signature, exact key, normalised text) records: band
    entries, group by key, bucket edges verified by exact shingle-set Jaccard."""
    fps = [
        Fingerprint(f"r{k}", "", "inhouse", "", "terminal", 1, ex, tuple(sig), "")
        for k, (sig, ex, _) in enumerate(records)
    ]
    texts = {f"r{k}": text for k, (_, _, text) in enumerate(records)}
    buckets: dict[str, list[Any]] = defaultdict(list)
    for fp in fps:
        for key, member in band_entries(fp, cfg, bands, rows):
            buckets[key].append(member)

    def member_shingles(member: Any) -> frozenset[str]:
        return build_shingle_set(texts[member[1]], cfg.dedup.shingle_words)

    return any(True for element in buckets.items() for _ in bucket_edges(element, cfg, member_shingles))


def decide_by_estimate(sig_a: list[int], sig_b: list[int], ex_a: str, ex_b: str, cfg: PoolsConfig) -> bool:
    """The earlier decision: `lsh_bands` candidates verified by estimated Jaccard."""
    if ex_a == ex_b:
        return True
    index = NearDuplicateIndex(cfg.dedup.threshold, cfg.dedup.num_perm)
    index.add("a", sig_a)
    return bool(index.query(sig_b))


def scores(truth: list[float], found: list[bool], threshold: float) -> tuple[float, float]:
    tp = sum(1 for j, f in zip(truth, found, strict=True) if f and j >= threshold)
    fp = sum(1 for j, f in zip(truth, found, strict=True) if f and j < threshold)
    fn = sum(1 for j, f in zip(truth, found, strict=True) if not f and j >= threshold)
    return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 1.0)


def per_bucket(truth: list[float], found: list[bool]) -> list[tuple[int, float]]:
    out = []
    for lo, hi in BUCKETS:
        hits = [f for j, f in zip(truth, found, strict=True) if lo <= j < hi or (hi >= 1.0 and j == 1.0)]
        out.append((len(hits), sum(hits) / len(hits) if hits else float("nan")))
    return out


def datatrove_minhash() -> Any | None:
    """datatrove's signature step with its defaults, or None (and why, on stderr) when it cannot load."""
    try:
        import xxhash
        from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature

        step = MinhashDedupSignature(output_folder="/tmp/dedup_curve_datatrove", config=MinhashConfig())
    except ImportError as exc:
        print(f"datatrove comparison skipped: {exc}", file=sys.stderr)
        return None
    # datatrove 0.10 hands xxhash a str, which xxhash >= 4 refuses; the same hash of its UTF-8 bytes.
    step._hash_func = lambda text: xxhash.xxh64_intdigest(text.encode("utf-8"))
    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument(
        "--threshold", type=float, default=None, help="default: the pools config's dedup.threshold"
    )
    ap.add_argument("--num-perm", type=int, default=None, help="default: the pools config's dedup.num_perm")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = PoolsConfig()
    if args.threshold is not None:
        cfg.dedup.threshold = args.threshold
    if args.num_perm is not None:
        cfg.dedup.num_perm = args.num_perm
    d = cfg.dedup
    rng = random.Random(args.seed)
    pool = transcript_words()
    t0 = time.perf_counter()
    pairs = [make_pair(pool, rng, d.shingle_words) for _ in range(args.pairs)]
    print(
        f"{len(pairs)} labelled pairs from {len(pool)} transcript words in {time.perf_counter() - t0:.1f} s"
    )
    truth = [j for _, _, j in pairs]
    texts = [normalise(t, fold_digits=False) for a, b, _ in pairs for t in (a, b)]

    t0 = time.perf_counter()
    sigs = signatures(texts, num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)
    bands, rows = candidate_bands(d.threshold, d.num_perm)
    for text, sig in zip(texts, sigs, strict=True):
        exact_key(text), band_keys(sig, bands, rows)
    ours_s = time.perf_counter() - t0
    exact = [exact_key(t) for t in texts]

    def record(k: int) -> tuple[list[int], str, str]:
        return sigs[k], exact[k], texts[k]

    found: dict[str, list[bool]] = {}
    t0 = time.perf_counter()
    found["exact-verified (build)"] = [
        decide((record(2 * i), record(2 * i + 1)), cfg, bands, rows) for i in range(len(pairs))
    ]
    decide_s = time.perf_counter() - t0
    found["estimate-verified (earlier)"] = [
        decide_by_estimate(sigs[2 * i], sigs[2 * i + 1], exact[2 * i], exact[2 * i + 1], cfg)
        for i in range(len(pairs))
    ]
    # What estimate verification alone decides (every pair compared, no banding): the ceiling of any
    # estimate-verified (b, r).
    found["estimate, all pairs"] = [
        exact[2 * i] == exact[2 * i + 1] or estimated_jaccard(sigs[2 * i], sigs[2 * i + 1]) >= d.threshold
        for i in range(len(pairs))
    ]
    dt = datatrove_minhash()
    dt_s = None
    if dt is not None:
        raw = [t for a, b, _ in pairs for t in (a, b)]
        dt.get_signature(dt.get_shingles(raw[0]))  # loads its spaCy tokeniser: one-time, not timed
        t0 = time.perf_counter()
        dt_sigs = [dt.get_signature(dt.get_shingles(t)) for t in raw]
        dt_s = time.perf_counter() - t0
        found["datatrove"] = [
            any(x == y for x, y in zip(dt_sigs[2 * i], dt_sigs[2 * i + 1], strict=True))
            for i in range(len(pairs))
        ]

    print(f"threshold {d.threshold}, num_perm {d.num_perm}, {d.shingle_words}-word shingles")
    old_b, old_r = lsh_bands(d.threshold, d.num_perm)
    print(
        f"  exact-verified (build): {bands} bands x {rows} rows, S-curve midpoint "
        f"{s_curve_midpoint(bands, rows):.3f}, candidates decided by exact shingle Jaccard"
    )
    print(
        f"  estimate-verified (earlier): {old_b} bands x {old_r} rows, S-curve midpoint "
        f"{s_curve_midpoint(old_b, old_r):.3f}, candidates decided by estimated Jaccard"
    )
    if dt is not None:
        print(
            f"  datatrove: 14 bands x 8 rows, S-curve midpoint {s_curve_midpoint(14, 8):.3f}, no verification"
        )
    names = list(found)
    print("\n| | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    ps = {n: scores(truth, found[n], d.threshold) for n in names}
    print(f"| precision at {d.threshold} | " + " | ".join(f"{ps[n][0]:.3f}" for n in names) + " |")
    print(f"| recall at {d.threshold} | " + " | ".join(f"{ps[n][1]:.3f}" for n in names) + " |")
    print("\n| exact Jaccard | pairs | " + " | ".join(f"detected ({n})" for n in names) + " |")
    print("|---|---|" + "---|" * len(names))
    buckets = {n: per_bucket(truth, found[n]) for n in names}
    for k, (lo, hi) in enumerate(BUCKETS):
        count = buckets[names[0]][k][0]
        print(
            f"| {lo:.2f}-{hi:.2f} | {count} | " + " | ".join(f"{buckets[n][k][1]:.2f}" for n in names) + " |"
        )
    docs = len(texts)
    print(f"\ndecisions (band entries, buckets, exact verification): {len(pairs) / decide_s:,.0f} pairs/s")
    print(f"signatures + band keys: worldline {docs / ours_s:,.0f} docs/s", end="")
    if dt_s is not None:
        print(f", datatrove {docs / dt_s:,.0f} docs/s ({dt_s / ours_s:.1f}x)")
    else:
        print(" (datatrove not installed: no comparison)")


if __name__ == "__main__":
    main()
