"""Checking a predicted observation against replay span labels of the real one.

When `worldline replay` has labelled a turn's observation (schemas/span_labels.py), the labels say
which characters are deterministic (identical in every replay) and which are runtime or variable.
A prediction then matches when it equals the real text on every deterministic span and each other
span has the format of the real value (and, for a PID, a value in 1..pid_max). The text is compared
after the same normalisation as the rule verifier's (line endings, trailing spaces, surrounding
blank lines).

A turn's check travels as plain JSON segments (`span_segments`), so it fits in an RL row's rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schemas.span_labels import Span, SpanLabel, TurnLabels

PID_MAX = 4_194_304  # Linux's pid_max ceiling
_PLACEHOLDER_BASE = 0xE000  # Unicode private use area: one code point stands for one labelled span
_PLACEHOLDER_MAX = 6400
_PLACEHOLDERS = re.compile(f"[{chr(_PLACEHOLDER_BASE)}-{chr(_PLACEHOLDER_BASE + _PLACEHOLDER_MAX - 1)}]")
_PIECE = re.compile(r"\d+|[A-Za-z0-9]+|[ \t]+|\s+|.", re.DOTALL)


def normalise_text(text: str) -> str:
    """Line endings to \\n, trailing spaces per line removed, surrounding blank lines removed."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def labels_cover(text: str, labels: TurnLabels) -> bool:
    """Whether the labels' spans cover TEXT exactly, in order (labels of another text do not)."""
    pos = 0
    for span in labels.spans:
        if span.start != pos or span.end < span.start:
            return False
        pos = span.end
    return pos == len(text) and len(labels.spans) < _PLACEHOLDER_MAX


def span_format(value: str) -> str:
    """A regex of the format of VALUE: each digit run is 1 to len+1 digits (at least len-1), each
    alphanumeric run any alphanumeric run, blanks any blanks, other characters themselves."""
    parts: list[str] = []
    for m in _PIECE.finditer(value):
        piece = m.group()
        if piece.isdigit():
            parts.append(rf"\d{{{max(1, len(piece) - 1)},{len(piece) + 1}}}")
        elif piece.isalnum() and piece.isascii():
            parts.append("[A-Za-z0-9]+")
        elif piece.strip(" \t") == "":
            parts.append("[ \\t]*")
        elif piece.isspace():
            parts.append("\\s+")
        else:
            parts.append(re.escape(piece))
    return "".join(parts)


def _format_segment(span: Span, value: str) -> dict[str, Any]:
    segment: dict[str, Any] = {"label": span.label.value, "format": span_format(value)}
    if span.pattern:
        segment["pattern"] = span.pattern
    if span.pattern == "pid":
        segment["min"], segment["max"] = 1, PID_MAX
    return segment


_STRIPPED_TAIL_MAX = 4  # trailing characters a copy of the observation may have lost ("\n", "\r\n", spaces)


def fitted_labels(text: str, labels: TurnLabels) -> TurnLabels | None:
    """LABELS fitted to TEXT: as they are when they cover it; clipped at its end when TEXT is the
    labelled observation with its trailing white space stripped (an AgentWorldBench response, a judge's
    ground truth), which the normalised comparison ignores anyway; else None."""
    if labels_cover(text, labels):
        return labels
    end = labels.spans[-1].end if labels.spans else 0
    if not text or not 0 < end - len(text) <= _STRIPPED_TAIL_MAX:
        return None
    spans = tuple(
        Span(s.start, min(s.end, len(text)), s.label, s.pattern) for s in labels.spans if s.start < len(text)
    )
    clipped = TurnLabels(
        labels.trajectory_id, labels.turn, spans, labels.replays, labels.diverged, labels.divergence_cause
    )
    return clipped if labels_cover(text, clipped) else None


def span_segments(text: str, labels: TurnLabels) -> list[dict[str, Any]]:
    """The check of TEXT under LABELS as segments: {"exact": text} for deterministic content (after
    normalisation), {"label", "format"[, "pattern", "min", "max"]} for each runtime or variable span.
    Empty when the labels do not cover TEXT (or TEXT holds the private-use characters this uses)."""
    fitted = fitted_labels(text, labels)
    if fitted is None or _PLACEHOLDERS.search(text):
        return []
    labels = fitted
    marked: list[str] = []
    others: list[dict[str, Any]] = []
    for span in labels.spans:
        value = text[span.start : span.end]
        if span.label == SpanLabel.DETERMINISTIC:
            marked.append(value)
        else:
            marked.append(chr(_PLACEHOLDER_BASE + len(others)))
            others.append(_format_segment(span, value))
    segments: list[dict[str, Any]] = []
    exact: list[str] = []
    for ch in normalise_text("".join(marked)):
        k = ord(ch) - _PLACEHOLDER_BASE
        if 0 <= k < len(others):
            if exact:
                segments.append({"exact": "".join(exact)})
                exact = []
            segments.append(others[k])
        else:
            exact.append(ch)
    if exact:
        segments.append({"exact": "".join(exact)})
    return segments


def has_checkable_content(segments: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the segments hold deterministic text (all-runtime content checks nothing exactly)."""
    return any(str(s.get("exact", "")).strip() for s in segments)


@dataclass(frozen=True)
class SpanCheck:
    """The outcome of a span check: `passed`, and `reason` naming what failed."""

    passed: bool
    reason: str
    deterministic_chars: int
    other_spans: int


def check_segments(prediction: str, segments: Sequence[Mapping[str, Any]]) -> SpanCheck:
    """Check PREDICTION (normalised here) against SEGMENTS: exact text on deterministic segments, the
    format (and range, where given) on the others."""
    text = normalise_text(prediction)
    parts: list[str] = []
    formats: list[Mapping[str, Any]] = []
    exact_chars = 0
    for segment in segments:
        if "exact" in segment:
            parts.append(re.escape(str(segment["exact"])))
            exact_chars += len(str(segment["exact"]))
        else:
            parts.append(f"({segment.get('format', '.*')})")
            formats.append(segment)
    try:
        regex = re.compile("".join(parts), re.DOTALL)
    except re.error as error:
        return SpanCheck(False, f"invalid segment format ({error})", exact_chars, len(formats))
    match = regex.fullmatch(text)
    if match is None:
        reason = "deterministic text or the format of a runtime/variable span differs"
        return SpanCheck(False, reason, exact_chars, len(formats))
    for k, segment in enumerate(formats):
        if "min" not in segment and "max" not in segment:
            continue
        values = [float(v) for v in re.findall(r"\d+", match.group(k + 1))]
        low, high = float(segment.get("min", float("-inf"))), float(segment.get("max", float("inf")))
        bad = [v for v in values if not low <= v <= high]
        if bad or not values:
            what = f"{bad[0]:g} outside [{low:g}, {high:g}]" if bad else "no number"
            return SpanCheck(
                False, f"{segment.get('pattern') or 'runtime'} span: {what}", exact_chars, len(formats)
            )
    return SpanCheck(True, "matches", exact_chars, len(formats))


def match_with_labels(prediction: str, reference: str, labels: TurnLabels) -> SpanCheck | None:
    """Check PREDICTION against REFERENCE under its LABELS; None when the labels do not cover it."""
    segments = span_segments(reference, labels)
    if not segments and reference:
        return None
    return check_segments(prediction, segments)
