"""The shared redaction core as a class-level detector: checksum validators, look-alikes that survive,
input a terminal did not echo, and recall on the generated corpus."""

from __future__ import annotations

import base64
import hashlib
import random
import uuid
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st
from stdnum import iban as stdnum_iban
from stdnum import luhn as stdnum_luhn

from tests.helpers.redaction_corpus import _card, _iban, generated_corpus, placeholders, program_messages
from worldline.redaction import redact, redact_text_or_json
from worldline.redaction.checksums import card_number_valid, iban_valid, luhn_valid, phone_number_possible
from worldline.redaction.records import redact_cast_events, unechoed_input_events, unechoed_texts


@given(st.text(alphabet="0123456789", min_size=1, max_size=30))
def test_luhn_agrees_with_stdnum(digits: str) -> None:
    assert luhn_valid(digits) == stdnum_luhn.is_valid(digits)


@settings(max_examples=200)
@given(st.integers(0, 2**32), st.integers(0, 18), st.integers(1, 9))
def test_a_card_number_with_one_digit_changed_is_not_a_card(seed: int, position: int, delta: int) -> None:
    card = _card(random.Random(seed))
    assert card_number_valid(card)
    digits = [i for i, c in enumerate(card) if c.isdigit()]
    i = digits[position % len(digits)]
    changed = card[:i] + str((int(card[i]) + delta) % 10) + card[i + 1 :]
    assert not card_number_valid(changed)  # Luhn catches every single-digit error


@settings(max_examples=200)
@given(st.integers(0, 2**32), st.integers(4, 40), st.integers(1, 9))
def test_an_iban_with_one_digit_changed_is_not_an_iban(seed: int, position: int, delta: int) -> None:
    iban = _iban(random.Random(seed))
    assert iban_valid(iban) and stdnum_iban.is_valid(iban.replace(" ", ""), check_country=False)
    digits = [i for i, c in enumerate(iban) if c.isdigit() and i >= 2]
    i = digits[position % len(digits)]
    changed = iban[:i] + str((int(iban[i]) + delta) % 10) + iban[i + 1 :]
    assert not iban_valid(changed)  # mod 97 catches every single substitution


def test_phone_numbers_are_checked_against_their_country_code() -> None:
    assert phone_number_possible("+49 30 12345678") and phone_number_possible("0044 20 7946 0958")
    assert not phone_number_possible("+49 1") and not phone_number_possible("+1 23")


_hex = st.binary(min_size=4, max_size=32).map(lambda b: hashlib.sha256(b).hexdigest())
_lookalike = st.one_of(
    _hex,
    _hex.map(lambda h: h[:7]),
    _hex.map(lambda h: h[:40]),
    _hex.map(lambda h: "sha256:" + h),
    st.integers(0, 2**128 - 1).map(lambda n: str(uuid.UUID(int=n))),
    st.binary(min_size=30, max_size=200).map(lambda b: base64.b64encode(b).decode()),
    st.binary(min_size=8, max_size=64).map(
        lambda b: "sha512-" + base64.b64encode(hashlib.sha512(b).digest()).decode()
    ),
    # Counts and sizes, and epoch times in s, ms, us and ns. (A 16-digit number with a Visa or
    # Mastercard prefix that passes Luhn is redacted as a card: nothing else tells it from one.)
    st.integers(0, 10**12).map(str),
    st.sampled_from([10**9, 10**12, 10**15, 10**18])
    .flatmap(lambda unit: st.integers(int(1.5 * unit), int(1.9 * unit)))
    .map(str),
    st.tuples(st.integers(0, 40), st.integers(0, 99), st.integers(0, 999)).map(
        lambda v: ".".join(map(str, v))
    ),
    st.tuples(st.integers(1, 20), st.integers(0, 9), st.integers(0, 30000), st.integers(0, 9999)).map(
        lambda v: ".".join(map(str, v))
    ),
    st.integers(1, 65535).map(lambda p: f"localhost:{p}"),
    st.integers(0, 10**9).map(lambda n: f"rows={n} elapsed={n % 997}ms"),
    st.datetimes().map(lambda d: d.isoformat()),
)


@settings(max_examples=400)
@given(st.lists(_lookalike, min_size=1, max_size=6))
def test_look_alikes_survive(items: list[str]) -> None:
    text = "\n".join(f"INFO step {i}: {item}" for i, item in enumerate(items))
    assert redact(text) == text


def _session(lines: list[tuple[str, bool]]) -> list[list[object]]:
    """An asciicast's events: each (text, echoed) typed a key at a time, then Enter."""
    events: list[list[object]] = [[0.0, "o", "$ "]]
    t = 0.1
    for text, echoed in lines:
        for ch in text:
            events.append([t, "i", ch])
            if echoed:
                events.append([t + 0.001, "o", ch])
            t += 0.01
        events.append([t, "i", "\r"])
        events.append([t + 0.001, "o", "\r\nok\r\n$ "])
        t += 0.01
    return events


_line = st.text(
    alphabet=st.characters(
        min_codepoint=33, max_codepoint=0x2FFF, blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp")
    ),
    min_size=4,
    max_size=30,
)


@settings(max_examples=200)
@given(st.lists(st.tuples(_line, st.booleans()), min_size=1, max_size=5))
def test_a_line_is_redacted_exactly_when_the_terminal_did_not_echo_it(lines: list[tuple[str, bool]]) -> None:
    events = _session(lines)
    assert unechoed_texts(events) == [text for text, echoed in lines if not echoed]
    counts: Counter[str] = Counter()
    out = redact_cast_events([list(e) for e in events], counts)
    typed = "".join(str(e[2]) for e in out if e[1] == "i")
    shown = [text for text, echoed in lines if echoed]
    for text, echoed in lines:
        if not echoed and not any(text in other for other in shown):
            assert text not in typed
    assert counts["unechoed_input"] == sum(not echoed for _, echoed in lines)


def test_keys_of_a_full_screen_program_are_not_input_to_redact() -> None:
    events = [[0.0, "o", "\x1b[?1049h"], [0.1, "i", "dd"], [0.2, "i", ":wq\r"], [0.3, "o", "\x1b[?1049l$ "]]
    assert unechoed_input_events(events) == set()


def test_a_pasted_line_echoed_after_its_enter_is_echoed() -> None:
    events = [
        [0.0, "o", "$ "],
        [0.1, "i", "ls -la /tmp\r"],
        [0.2, "o", "\x1b[?2004l\rls -la /tmp\r\ntotal 0\r\n$ "],
    ]
    assert unechoed_input_events(events) == set()


def test_generated_corpus_recall_and_look_alike_damage() -> None:
    caught = total = damaged = looks = 0
    for seed in range(2):
        for sample in generated_corpus(seed):
            out = redact_text_or_json(sample.text, Counter(), sample.pii)
            total += len(sample.secrets)
            caught += sum(value not in out for _, value in sample.secrets)
            looks += len(sample.lookalikes)
            damaged += sum(la not in out for la in sample.lookalikes)
    assert caught / total >= 0.99, (caught, total)
    assert damaged / looks <= 0.01, (damaged, looks)


def test_program_messages_and_placeholders_survive() -> None:
    rng = random.Random(7)
    for text in (*program_messages(rng), *placeholders(rng)):
        assert redact_text_or_json(text) == text, text


def test_the_same_syntax_with_a_credential_is_still_redacted() -> None:
    for text, secret in [
        ("Your password is hunter2!!", "hunter2"),
        ("PASSWORD=changeme", "changeme"),
        ("password: S3cr3t-Pa55", "S3cr3t-Pa55"),
        ("passwd: hunter2", "hunter2"),
        ("backup --password hunter2", "hunter2"),
        ("token: expired-2024x9", "expired-2024x9"),
        ('{"password": "hunter2x"}', "hunter2x"),
        ("das Passwort ist Geheim42", "Geheim42"),
    ]:
        assert secret not in redact_text_or_json(text), text


def test_a_message_after_a_credential_word_is_not_its_value() -> None:
    for text in [
        "passwd: password updated successfully",
        "error: password: too short",
        "Password: incorrect",
        '{"password": "too short"}',
        "passwd : mot de passe mis à jour avec succès",
        "/etc/passwd:1:root:x:0:0:root:/root:/bin/bash",
        "file:///etc/passwd is refused: scheme file is not allowed",
        "The token is re-issued every hour.",
    ]:
        assert redact_text_or_json(text) == text, text
