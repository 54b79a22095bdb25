"""What counts as a change of a GUI screen: one rule for the collectors' `state_changed` bit and the
pools' no-change filter.

A screen (a web ARIA snapshot, an AT-SPI tree, an Android hierarchy) changes when something other than
volatile content changes. Volatile content is what moves while nobody acts:
- clock times, dates and timestamps (`10:41:07`, `2026-12-01T00:36Z`, `Tue Dec 1`, `1 December 2026`);
- relative times (`5 minutes ago`, `just now`, `in 3 minutes`);
- durations and countdowns (`42 s`, `10sec`, `9 / 10sec`, `1d 02h 13m 09s`), and the number after a
  time label (`Time left: 9`, `Elapsed: 12`, `Ends in 3`);
- the whole content of a node whose role says it is time: ARIA `timer` and `marquee` in a web
  snapshot, ATK/AT-SPI `timer` in a desktop tree (`- timer [ref=e4]: 42`, `[7] timer "Countdown"
  value="42"`), including the nodes below it;
- the refs a web snapshot gives re-created elements (`[ref=e12]` vs `[ref=e57]` for the same node);
- the per-turn error line (`Last action error: ...`), which reports the action, not the screen.
Every other number is state (a cart count, a page number, "Episodes done: 3") and counts.
"""

from __future__ import annotations

import hashlib
import re

ERROR_LINE = "Last action error:"
PLACEHOLDER = "<t>"

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
    r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_DAY = r"(?:Mon(?:day)?|Tue(?:s(?:day)?)?|Wed(?:nesday)?|Thu(?:rs(?:day)?)?|Fri(?:day)?|Sat(?:urday)?|Sun(?:day)?)"
_UNIT = r"(?:ms|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|days?)"
_NUMBER = r"\d+(?:[.,]\d+)?"
_TIME_LABEL = (
    r"(?:time\s+(?:left|remaining|elapsed|spent)|remaining\s+time|elapsed(?:\s+time)?|countdown|timer|"
    r"uptime|(?:expires|ends|starts|closes|resets|refreshes|reloads)\s+in)"
)

VOLATILE_PATTERNS: tuple[re.Pattern[str], ...] = (
    # ISO timestamps and dates: 2026-12-01T00:36:17Z, 2026-12-01 00:36
    re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"),
    # clock times and timers: 12:00, 9:05:33, 3:04 PM, 00:42
    re.compile(r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[AaPp]\.?[Mm]\.?)?\b"),
    # written dates: Dec 1, 2026 / 1 December 2026 / Tue Dec 1 / Fri, Apr 21
    re.compile(rf"\b{_DAY}\b,?\s+(?:\d{{1,2}}\s+)?{_MONTH}\b\.?(?:\s+\d{{1,2}}\b)?(?:,?\s+\d{{4}})?"),
    re.compile(rf"\b\d{{1,2}}\s+{_MONTH}\b\.?(?:,?\s+\d{{4}}\b)?"),
    re.compile(rf"\b{_MONTH}\b\.?\s+\d{{1,2}}\b(?:,?\s+\d{{4}}\b)?"),
    # a time label and the figures after it: "Time left: 9 / 10sec", "Ends in 3 days"
    re.compile(rf"\b{_TIME_LABEL}\b\s*:?\s*[-+−]?\d[\d:.,/ ]*(?:\s?{_UNIT}\b)?", re.I),
    # countdowns in parts: 1d 02h 13m 09s, 02h 13m, 4m 05s
    re.compile(r"\b\d+\s?[dhms]\b(?:[\s,]*\d+\s?[dhms]\b)+", re.I),
    # "9 / 10sec", "3 of 10 seconds"
    re.compile(rf"\b{_NUMBER}\s*(?:/|of)\s*{_NUMBER}\s?{_UNIT}\b", re.I),
    # relative times and durations: 5 seconds ago, in 3 minutes, 42 s, 10sec, 1.5 hours
    re.compile(rf"\b(?:in\s+)?{_NUMBER}\s?(?:{_UNIT}|m|d)\s+ago\b", re.I),
    re.compile(rf"\b(?:in\s+)?{_NUMBER}\s?{_UNIT}\b", re.I),
    re.compile(r"\b(?:just now|a (?:second|minute|moment) ago)\b", re.I),
)

# A node whose role is time (ARIA timer / marquee in a snapshot line "- timer ...", AT-SPI "[7] timer").
_TIME_NODE = re.compile(r"^(\s*)(?:- (?:timer|marquee)\b|\[\d+\] timer\b)", re.I)
_INDENT = re.compile(r"^\s*")
_FIGURES = re.compile(r"[-+−]?\d+(?:[.,:]\d+)*")
_REF = re.compile(r"\[ref=[a-z]*\d+(?:e\d+)?\]")


def state_text(observation: str) -> str:
    """The observation minus the per-turn error line: the state no-change detection compares."""
    return "\n".join(line for line in observation.splitlines() if not line.startswith(ERROR_LINE))


def _mask_time_nodes(text: str) -> str:
    """Digits inside a timer / marquee node and the nodes below it replaced by the placeholder."""
    lowered = text.lower()
    if "timer" not in lowered and "marquee" not in lowered:
        return text
    out: list[str] = []
    inside: int | None = None  # the indent of the time node being masked
    for line in text.splitlines():
        indent = len(_INDENT.match(line).group(0))  # type: ignore[union-attr]
        if inside is not None and indent <= inside and line.strip():
            inside = None
        match = _TIME_NODE.match(line)
        if match:
            inside = len(match.group(1))
        out.append(_FIGURES.sub(PLACEHOLDER, line) if inside is not None else line)
    return "\n".join(out)


def stable_screen(text: str, extra: tuple[re.Pattern[str], ...] = ()) -> str:
    """`text` with volatile content replaced by a placeholder and whitespace runs collapsed: two
    screens are the same state when their stable screens are equal."""
    text = _REF.sub("[ref]", _mask_time_nodes(state_text(text)))
    for pattern in VOLATILE_PATTERNS + extra:
        text = pattern.sub(PLACEHOLDER, text)
    return " ".join(text.split())


def screen_hash(text: str, extra: tuple[re.Pattern[str], ...] = ()) -> str:
    """A short hash of the stable screen: equal hashes mean no effective change."""
    return hashlib.sha256(stable_screen(text, extra).encode("utf-8")).hexdigest()[:16]
