"""Property tests: every parser survives random and mutated input (no crash, no hang, bounded memory),
and the fast terminal renderer agrees with pyte on the sequences both implement."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import pyte
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from curation_agents.clean_run import GraphSession, record_ref
from curation_agents.model import CleanConfig, Limits
from curation_agents.reader import iter_records
from curation_agents.terminal_screen import TerminalScreen
from tests.curation_agents.test_curation_fastpaths import _secretish_text as secretish_text
from worldline.redaction.detect import redact

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SEEDS = [p for d in ("public", "terminal") for p in sorted((FIXTURES / d).iterdir()) if p.suffix != ".md"]
SEED_BYTES = {p.name: p.read_bytes()[:20_000] for p in SEEDS}
LIMITS = Limits(max_record_bytes=256 * 1024, max_json_depth=64, max_events=20_000, max_turns=2_000)
CONFIG = CleanConfig(limits=LIMITS)
RUNNER = GraphSession(CONFIG, None)
SETTINGS = settings(
    max_examples=60,
    deadline=None,
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


GZIP_HEADER = 10  # magic, method, flags, mtime, xfl, os


@st.composite
def damaged_gzip(draw: st.DrawFn) -> tuple[str, bytes]:
    """A gzip file with a valid header (so every reader takes the gzip path) and a damaged body: cut
    short anywhere after the header (inside the deflate stream or the trailer), followed by garbage,
    or with bytes of the deflate stream overwritten (invalid block types, bad codes: zlib errors)."""
    name = draw(st.sampled_from(sorted(SEED_BYTES)))
    plain = SEED_BYTES[name][: draw(st.integers(1, 20_000))]
    packed = bytearray(gzip.compress(plain, mtime=0))
    damage = draw(st.sampled_from(["cut", "garbage", "overwrite"]))
    if damage == "cut":
        packed = packed[: draw(st.integers(GZIP_HEADER, len(packed) - 1))]
    elif damage == "garbage":
        packed += draw(st.binary(min_size=1, max_size=64))
    else:
        for _ in range(draw(st.integers(1, 4))):
            packed[draw(st.integers(GZIP_HEADER, len(packed) - 9))] = draw(st.integers(0, 255))
    return f"{name}.gz", bytes(packed)


@SETTINGS
@given(damaged_gzip())
def test_damaged_gzip_bodies_never_crash_the_cleaner(tmp_path: Path, case: tuple[str, bytes]) -> None:
    name, data = case
    assert data[:4] == b"\x1f\x8b\x08\x00"  # a valid header: the readers decompress
    _clean_bytes(tmp_path, name, data)


def test_a_corrupt_deflate_stream_is_quarantined(tmp_path: Path) -> None:
    packed = bytearray(gzip.compress(SEED_BYTES["dev_basics.cast"], mtime=0))
    packed[GZIP_HEADER] = 0x06  # block type 3: reserved, invalid in any deflate stream
    assert _clean_bytes(tmp_path, "dev_basics.cast.gz", bytes(packed)) >= 1
    reasons = [
        r.failure.reason.value for r in iter_records(tmp_path / "dev_basics.cast.gz", LIMITS) if r.failure
    ]
    assert reasons == ["corrupt_input"]


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


LINE_EDITS = st.sampled_from(
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
)


def pyte_lines(data: str, width: int, height: int) -> list[str]:
    screen = pyte.Screen(width, height)
    pyte.Stream(screen).feed(data)
    lines = [line.rstrip() for line in screen.display]
    while lines and not lines[-1]:
        lines.pop()
    return lines


@st.composite
def output_with_a_long_line(draw: st.DrawFn, pieces: st.SearchStrategy[str]) -> tuple[int, str]:
    """(terminal width, output): up to 40 pieces with one line of text longer than the width among them."""
    width = draw(st.integers(8, 30))
    ops = draw(st.lists(pieces, max_size=40))
    long_text = draw(st.text(alphabet="abcxyz019", min_size=width + 1, max_size=3 * width))
    ops.insert(draw(st.integers(0, len(ops))), long_text)
    return width, "".join(ops)


# Line edits on lines longer than the width.
long_line_editing = output_with_a_long_line(
    st.one_of(st.text(alphabet="abc xyz019", min_size=1, max_size=24), LINE_EDITS)
)
# Appended text, colours and line ends only.
long_appended_lines = output_with_a_long_line(
    st.one_of(
        st.text(alphabet="abcxyz019", min_size=1, max_size=70),
        st.sampled_from(["\r\n", "\x1b[1;31m", "\x1b[0m", "\x1b[K"]),
    )
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(long_line_editing)
def test_fast_renderer_matches_pyte_on_line_editing(case: tuple[int, str]) -> None:
    """Lines longer than the recording's width are edited as the terminal edits them: a carriage
    return, backspace, erase or column move acts on the cursor's screen row (the forced wrap at the
    margin included), so our logical lines cut into rows of the width are pyte's screen at that width."""
    width, data = case
    height = len(data) // width + 2 * data.count("\r\n") + 4
    theirs = pyte_lines(data, width, height)
    assume(data.count("\r\n") <= 30 and len(theirs) > data.count("\r\n") + 1)
    ours = TerminalScreen(width, height)
    ours.feed(data)
    wrapped = [row for line in ours.take_all() for row in rows_of(line, width)]
    while wrapped and not wrapped[-1]:
        wrapped.pop()
    assert wrapped == theirs


def rows_of(line: str, width: int) -> list[str]:
    """A logical line as a terminal of `width` columns wraps it."""
    return [line[i : i + width].rstrip() for i in range(0, len(line), width)] or [""]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(long_appended_lines)
def test_fast_renderer_lines_are_what_pyte_wraps_at_the_width(case: tuple[int, str]) -> None:
    """Appended output, wrapped by pyte at the recording's width, shows the same text as our logical
    lines cut into rows of that width: wrapping changes the layout a person saw, not the text."""
    width, data = case
    ours = TerminalScreen(width, 60)
    ours.feed(data)
    wrapped = [row for line in ours.take_all() for row in rows_of(line, width)]
    theirs = pyte_lines(data, width, len(data) // width + data.count("\r\n") + 4)
    while wrapped and not wrapped[-1]:
        wrapped.pop()
    assert wrapped == theirs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=400), secretish_text))
@example("0@0.AA:0@0.AA")  # an scp-style remote whose path is an email: the path's marker keeps it one
@example("0@0.AA-0@0.AA")  # two addresses joined by a character a local part may hold: both, at once
@example("mysql-----BEGIN PRIVATE KEY----- -p@")  # a marker completes a key block: redacted to the end
def test_redaction_is_total_and_idempotent(text: str) -> None:
    """Random text rarely holds a secret, so half the inputs are built from secret-like fragments."""
    once = redact(text)
    assert redact(once) == once
