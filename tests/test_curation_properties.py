"""Property tests: every parser survives random and mutated input (no crash, no hang, bounded memory),
and the fast terminal renderer agrees with pyte on the sequences both implement."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pyte
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curation_agents.model import CleanConfig, Limits
from curation_agents.reader import iter_records
from curation_agents.redact import redact
from curation_agents.runner import GraphRunner, record_ref
from curation_agents.terminal_screen import TerminalScreen

FIXTURES = Path(__file__).parent / "fixtures"
SEEDS = [p for d in ("public", "terminal") for p in sorted((FIXTURES / d).iterdir()) if p.suffix != ".md"]
SEED_BYTES = {p.name: p.read_bytes()[:20_000] for p in SEEDS}
LIMITS = Limits(max_record_bytes=256 * 1024, max_json_depth=64, max_events=20_000, max_turns=2_000)
CONFIG = CleanConfig(limits=LIMITS)
RUNNER = GraphRunner(CONFIG, None)
SETTINGS = settings(
    max_examples=60,
    deadline=5000,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _clean_bytes(tmp: Path, name: str, data: bytes) -> int:
    """Run every record of a file through the graph; return how many outcomes came back."""
    path = tmp / name
    path.write_bytes(data)
    outcomes = 0
    for raw in iter_records(path, LIMITS):
        outcome = RUNNER.run(raw, record_ref(raw, path, name))
        assert outcome.accepted or outcome.quarantine, "a record vanished without an outcome"
        outcomes += 1
    return outcomes


@st.composite
def mutated_fixture(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(SEED_BYTES)))
    data = bytearray(SEED_BYTES[name])
    for _ in range(draw(st.integers(0, 8))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "dup"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "cut":
            del data[pos : pos + draw(st.integers(1, 2000))]
        elif op == "insert":
            data[pos:pos] = draw(
                st.sampled_from([b"[", b"{", b'"', b"\x1b[", b"\r", b"\x00", b"\n", b"]]]", b"\xff"])
            )
        elif op == "dup":
            data[pos:pos] = data[pos : pos + draw(st.integers(1, 500))]
    return name, bytes(data)


@SETTINGS
@given(mutated_fixture())
def test_mutated_real_files_never_crash_the_cleaner(tmp_path: Path, case: tuple[str, bytes]) -> None:
    name, data = case
    tracemalloc.start()
    try:
        _clean_bytes(tmp_path, name, data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024


HEADERS = [
    b"",
    b'{"version": 2, "width": 80, "height": 24}\n',
    b'{"version": 3, "term": {"cols": 80}}\n',
    b"Script started on x\n",
    b"[",
    b"{",
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}\n',
    b"\x1f\x8b",
]


@SETTINGS
@given(
    st.sampled_from(HEADERS),
    st.binary(max_size=4000),
    st.sampled_from(["x.cast", "x.json", "x.jsonl", "x.log"]),
)
def test_random_bytes_behind_every_header_never_crash(
    tmp_path: Path, header: bytes, body: bytes, name: str
) -> None:
    _clean_bytes(tmp_path, name, header + body)


def test_hostile_nesting_and_oversized_records_are_quarantined(tmp_path: Path) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    assert _clean_bytes(tmp_path, "deep.json", deep) == 1
    lines = b'{"messages": [{"role": "user", "content": "' + b"x" * (LIMITS.max_record_bytes + 10) + b'"}]}\n'
    (tmp_path / "big.jsonl").write_bytes(lines + b'{"a": 1}\n' + lines)
    reasons = [
        r.failure.reason.value if r.failure else None for r in iter_records(tmp_path / "big.jsonl", LIMITS)
    ]
    assert reasons == ["too_large", "unsupported_format", "too_large"]
    big_array = (
        b"["
        + b",".join([json.dumps({"conversations": [{"from": "human", "value": "q" * 1000}]}).encode()] * 400)
        + b"]"
    )
    (tmp_path / "arr.json").write_bytes(big_array)  # larger than the limit: streamed element by element
    records = list(iter_records(tmp_path / "arr.json", LIMITS))
    assert len(records) == 400 and all(r.format.value == "sharegpt" for r in records)


SIMPLE_OPS = st.lists(
    st.one_of(
        st.text(alphabet="abc xyz019", min_size=1, max_size=12),
        st.sampled_from(
            [
                "\r",
                "\b",
                "\r\n",
                "\x1b[K",
                "\x1b[1K",
                "\x1b[2K",
                "\x1b[2D",
                "\x1b[3C",
                "\x1b[P",
                "\x1b[32m",
                "\x1b[0m",
                "\x1b[5G",
            ]
        ),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=2000)
@given(SIMPLE_OPS)
def test_fast_renderer_matches_pyte_on_line_editing(ops: list[str]) -> None:
    data = "".join(ops)
    if data.count("\r\n") > 30:
        return
    ours = TerminalScreen(200, 60)
    ours.feed(data)
    screen = pyte.Screen(200, 60)
    stream = pyte.Stream(screen)
    stream.feed(data.replace("\r\n", "\r\n"))
    theirs = [line.rstrip() for line in screen.display]
    while theirs and not theirs[-1]:
        theirs.pop()
    assert ours.take_all() == theirs


@settings(max_examples=200, deadline=2000)
@given(st.text(max_size=400))
def test_redaction_is_total_and_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once
