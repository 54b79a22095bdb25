"""Redaction is the cleaner's security boundary: every planted secret of the labelled corpus is gone from
every output (shards, quarantine, summary, checkpoint, LLM requests), no look-alike is touched, JSON
stays JSON, and each secret is counted once."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curation_agents import clean_run as clean_run_module
from curation_agents.clean_run import CleanRun
from curation_agents.denoise import render_transcript
from curation_agents.llm_stages import LLMCurator
from curation_agents.model import CleanConfig
from tests.helpers.redaction_corpus import build_corpus
from worldline.llm import SyncLLMClient
from worldline.redaction.detect import (
    _PII,
    PII_CLASSES,
    PemBlockFilter,
    _pii_possible,
    json_text_is_clean,
    redact,
    redact_json,
    redact_text_or_json,
)

SEEDS = range(6)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_planted_secret_is_removed_and_no_lookalike_is_touched(seed: int) -> None:
    for sample in build_corpus(seed):
        counts: Counter[str] = Counter()
        out = redact_text_or_json(sample.text, counts, sample.pii)
        for kind, secret in sample.secrets:
            assert secret not in out, f"{sample.name}: {kind} survived"
        for lookalike in sample.lookalikes:
            assert lookalike in out, f"{sample.name}: look-alike {lookalike!r} was damaged"
        if not sample.secrets:
            assert out == sample.text and not counts


@pytest.mark.parametrize("seed", SEEDS)
def test_text_redaction_of_json_keeps_it_json_and_removes_the_secrets(seed: int) -> None:
    for sample in build_corpus(seed):
        if not sample.is_json:
            continue
        out = redact(sample.text, None, sample.pii)
        json.loads(out)  # plain text substitution never crosses a string boundary
        structured = json.dumps(redact_json(json.loads(sample.text), None, sample.pii))
        for _, secret in sample.secrets:
            assert secret not in structured


def test_each_secret_is_counted_once_and_redaction_is_idempotent() -> None:
    for sample in build_corpus(7):
        counts: Counter[str] = Counter()
        once = redact_text_or_json(sample.text, counts, sample.pii)
        again: Counter[str] = Counter()
        assert redact_text_or_json(once, again, sample.pii) == once
        assert not again, f"{sample.name}: markers matched again: {again}"
        assert sum(counts.values()) <= len(sample.secrets) + 1, (sample.name, counts)


def test_pii_classes_are_configurable() -> None:
    text = "ping 203.0.113.7 from host, call +1 415-555-0132, mail ops@example.org"
    default = redact(text)
    assert "203.0.113.7" in default and "415-555-0132" not in default and "ops@example.org" not in default
    everything = redact(text, pii=frozenset({"email", "phone", "ip"}))
    assert "203.0.113.7" not in everything
    nothing = redact(text, pii=frozenset())
    assert nothing == text


def test_version_numbers_dates_and_loopback_are_not_pii() -> None:
    pii = frozenset({"email", "phone", "ip"})
    for text in ("listening on 127.0.0.1:8000", "2024-03-15 10:42:17", "numpy 1.26.4", "pid 12345 exited"):
        assert redact(text, pii=pii) == text


def _terminal_events(chunks: list[tuple[str, str]]) -> list[list[Any]]:
    return [[0.1 * i, code, data] for i, (code, data) in enumerate(chunks)]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_private_key_printed_in_a_terminal_is_removed_whole(newline: str) -> None:
    sample = next(s for s in build_corpus(3) if s.name.startswith("pem"))
    key = sample.text.split("cat ~/.ssh/id_key", 1)[1].strip().replace("\r\n", "\n").replace("\n", newline)
    body = key.replace("\r", "").split("\n")
    p = "dev@box:~$ "
    events = _terminal_events(
        [
            ("o", p),
            ("i", "cat id\r"),
            ("o", "cat id\r\n"),
            ("o", key.replace("\r\n", "\n").replace("\n", "\r\n")),
        ]
        + [("o", "\r\n" + p), ("i", "ls\r"), ("o", "ls\r\nkey\r\n" + p)]
    )
    counts: Counter[str] = Counter()
    items = render_transcript(events, 80, 24, counts)
    flat = json.dumps(items)
    for line in body[1:-1]:
        assert line not in flat
    assert counts["private_key"] == 1
    assert "ls" in flat and "key" in flat  # what follows the block is kept


def test_pem_filter_line_by_line_counts_once() -> None:
    pem = PemBlockFilter()
    counts: Counter[str] = Counter()
    lines = ["-----BEGIN RSA PRIVATE KEY-----", "MIIEabc", "def", "-----END RSA PRIVATE KEY-----", "after"]
    out = [pem.line(x, counts) for x in lines]
    assert out == ["[REDACTED:private_key]", "", "", "", "after"] and counts == {"private_key": 1}


def test_secret_typed_at_a_no_echo_prompt_never_reaches_the_transcript() -> None:
    events = _terminal_events(
        [
            ("o", "dev@box:~$ "),
            ("i", "sudo true\r"),
            ("o", "sudo true\r\n[sudo] password for dev: "),
            *[("i", ch) for ch in "Hunter2Secret"],
            ("i", "\r"),
            ("o", "\r\ndev@box:~$ "),
            ("i", "echo ok\r"),
            ("o", "echo ok\r\nok\r\ndev@box:~$ "),
        ]
    )
    items = render_transcript(events, 80, 24, Counter())
    assert "Hunter2Secret" not in json.dumps(items)
    at_prompt = [item[2] for item in items if item[0] == "i" and item[3].endswith("password for dev: ")]
    assert len(at_prompt) == len("Hunter2Secret") + 1 and set("".join(at_prompt)) == {"*", "\r"}
    assert items[-1][3] == "dev@box:~$ "  # the next prompt is intact


# -- end to end: nothing leaves the process unredacted --------------------------------------------------


def _write_corpus_inputs(root: Path) -> list[str]:
    """Agent logs and terminal recordings that carry the corpus' secrets; returns every planted secret."""
    root.mkdir()
    secrets: list[str] = []
    samples = build_corpus(11)
    for index, sample in enumerate(samples):
        secrets += [value for _, value in sample.secrets]
        messages = [
            {"role": "user", "content": f"task {index}: inspect the service"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "run", "arguments": json.dumps({"input": sample.text})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": sample.text},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c2", "type": "function", "function": {"name": "run", "arguments": '{"q": 1}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c2", "content": "done, " + sample.text[:200]},
        ]
        (root / f"log-{index}.json").write_text(json.dumps({"messages": messages}))
        header = {"version": 2, "width": 80, "height": 24}
        p = "dev@box:~$ "
        out = sample.text.replace("\r\n", "\n").replace("\n", "\r\n")
        events = [
            [0.0, "o", p],
            [0.5, "i", "cat notes\r"],
            [0.6, "o", "cat notes\r\n" + out + "\r\n" + p],
            [1.0, "i", "ls\r"],
            [1.1, "o", "ls\r\nnotes\r\n" + p],
        ]
        (root / f"rec-{index}.cast").write_text("\n".join(json.dumps(x) for x in [header, *events]) + "\n")
        # The secret typed a key at a time: echoed key by key, or typed ahead and echoed after Enter.
        typed = next((value for _, value in sample.secrets if "\n" not in value), None)
        if typed is not None:
            command = f"export {('TOKEN', 'API_KEY', 'DB_PASSWORD')[index % 3]}='{typed}'"
            echo_each = index % 2 == 0
            events = [[0.0, "o", p]]
            for k, key in enumerate(command):
                events.append([0.1 + 0.01 * k, "i", key])
                if echo_each:
                    events.append([0.105 + 0.01 * k, "o", key])
            end = 0.2 + 0.01 * len(command)
            events += [[end, "i", "\r"], [end + 0.01, "o", ("" if echo_each else command) + "\r\n" + p]]
            events += [[end + 0.5, "i", "ls\r"], [end + 0.6, "o", "ls\r\nnotes\r\n" + p]]
            lines = [header, *events]
            (root / f"typed-{index}.cast").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    # A record that fails: its detail must not quote a secret either.
    (root / "broken.jsonl").write_text(
        '{"messages": [{"role": "user", "content": "' + secrets[0] + '"}]}\n{oops\n'
    )
    return secrets


def test_no_secret_reaches_shards_quarantine_summary_checkpoint_or_llm(
    tmp_path: Path, fake_llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = _write_corpus_inputs(tmp_path / "in")
    fake_llm.set_default(
        lambda req: '{"domain": "terminal", "score": 0.9, "why": "shell", "reasons": ["ok"]}'
    )
    monkeypatch.setattr(
        clean_run_module,
        "_make_curator",
        lambda budget=None: LLMCurator(SyncLLMClient(fake_llm.config(cache_path=None))),
    )
    out = tmp_path / "out"
    config = CleanConfig(use_llm=True, unsure_band=1.0, pii=PII_CLASSES)
    summary = CleanRun([str(tmp_path / "in")], out, config, checkpoint="always", flush_every=1000).run()
    assert summary["accepted"] > 0 and fake_llm.requests
    blobs: list[str] = [json.dumps(r.body) for r in fake_llm.requests]
    for f in out.rglob("*"):
        if f.suffix == ".parquet":
            blobs.append(json.dumps(pq.read_table(f).to_pylist(), default=str))
        elif f.is_file():
            blobs.append(f.read_bytes().decode("latin-1"))
    blob = "\n".join(blobs)
    leaked = [s for s in secrets if s in blob]
    assert not leaked, f"{len(leaked)} secrets leaked, e.g. {leaked[:3]}"


_FRAGMENTS = [
    "password",
    "pass",
    "token",
    "key",
    "AKIA",
    "-----BEGIN",
    "://",
    "@",
    "a@b.io",
    "é",
    "/",
    "x",
    " ",
    "=",
    ":",
    "\n",
    '"',
    "+1 415-555-0132",
    "ghp_",
    "sk-",
    "Authorization: Bearer ",
    "0123456789abcdef" * 3,
]
_text = st.lists(st.sampled_from(_FRAGMENTS), max_size=8).map("".join)
_json_values = st.recursive(
    _text | st.integers(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(_json_values, st.booleans())
def test_a_clean_json_text_means_nothing_to_redact(value: Any, ascii_only: bool) -> None:
    source = json.dumps(value, ensure_ascii=ascii_only).encode()
    if json_text_is_clean(source):
        counts: Counter[str] = Counter()
        assert redact_json(value, counts) == value and not counts


_PII_FRAGMENTS = [
    "+",
    "(",
    ")",
    "-",
    ".",
    ":",
    " ",
    "@",
    "a",
    "f",
    "1",
    "12",
    "123",
    "1234",
    "555",
    "0132",
    "10.0.0.1",
    "::",
    "fe80",
    "%eth0",
    "[",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PII_FRAGMENTS), max_size=14).map("".join))
def test_pii_hints_never_hide_a_match(text: str) -> None:
    for kind in PII_CLASSES:
        if not _pii_possible(text, kind):
            assert _PII[kind].search(text) is None, kind


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["dev", "@", "box", "-", "1", ".", "io", ":", "~$ ", "git"]), max_size=10))
def test_the_email_hint_never_hides_an_address(fragments: list[str]) -> None:
    """Prompts hold `user@host:` on every line; the hint asks for a dot after the host's first label."""
    text = "".join(fragments)
    if not _pii_possible(text, "email"):
        assert _PII["email"].search(text) is None
