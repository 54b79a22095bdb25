"""Span labels: which characters of an observation replay identically, as an attribute table.

`worldline replay` runs a trajectory's recorded actions again from the same initial state and compares
each original observation with its replays. Every character of the original gets one label:

- `deterministic`: identical in every replay (a file read, a computation);
- `runtime`: differs, and lies in a runtime pattern (a PID, a time, an address, a temp path, a random
  id): only its format and a plausible value can be predicted;
- `variable`: differs otherwise (a race, an environment that changed underneath).

Labels live beside the trajectories in `OUT/span_labels.parquet`, keyed by trajectory id and turn
(Dolma's attributes: the trajectories are never rewritten, re-labelling is cheap). Offsets are
character offsets into the original observation text, half-open; the spans of one observation cover
it fully, in order, without overlap.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.atomic import atomic_write_parquet

SPAN_LABELS_NAME = "span_labels.parquet"
SPAN_LABELS_VERSION = "1.0.0"
SPAN_LABELS_METADATA_KEY = b"worldline.span_labels_version"
ZSTD_LEVEL = 3


class SpanLabel(StrEnum):
    """How a span of an observation behaves when the same actions run again."""

    DETERMINISTIC = "deterministic"
    RUNTIME = "runtime"
    VARIABLE = "variable"


@dataclass(frozen=True)
class Span:
    """Characters [start, end) of the original observation text, with their label.

    `pattern` names the runtime pattern a runtime span matched ("pid", "time", "address",
    "temp_path", "random_id"); None for the other labels."""

    start: int
    end: int
    label: SpanLabel
    pattern: str | None


@dataclass(frozen=True)
class TurnLabels:
    """The labels of one turn's observation and what its replays showed.

    `diverged`: the replay diverged structurally at this turn (the next prompt differs, an error
    appeared where the original had none, the sandbox failed); `divergence_cause` says which."""

    trajectory_id: str
    turn: int
    spans: tuple[Span, ...]
    replays: int
    diverged: bool
    divergence_cause: str | None


# --------------------------------------------------------------------------------------------------
# Runtime patterns
# --------------------------------------------------------------------------------------------------

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"

RUNTIME_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # Paths first: a temp path holds random letters and digits that the id patterns would split.
    ("temp_path", re.compile(r"(?:/tmp|/var/tmp|/dev/shm|/run/user/\d+)(?:/[^\s'\":;,()\[\]{}<>]*)?")),
    ("temp_path", re.compile(r"\btmp[._][A-Za-z0-9_.-]{4,}")),
    (
        "time",
        re.compile(
            # `date`: Wed Dec  2 11:35:45 UTC 2026; ISO 8601; `ls -l`: Dec  2 11:35 / Dec  2  2025
            rf"\b{_DAY},? +(?:\d{{1,2}} +{_MONTH}|{_MONTH} +\d{{1,2}})(?: +\d{{4}})?"
            r"(?: +\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?(?: *(?:[AP]M))?(?: +[A-Z]{2,5}|[+-]\d{4})?"
            r"(?: +\d{4})?"
            r"|\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
            rf"|\b{_MONTH} +\d{{1,2}} +(?:\d{{1,2}}:\d{{2}}(?::\d{{2}})?|\d{{4}})"
            r"|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
            r"|\b\d{1,2}:\d{2}\b"
            r"|\b1[5-9]\d{8}(?:\.\d+)?\b"  # Unix epoch seconds (2017-2033)
            r"|\b\d+(?:\.\d+)?(?:ns|us|µs|ms|s)\b"  # a measured duration
            r"|\b\d+m\d+(?:\.\d+)?s\b"  # `time`: 0m0.003s
        ),
    ),
    (
        "address",
        re.compile(
            r"\b0x[0-9a-fA-F]{4,}\b"
            r"|\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b"
            r"|\b(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}\b"
            r"|\blocalhost:\d{2,5}\b"
            r"|:\d{4,5}\b"  # a port
        ),
    ),
    (
        "random_id",
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
            r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b"  # hashes, container ids
            r"|\b(?=[A-Za-z0-9]*[A-Z])(?=[A-Za-z0-9]*[a-z])(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{8,}\b"
        ),
    ),
    (
        "pid",
        re.compile(
            r"(?<=pid)[ =:#]*\d+"
            r"|(?<=\] )\d{2,7}\b"  # a shell job: [1] 12345
            r"|^[ \t]*\d{1,7}[ \t]*$",  # a line holding only a number: `echo $$`
            re.IGNORECASE | re.MULTILINE,
        ),
    ),
)
"""(name, regex) of the content whose value the environment chooses at run time. A changed
character inside a match makes the whole match runtime; the first pattern listed wins a tie."""


def runtime_matches(text: str) -> list[tuple[int, int, str]]:
    """The runtime-pattern matches of TEXT as (start, end, pattern), earlier patterns first on overlap."""
    taken = [False] * len(text)
    found: list[tuple[int, int, str]] = []
    for name, regex in RUNTIME_PATTERNS:
        for m in regex.finditer(text):
            start, end = m.span()
            if end > start and not any(taken[start:end]):
                found.append((start, end, name))
                for i in range(start, end):
                    taken[i] = True
    found.sort()
    return found


# --------------------------------------------------------------------------------------------------
# Alignment and labelling
# --------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def _tokens(text: str, offset: int) -> tuple[list[str], list[tuple[int, int]]]:
    parts, spans = [], []
    for m in _TOKEN.finditer(text):
        parts.append(m.group())
        spans.append((offset + m.start(), offset + m.end()))
    return parts, spans


def _mark(changed: list[bool], start: int, end: int) -> None:
    for i in range(start, end):
        changed[i] = True


def _mark_insertion(changed: list[bool], spans: list[tuple[int, int]], at: int, lo: int, hi: int) -> None:
    """Text present only in the replay, inserted before token `at`: the original's neighbouring token
    (the one before, else the one after) is not identical in that run. Without tokens the original
    region [lo, hi) is empty and there is nothing to mark."""
    if at > 0:
        _mark(changed, *spans[at - 1])
    elif spans:
        _mark(changed, *spans[0])
    elif hi > lo:
        _mark(changed, lo, hi)


def _diff_tokens(original: str, o_lo: int, r_text: str, changed: list[bool]) -> None:
    o_tokens, o_spans = _tokens(original, o_lo)
    r_tokens, _ = _tokens(r_text, 0)
    matcher = difflib.SequenceMatcher(None, o_tokens, r_tokens, autojunk=False)
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1:
            _mark(changed, o_spans[i1][0], o_spans[i2 - 1][1])
        else:  # "insert": present only in the replay
            _mark_insertion(changed, o_spans, i1, o_lo, o_lo + len(original))


def changed_characters(original: str, replay: str) -> list[bool]:
    """Per character of ORIGINAL: whether it is not reproduced identically by REPLAY.

    Lines are aligned first (difflib), then the tokens (words, runs of whitespace, punctuation) of
    each block of replaced lines, so a changed PID marks the PID and not its whole line."""
    changed = [False] * len(original)
    if original == replay:
        return changed
    o_lines = original.splitlines(keepends=True)
    r_lines = replay.splitlines(keepends=True)
    o_starts = [0]
    for line in o_lines:
        o_starts.append(o_starts[-1] + len(line))
    matcher = difflib.SequenceMatcher(None, o_lines, r_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        o_lo, o_hi = o_starts[i1], o_starts[i2]
        r_text = "".join(r_lines[j1:j2])
        if o_hi > o_lo:
            _diff_tokens(original[o_lo:o_hi], o_lo, r_text, changed)
        elif original:  # lines only in the replay: mark the end of the line before (or the first char)
            at = max(0, o_lo - 1)
            changed[at] = True
    return changed


def label_observation(original: str, replays: Sequence[str]) -> list[Span]:
    """Label every character of ORIGINAL against its REPLAYS (see the module docstring).

    A runtime-pattern match that holds a changed character in any replay is one runtime span; a
    changed character outside every such match is variable; the rest is deterministic. With no
    replays nothing is known to differ, so everything is deterministic."""
    n = len(original)
    if n == 0:
        return []
    changed = [False] * n
    for replay in replays:
        for i, c in enumerate(changed_characters(original, replay)):
            if c:
                changed[i] = True
    # Per character: (label, pattern, match id), so two adjacent runtime matches stay two spans.
    kind: list[tuple[SpanLabel, str | None, int]] = [
        (SpanLabel.VARIABLE, None, -1) if c else (SpanLabel.DETERMINISTIC, None, -1) for c in changed
    ]
    if any(changed):
        for number, (start, end, name) in enumerate(runtime_matches(original)):
            if any(changed[start:end]):
                for i in range(start, end):
                    kind[i] = (SpanLabel.RUNTIME, name, number)
    spans: list[Span] = []
    start = 0
    for i in range(1, n + 1):
        if i == n or kind[i] != kind[start]:
            label, pattern, _ = kind[start]
            spans.append(Span(start, i, label, pattern))
            start = i
    return spans


def spans_of_label(labels: TurnLabels, label: SpanLabel) -> list[tuple[int, int]]:
    """The (start, end) offsets of the spans of one label, in order."""
    return [(s.start, s.end) for s in labels.spans if s.label == label]


def deterministic_share(labels: TurnLabels) -> float:
    """Share of the observation's characters labelled deterministic (1.0 for an empty observation)."""
    total = sum(s.end - s.start for s in labels.spans)
    if total == 0:
        return 1.0
    return sum(s.end - s.start for s in labels.spans if s.label == SpanLabel.DETERMINISTIC) / total


# --------------------------------------------------------------------------------------------------
# The attribute table
# --------------------------------------------------------------------------------------------------

SPAN_TYPE = pa.struct(
    [
        pa.field("start", pa.int64(), nullable=False, metadata={b"doc": b"First character (inclusive)."}),
        pa.field("end", pa.int64(), nullable=False, metadata={b"doc": b"End character (exclusive)."}),
        pa.field(
            "label",
            pa.string(),
            nullable=False,
            metadata={b"doc": b"How the span replays.", b"enum": ",".join(SpanLabel).encode()},
        ),
        pa.field("pattern", pa.string(), nullable=True, metadata={b"doc": b"Runtime pattern matched."}),
    ]
)

SPAN_LABELS_SCHEMA = pa.schema(
    [
        pa.field("trajectory_id", pa.string(), nullable=False, metadata={b"doc": b"Trajectory id."}),
        pa.field("turn", pa.int32(), nullable=False, metadata={b"doc": b"Turn index (0-based)."}),
        pa.field(
            "spans",
            pa.list_(pa.field("item", SPAN_TYPE, nullable=False)),
            nullable=False,
            metadata={b"doc": b"Labelled spans covering the original observation text, in order."},
        ),
        pa.field(
            "replays", pa.int32(), nullable=False, metadata={b"doc": b"How many replays were compared."}
        ),
        pa.field(
            "diverged", pa.bool_(), nullable=False, metadata={b"doc": b"Replay diverged structurally here."}
        ),
        pa.field("divergence_cause", pa.string(), nullable=True, metadata={b"doc": b"Why it diverged."}),
    ],
    metadata={SPAN_LABELS_METADATA_KEY: SPAN_LABELS_VERSION.encode()},
)


class SpanLabelsError(Exception):
    """A span-labels file cannot be read; the message names the file and what is wrong."""


def _record(row: TurnLabels) -> dict[str, Any]:
    return {
        "trajectory_id": row.trajectory_id,
        "turn": row.turn,
        "spans": [
            {"start": s.start, "end": s.end, "label": s.label.value, "pattern": s.pattern} for s in row.spans
        ],
        "replays": row.replays,
        "diverged": row.diverged,
        "divergence_cause": row.divergence_cause,
    }


def _from_record(rec: dict[str, Any]) -> TurnLabels:
    return TurnLabels(
        trajectory_id=rec["trajectory_id"],
        turn=int(rec["turn"]),
        spans=tuple(Span(s["start"], s["end"], SpanLabel(s["label"]), s["pattern"]) for s in rec["spans"]),
        replays=int(rec["replays"]),
        diverged=bool(rec["diverged"]),
        divergence_cause=rec["divergence_cause"],
    )


def write_span_labels(path: Path, rows: Iterable[TurnLabels]) -> None:
    """Write the label rows to PATH as one zstd Parquet file with SPAN_LABELS_SCHEMA, atomically
    (a reader sees the old file or the new one)."""
    table = pa.Table.from_pylist([_record(r) for r in rows], schema=SPAN_LABELS_SCHEMA)
    atomic_write_parquet(path, table, ZSTD_LEVEL)


def read_span_labels(path: Path) -> dict[tuple[str, int], TurnLabels]:
    """The label rows of PATH (a span-labels file, or a folder holding `span_labels.parquet`),
    keyed by (trajectory id, turn)."""
    path = Path(path)
    if path.is_dir():
        path = path / SPAN_LABELS_NAME
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise SpanLabelsError(f"{path}: not a readable span-labels file ({exc})") from exc
    missing = [n for n in SPAN_LABELS_SCHEMA.names if n not in table.schema.names]
    if missing:
        raise SpanLabelsError(f"{path}: not a span-labels file: missing column(s) {', '.join(missing)}")
    rows = (_from_record(rec) for rec in table.select(SPAN_LABELS_SCHEMA.names).to_pylist())
    return {(r.trajectory_id, r.turn): r for r in rows}
