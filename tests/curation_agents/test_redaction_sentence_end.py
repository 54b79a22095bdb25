"""PII at the end of a sentence: a phone or card number (or an IBAN) followed by the punctuation that
ends or interrupts prose is redacted whole, while a "." that continues a word (a version, a file name,
a decimal) keeps a look-alike intact. Values come from the labelled corpus's own generators."""

from __future__ import annotations

import random

import pytest

from tests.helpers.redaction_corpus import _card, _iban, _phone
from worldline.redaction import redact

ENDINGS = [".", "!", "?", ",", ";", ":", ")", ".)", '."', ".\n", "...", ". Thanks!", ".\tok"]
LEADS = {
    "phone": ["Their number is", "Call me on", "(reach us at", "phone"],
    "card": ["My card is", "Card:", "charged to credit card", "(Visa"],
    "iban": ["IBAN", "pay to", "account"],
}
GENERATORS = {"phone": _phone, "card": _card, "iban": _iban}


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_a_value_that_ends_a_sentence_is_redacted_whole(kind: str) -> None:
    rng = random.Random(f"sentence-end-{kind}")
    missed = []
    for _ in range(300):
        value = GENERATORS[kind](rng)
        text = f"{rng.choice(LEADS[kind])} {value}{rng.choice(ENDINGS)}"
        out = redact(text)
        digits = "".join(ch for ch in value if ch.isalnum())
        if f"[REDACTED:{kind}]" not in out or digits[-4:] in "".join(ch for ch in out if ch.isalnum()):
            missed.append((text, out))
    assert not missed, missed[:5]


@pytest.mark.parametrize(
    "text",
    [
        "version 1.2.3.4567 released",
        "see build-201-555-0143.tar.gz",
        "ratio 415-555-2671.5 of the total",
        "pi is 3.14159265358979.",
        "order 4111111111111111.pdf attached",
        "a hash 6011000990139424.b64 file",
        "listening on 415-555-2671:8080",
        "at 10:42:17.512 tick 4111111111111111:ok",
    ],
)
def test_a_dot_that_continues_a_word_keeps_the_lookalike(text: str) -> None:
    assert redact(text) == text
