"""Long texts are redacted once and remembered: a repeat (the same page extracted again, the same file
read again) gives the same output and adds the same counts as redacting it afresh, from any thread,
and the memory stays bounded."""

from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

import worldline.redaction.detect as detect
from tests.helpers.redaction_corpus import generated_corpus
from worldline.redaction import redact


def long_texts(seed: int, n: int = 12) -> list[str]:
    """Pages of 4-40 KB built from the labelled corpus's samples (secrets, PII and look-alikes)."""
    rng = random.Random(seed)
    samples = [s.text for s in generated_corpus(seed)]
    return ["\n".join(rng.choice(samples) for _ in range(rng.randint(40, 300))) for _ in range(n)]


@pytest.mark.parametrize("seed", [0, 1])
def test_a_repeat_gives_the_output_and_counts_of_a_fresh_redaction(seed: int) -> None:
    for text in long_texts(seed):
        assert len(text) >= detect._MEMO_MIN_CHARS
        fresh: Counter[str] = Counter()
        expected = detect._redact_to_fixpoint(text, fresh, detect.DEFAULT_PII)
        for _ in range(3):
            counts: Counter[str] = Counter({"earlier": 1})
            assert redact(text, counts) == expected
            assert counts == fresh + Counter({"earlier": 1})
        assert redact(text) == expected  # without counts too
        pii = frozenset({"email", "ip"})
        other: Counter[str] = Counter()
        assert redact(text, other, pii) == detect._redact_to_fixpoint(text, Counter(), pii)


def test_threads_share_the_memo_and_get_the_same_results() -> None:
    texts = long_texts(7, n=6) * 4
    expected = {t: detect._redact_to_fixpoint(t, None, detect.DEFAULT_PII) for t in set(texts)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(redact, texts))
    assert results == [expected[t] for t in texts]


def test_the_memo_stays_under_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect, "_memo", detect.OrderedDict())
    monkeypatch.setattr(detect, "_memo_chars", 0)
    monkeypatch.setattr(detect, "_MEMO_MAX_CHARS", 200_000)
    for text in long_texts(3, n=30):
        redact(text)
        assert detect._memo_chars <= 200_000
        assert detect._memo_chars == sum(len(k[0]) + len(v[0]) for k, v in detect._memo.items())
    assert detect._memo
