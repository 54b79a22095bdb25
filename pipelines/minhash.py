"""Text fingerprints for deduplication and decontamination: normalisation, shingles, MinHash, LSH.

Signatures come from rensa (Rust MinHash, measured >= 10x datasketch's own MinHash in
benchmarks/pools_bench.py). Near-duplicate dedup finds candidates with high-recall bands
(`candidate_bands`: the S-curve's midpoint well below the threshold) and decides each candidate by the
exact Jaccard of the two shingle sets (`near_duplicate`), so the threshold means what it says
(benchmarks/dedup_curve.py measures the detection curve). `lsh_bands` (midpoint just below the
threshold, candidates verified by estimated Jaccard) serves the indexes that only have signatures.
Band keys are plain strings, so the banding runs as a Beam GroupByKey at any scale and the same code
builds an in-memory index for `pools verify`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache, partial

import numpy as np
import rensa

_WORD = re.compile(r"\w+")
_DIGITS = re.compile(r"\d+")


def normalise(text: str, fold_digits: bool = True) -> str:
    """Unicode-normalised lowercase words, digit runs folded to 0 unless `fold_digits` is False.

    Folding digits makes two runs that differ only in timestamps, PIDs or ports identical; dropping
    punctuation and layout makes the same content rendered as markdown or plain text identical.
    """
    text = unicodedata.normalize("NFKC", text).lower()
    words = " ".join(_WORD.findall(text))
    # Digit runs lie inside words (\d is part of \w), so folding after joining is the same, and cheaper.
    return _DIGITS.sub("0", words) if fold_digits else words


def shingles(normalised: str, width: int) -> list[str]:
    """Word n-grams; a text shorter than `width` words is one shingle (never an empty set)."""
    words = normalised.split()
    if len(words) <= width:
        return [" ".join(words)]
    return list(map(" ".join, zip(*(words[k:] for k in range(width)), strict=False)))


def shingle_set(normalised: str, width: int) -> frozenset[str]:
    """The set of `shingles` whose MinHash `signatures` estimate: exact Jaccard is taken over it."""
    return frozenset(shingles(normalised, width))


def exact_jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    common = sum(1 for x in small if x in large)
    return common / (len(a) + len(b) - common)


def exact_key(normalised: str) -> str:
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()[:32]


def signatures(texts: Sequence[str], *, num_perm: int, seed: int, width: int) -> list[list[int]]:
    """MinHash signatures of already normalised texts, computed in one Rust call per batch."""
    sets = [shingles(t, width) for t in texts]
    return [list(map(int, d)) for d in rensa.RMinHash.digests_from_token_sets(sets, num_perm, seed)]


def estimated_jaccard(a: Sequence[int], b: Sequence[int]) -> float:
    if not a:
        return 0.0
    return sum(1 for x, y in zip(a, b, strict=True) if x == y) / len(a)


@lru_cache(maxsize=8)
def _gauss_legendre(points: int) -> tuple[np.ndarray, np.ndarray]:
    nodes, weights = np.polynomial.legendre.leggauss(points)
    return nodes, weights


def _area(probability: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, degree: int) -> float:
    """Integral of a polynomial of at most `degree` over [lo, hi], exact up to rounding (Gauss-Legendre)."""
    nodes, weights = _gauss_legendre(degree // 2 + 1)
    s = (hi - lo) / 2 * nodes + (hi + lo) / 2
    return float((hi - lo) / 2 * np.dot(weights, probability(s)))


@lru_cache(maxsize=32)
def datasketch_bands(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows) minimising datasketch's objective: the false-positive area below the threshold
    plus the false-negative area above it, weighted 0.5 / 0.5 (datasketch's `_optimal_param`).

    The candidate probability 1 - (1 - s^r)^b is a polynomial of degree r*b <= num_perm, so
    Gauss-Legendre quadrature integrates it exactly; this gives datasketch's choice (tested) without
    importing scipy. Its S-curve midpoint can sit well above the threshold (0.845 for 0.8 and 128
    permutations), which is why `lsh_bands` does not use it.
    """
    min_error, best = float("inf"), (0, 0)
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            b, r = float(bands), float(rows)
            fp = _area(lambda s: 1 - (1 - s**r) ** b, 0.0, threshold, num_perm)  # noqa: B023
            fn = _area(lambda s: (1 - s**r) ** b, threshold, 1.0, num_perm)  # noqa: B023
            error = 0.5 * fp + 0.5 * fn
            if error < min_error:
                min_error, best = error, (bands, rows)
    return best


MIDPOINT_BELOW = 0.02
"""How far below the threshold the LSH S-curve's midpoint may sit (see `lsh_bands`)."""


def s_curve_midpoint(bands: int, rows: int) -> float:
    """The Jaccard at which two signatures become LSH candidates with probability ~1/2: (1/b)^(1/r)."""
    return float((1.0 / bands) ** (1.0 / rows))


@lru_cache(maxsize=32)
def lsh_bands(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows) whose S-curve midpoint (1/b)^(1/r) lies in [threshold - 0.02, threshold].

    Candidates are then kept only when their estimated Jaccard (share of equal signature slots) is
    >= threshold, so the LSH only has to find pairs at and above the threshold: of the (b, r) in that
    window, the one with the least false-negative area above the threshold wins (ties: fewer bands,
    less to shuffle). Where no (b, r) with b*r <= num_perm has its midpoint in the window (very few
    permutations), the highest midpoint not above the threshold is taken, else the lowest overall.
    """
    window: list[tuple[float, int, int]] = []
    below: list[tuple[float, int, int]] = []
    above: list[tuple[float, int, int]] = []
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            m = s_curve_midpoint(bands, rows)
            if m > threshold:
                above.append((m, bands, rows))
            elif m >= threshold - MIDPOINT_BELOW:
                b, r = float(bands), float(rows)
                fn = _area(lambda s: (1 - s**r) ** b, threshold, 1.0, num_perm)  # noqa: B023
                window.append((fn, bands, rows))
            else:
                below.append((-m, bands, rows))
    if window:
        _, bands, rows = min(window)
    elif below:
        _, bands, rows = min(below)
    else:
        _, bands, rows = min(above)
    return bands, rows


CANDIDATE_MISS = 0.05
"""The most a pair at exactly the threshold may miss being an LSH candidate (see `candidate_bands`)."""
PREFILTER_MARGIN = 0.15
"""Candidates whose estimated Jaccard is below threshold - this are dropped without exact work: at
128 permutations the estimate's standard deviation is ~0.035 at Jaccard 0.8, so a pair at the
threshold falls that far below it with probability ~1e-5."""


@lru_cache(maxsize=32)
def candidate_bands(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows), b*r <= num_perm, that make pairs at the threshold LSH candidates with
    probability >= 1 - CANDIDATE_MISS, and of those the fewest candidates at threshold -
    PREFILTER_MARGIN (pairs the estimate pre-filter drops anyway; ties: fewer bands, less to shuffle).

    Candidates are decided by exact Jaccard (`near_duplicate`), so the bands only have to find every
    pair at and above the threshold: their S-curve midpoint sits well below it (13 x 7, midpoint
    0.693, for 0.8 and 128 permutations). With too few permutations for that recall, the (b, r)
    with the highest candidate probability at the threshold is taken.
    """
    ok: list[tuple[float, int, int]] = []
    best: list[tuple[float, int, int]] = []
    low = max(threshold - PREFILTER_MARGIN, 0.0)
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            miss = (1 - threshold**rows) ** bands
            best.append((miss, bands, rows))
            if miss <= CANDIDATE_MISS:
                ok.append((1 - (1 - low**rows) ** bands, bands, rows))
    _, bands, rows = min(ok) if ok else min(best)
    return bands, rows


def near_duplicate(
    sig_a: Sequence[int] | np.ndarray,
    sig_b: Sequence[int] | np.ndarray,
    shingles_a: Callable[[], frozenset[str]],
    shingles_b: Callable[[], frozenset[str]],
    threshold: float,
) -> bool:
    """The decision for one LSH candidate pair: exact Jaccard of the shingle sets >= threshold.

    The estimated Jaccard (share of equal signature slots) only pre-filters: a pair below threshold
    - PREFILTER_MARGIN is dropped before its shingle sets are asked for (they are callables, read or
    computed only when needed)."""
    x, y = np.asarray(sig_a), np.asarray(sig_b)
    estimate = int(np.count_nonzero(x == y)) / len(x) if len(x) else 0.0
    if estimate < threshold - PREFILTER_MARGIN:
        return False
    return exact_jaccard(shingles_a(), shingles_b()) >= threshold


def band_keys(signature: Sequence[int], bands: int, rows: int) -> list[str]:
    """One key per band; two signatures are LSH candidates when they share any key."""
    keys = []
    for b in range(bands):
        chunk = signature[b * rows : (b + 1) * rows]
        digest = hashlib.blake2b(",".join(map(str, chunk)).encode(), digest_size=12).hexdigest()
        keys.append(f"{b}:{digest}")
    return keys


class NearDuplicateIndex:
    """An in-memory LSH index over signatures with candidate verification by estimated Jaccard."""

    def __init__(self, threshold: float, num_perm: int, bands_rows: tuple[int, int] | None = None) -> None:
        """`bands_rows` defaults to `lsh_bands(threshold, num_perm)`."""
        self.threshold = threshold
        self.bands, self.rows = bands_rows or lsh_bands(threshold, num_perm)
        self._buckets: dict[str, list[str]] = {}
        self._signatures: dict[str, list[int]] = {}

    def add(self, key: str, signature: list[int]) -> None:
        self._signatures[key] = signature
        for bk in band_keys(signature, self.bands, self.rows):
            self._buckets.setdefault(bk, []).append(key)

    def query(self, signature: list[int]) -> list[str]:
        """Keys whose signature has estimated Jaccard >= threshold with this one (sorted)."""
        found: set[str] = set()
        for bk in band_keys(signature, self.bands, self.rows):
            for key in self._buckets.get(bk, ()):
                if key not in found and estimated_jaccard(signature, self._signatures[key]) >= self.threshold:
                    found.add(key)
        return sorted(found)

    def __len__(self) -> int:
        return len(self._signatures)


class ExactNearDuplicateIndex:
    """An in-memory index deciding near duplicates as the pools dedup stage does: candidates from
    `candidate_bands`, decided by `near_duplicate` (exact Jaccard of the shingle sets)."""

    def __init__(self, threshold: float, num_perm: int, width: int) -> None:
        self.threshold = threshold
        self.width = width
        self.bands, self.rows = candidate_bands(threshold, num_perm)
        self._buckets: dict[str, list[str]] = {}
        # Texts are held zlib-compressed and decompressed only for candidates past the pre-filter.
        self._records: dict[str, tuple[list[int], bytes]] = {}
        self._shingles: dict[str, frozenset[str]] = {}

    def shingles(self, key: str) -> frozenset[str]:
        found = self._shingles.get(key)
        if found is None:
            text = zlib.decompress(self._records[key][1]).decode("utf-8")
            found = self._shingles[key] = shingle_set(text, self.width)
        return found

    def add(self, key: str, signature: list[int], normalised: str) -> None:
        self._records[key] = (signature, zlib.compress(normalised.encode("utf-8"), 1))
        for bk in band_keys(signature, self.bands, self.rows):
            self._buckets.setdefault(bk, []).append(key)

    def query(self, signature: list[int], normalised: str) -> list[str]:
        """Keys whose shingle set has exact Jaccard >= threshold with this text's (sorted)."""
        own: list[frozenset[str]] = []

        def mine() -> frozenset[str]:
            if not own:
                own.append(shingle_set(normalised, self.width))
            return own[0]

        found: set[str] = set()
        seen: set[str] = set()
        for bk in band_keys(signature, self.bands, self.rows):
            for key in self._buckets.get(bk, ()):
                if key in seen:
                    continue
                seen.add(key)
                other = self._records[key][0]
                if near_duplicate(signature, other, mine, partial(self.shingles, key), self.threshold):
                    found.add(key)
        return sorted(found)

    def __len__(self) -> int:
        return len(self._records)


def stable_hash(*parts: object) -> int:
    """A 64-bit hash of the parts, identical on every machine and process (seeded choices use it)."""
    text = "\x1f".join(map(str, parts))
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def union_find_clusters(
    edges: Iterable[tuple[str, str]], rank: Mapping[str, tuple[object, ...]]
) -> dict[str, str]:
    """Map every node in `edges` to its cluster representative: the node with the smallest rank."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            if rank[ra] <= rank[rb]:
                parent[rb] = ra
            else:
                parent[ra] = rb
    return {node: find(node) for node in list(parent)}
