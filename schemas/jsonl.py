"""JSON-lines input: each non-blank line of a file decoded as UTF-8 and parsed as JSON, with what is
wrong with a line that cannot be (the readers quarantine or report such a line, never stop on it)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JsonLine:
    """One non-blank line: its parsed value, or the reason it has none and the error that said so."""

    lineno: int
    value: Any = None
    reason: str | None = None  # None | "invalid_utf8" | "invalid_json"
    error: UnicodeDecodeError | json.JSONDecodeError | None = None


def json_lines(raw_lines: Iterable[bytes]) -> Iterator[JsonLine]:
    """Parse the lines of a file opened in binary mode, numbered from 1; blank lines are skipped."""
    for lineno, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield JsonLine(lineno, reason="invalid_utf8", error=exc)
            continue
        try:
            yield JsonLine(lineno, json.loads(text))
        except json.JSONDecodeError as exc:
            yield JsonLine(lineno, reason="invalid_json", error=exc)
