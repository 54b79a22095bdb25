"""Word n-gram containment: is (most of) one text inside another?

Jaccard similarity misses a short evaluation turn pasted inside a long training turn: the sets
differ in size, so their Jaccard is low although every n-gram of the evaluation turn is there.
Containment |E ∩ T| / |E| of the evaluation text's word n-grams E in the training text's T catches
it (13-grams, as the GPT-3 paper's and datatrove's decontamination use). Texts are normalised first
(`pipelines.minhash.normalise`). A text with fewer than n words but at least `min_words` contributes
one "gram", the hash of the whole text, so it matches exact (normalised) repeats only.

N-grams are 64-bit polynomial hashes over CRC32 word ids, computed with numpy: stable across
processes and machines (no Python `hash`), so an index built in the driver matches on any worker.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

_BASE = np.uint64(0x100000001B3)


def whole_text_hash(normalised: str) -> int:
    return int.from_bytes(hashlib.blake2b(normalised.encode("utf-8"), digest_size=8).digest(), "big")


def ngram_hashes(normalised: str, n: int, min_words: int) -> np.ndarray:
    """Sorted unique uint64 hashes of the text's word n-grams (see the module docstring)."""
    words = normalised.split()
    if len(words) < n:
        if len(words) < min_words:
            return np.empty(0, dtype=np.uint64)
        return np.array([whole_text_hash(normalised)], dtype=np.uint64)
    ids = np.fromiter((zlib.crc32(w.encode("utf-8")) for w in words), dtype=np.uint64, count=len(words))
    m = len(words) - n + 1
    h = np.zeros(m, dtype=np.uint64)
    for k in range(n):
        h = h * _BASE + ids[k : k + m]  # uint64 arithmetic wraps: a hash, not a number
    return np.unique(h)


def text_grams(normalised: str, n: int, min_words: int) -> np.ndarray:
    """What a training text offers to contain: its n-grams and the hash of the whole text."""
    grams = ngram_hashes(normalised, n, 0)
    return np.union1d(grams, np.array([whole_text_hash(normalised)], dtype=np.uint64))


class ContainmentIndex:
    """Evaluation texts by their n-grams; `contained_in` finds those (mostly) inside a training text."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.keys: list[str] = []
        self.totals: list[int] = []
        self._owners: dict[int, list[int]] = {}
        self._sorted: np.ndarray | None = None

    def add(self, key: str, grams: Sequence[int] | np.ndarray) -> None:
        unique = np.unique(np.asarray(grams, dtype=np.uint64))
        if not len(unique):
            return
        index = len(self.keys)
        self.keys.append(key)
        self.totals.append(len(unique))
        for g in unique.tolist():
            self._owners.setdefault(g, []).append(index)
        self._sorted = None

    def __len__(self) -> int:
        return len(self.keys)

    def contained_in(self, grams: np.ndarray) -> str:
        """The key of the evaluation text whose n-grams lie in `grams` at >= threshold (best first,
        then smallest key), or "" when none does."""
        if not self.keys or not len(grams):
            return ""
        if self._sorted is None:
            self._sorted = np.array(sorted(self._owners), dtype=np.uint64)
        hits = grams[np.isin(grams, self._sorted, assume_unique=True)]
        if not len(hits):
            return ""
        counts: Counter[int] = Counter()
        for g in hits.tolist():
            counts.update(self._owners[g])
        best = [
            (c / self.totals[i], self.keys[i])
            for i, c in counts.items()
            if c / self.totals[i] >= self.threshold
        ]
        if not best:
            return ""
        return min(best, key=lambda fk: (-fk[0], fk[1]))[1]

    @classmethod
    def of(
        cls, threshold: float, entries: Iterable[tuple[str, Sequence[int] | np.ndarray]]
    ) -> ContainmentIndex:
        index = cls(threshold)
        for key, grams in entries:
            index.add(key, grams)
        return index
