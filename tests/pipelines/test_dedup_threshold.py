"""The configured dedup threshold is the Jaccard at which the pools dedup stage starts removing pairs.

Pairs with a known exact shingle-set Jaccard go through the stage's own functions (signatures,
band_entries, a group by band key, bucket_edges with its exact-Jaccard verification) with the
bands and rows the build uses (`candidate_bands`); `lsh_bands` (the indexes that only have
signatures) keeps its midpoint at the threshold."""

from __future__ import annotations

import random
import string
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.config import PoolsConfig
from pipelines.minhash import (
    candidate_bands,
    exact_key,
    lsh_bands,
    normalise,
    s_curve_midpoint,
    shingle_set,
    shingles,
    signatures,
)
from pipelines.stages.dedup import Fingerprint, band_entries, bucket_edges

WIDTH = 5


def _shingle_set(text: str) -> set[str]:
    return set(shingles(normalise(text, fold_digits=False), WIDTH))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b)


def _pair(rng: random.Random, lo: float, hi: float) -> tuple[str, str, float]:
    """A document of random words and an edited copy whose exact shingle Jaccard lies in [lo, hi]."""
    while True:
        words = [
            "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9)))
            for _ in range(rng.randint(100, 180))
        ]
        a = " ".join(words)
        sa = _shingle_set(a)
        target = rng.uniform(lo, hi)
        edited = list(words)
        j = 1.0
        for _ in range(len(words)):
            if j <= target:
                break
            i = rng.randrange(len(edited))
            if rng.random() < 0.7:
                edited[i] = "".join(rng.choices(string.ascii_lowercase, k=5))
            else:
                edited.insert(i, "".join(rng.choices(string.ascii_lowercase, k=4)))
            j = _jaccard(sa, _shingle_set(" ".join(edited)))
        if lo <= j <= hi:
            return a, " ".join(edited), j


def _detected(
    pairs: list[tuple[str, str, float]], cfg: PoolsConfig, bands_rows: tuple[int, int]
) -> list[bool]:
    d = cfg.dedup
    texts = [normalise(t, fold_digits=False) for a, b, _ in pairs for t in (a, b)]
    sigs = signatures(texts, num_perm=d.num_perm, seed=d.seed, width=WIDTH)
    sets = {f"r{k}": shingle_set(t, WIDTH) for k, t in enumerate(texts)}
    out = []
    for i in range(len(pairs)):
        buckets: dict[str, list[Any]] = defaultdict(list)
        for k in (2 * i, 2 * i + 1):
            fp = Fingerprint(
                f"r{k}", "", "inhouse", "", "terminal", 1, exact_key(texts[k]), tuple(sigs[k]), ""
            )
            for key, member in band_entries(fp, cfg, *bands_rows):
                buckets[key].append(member)
        found = (
            True for element in buckets.items() for _ in bucket_edges(element, cfg, lambda m: sets[m[1]])
        )
        out.append(any(found))
    return out


@pytest.mark.parametrize("threshold", [0.7, 0.8, 0.9])
def test_pairs_above_the_threshold_are_removed_and_pairs_below_are_kept(threshold: float) -> None:
    cfg = PoolsConfig()
    cfg.dedup.threshold = threshold
    bands_rows = candidate_bands(threshold, cfg.dedup.num_perm)
    rng = random.Random(int(threshold * 100))
    above = [_pair(rng, threshold + 0.05, min(1.0, threshold + 0.1)) for _ in range(120)]
    below = [_pair(rng, threshold - 0.15, threshold - 0.1) for _ in range(120)]
    hit_above = sum(_detected(above, cfg, bands_rows)) / len(above)
    hit_below = sum(_detected(below, cfg, bands_rows)) / len(below)
    assert hit_above >= 0.88, (threshold, bands_rows, hit_above)
    assert hit_below <= 0.03, (threshold, bands_rows, hit_below)


@settings(max_examples=60, deadline=None)
@given(
    threshold=st.floats(min_value=0.3, max_value=0.95),
    num_perm=st.sampled_from([64, 128, 256]),
)
def test_s_curve_midpoint_sits_at_or_just_below_the_threshold(threshold: float, num_perm: int) -> None:
    bands, rows = lsh_bands(threshold, num_perm)
    assert bands * rows <= num_perm
    midpoint = s_curve_midpoint(bands, rows)
    midpoints = [s_curve_midpoint(b, r) for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)]
    if any(threshold - 0.02 <= m <= threshold for m in midpoints):
        assert threshold - 0.02 <= midpoint <= threshold, (threshold, num_perm, bands, rows, midpoint)
    else:  # no banding has its midpoint in the window (0.3535 at 64): the highest one not above it
        assert midpoint == max(m for m in midpoints if m <= threshold), (threshold, num_perm, bands, rows)


@pytest.mark.parametrize("num_perm", [1, 2, 8, 16])
def test_few_permutations_still_give_bands_with_the_midpoint_not_above_the_threshold(num_perm: int) -> None:
    for threshold in [i / 20 for i in range(1, 21)]:
        bands, rows = lsh_bands(threshold, num_perm)
        assert 1 <= bands * rows <= num_perm
        if threshold >= 1 / num_perm:  # the lowest midpoint there is: num_perm bands of one row
            assert s_curve_midpoint(bands, rows) <= threshold, (threshold, num_perm, bands, rows)
