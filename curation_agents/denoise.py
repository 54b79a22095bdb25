"""Denoise: render terminal recordings into what a person saw, normalise tool output, redact secrets.

Redaction happens as early as possible: the cleaning run redacts a decoded record before the graph sees it,
and ingest renders and redacts a terminal recording (`redact_record`) before returning, so neither the
graph state nor a checkpoint of it ever holds a secret. Denoise then normalises tool output
(`normalise_record`), which can reveal text that escape codes had split, and redacts that again;
markers never match twice, so each secret is counted once.

A terminal recording becomes a transcript: one item per input event carrying the rendered line under
the cursor at that moment and the lines finished since the previous item. Segment reads only this
transcript, never raw escape codes.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from curation_agents.model import ParsedRecord
from curation_agents.shell_prompts import NO_ECHO_PROMPT, split_after_no_echo
from curation_agents.terminal_screen import TerminalScreen, clean_tool_output
from worldline.redaction.detect import (
    DEFAULT_PII,
    PemBlockFilter,
    redact,
    redact_lines,
    redact_text_or_json,
)
from worldline.redaction.records import mask_unechoed_input

# A transcript item: [kind ("i" | "r" | "end"), seconds, input data, current line, finished lines, fullscreen]
TranscriptItem = list[Any]

_TYPED = re.compile(r"[^\r\n\x03\x04\x7f\b\x15\x17]")
# Lines under the cursor redacted together; small enough that one needle in a batch (which sends the
# batch line by line) costs little.
_CURSOR_LINE_BATCH = 32
# Printable keys typed after printable keys join the previous transcript item (see render_transcript);
# off, every input event has an item of its own (the reference the merged transcript is tested against).
_MERGE_TYPING = True


def render_transcript(
    events: list[list[Any]],
    width: int,
    height: int,
    counts: Counter[str],
    pii: frozenset[str] = DEFAULT_PII,
) -> list[TranscriptItem]:
    """Feed output events through the screen; emit an item at every input, resize and the end.

    Every line is redacted once when it is finished (counted); the line under the cursor is redacted
    without counting, since it is seen again when it is finished. Keys typed at a no-echo prompt are
    masked, so the secret never enters the transcript.
    """
    screen = TerminalScreen(width, height, keep_cleared=True)
    handed: list[str] = []  # a password prompt already handed out while its screen line went on
    transcript = _Transcript(pii)
    pem = transcript.pem
    last_t = 0.0
    typing: TranscriptItem | None = None  # the last item, while its keys are all printable
    joined: list[tuple[float, str, str]] = []  # (time, keys, line under the cursor) joined to it
    for t, code, data in events:
        last_t = t
        if code == "o":
            screen.feed(data)
        elif code == "i":
            taken = screen.take_finished()  # most keystrokes finish no line
            current = screen.current_line
            if (
                typing is not None
                and not taken
                and data.isprintable()
                and ": " not in current  # (a line split_after_no_echo keeps whole)
                and not screen.in_fullscreen
            ):
                # More printable keys after printable keys: segment adds them to the line being typed
                # and reads nothing else of their item, so they join the previous one (one item per
                # run of typing instead of one per key).
                keys = _typed(data, current, pii)
                typing[2] += keys
                joined.append((t, keys, current))
                continue
            if typing is not None and joined:
                transcript.unjoin_secret(typing, joined)
                joined = []
            finished = pem.lines(_lines_seen(taken, handed), counts, pii) if taken else []
            *before, current = split_after_no_echo(current)
            if before and before != handed:
                # The password prompt ends here though the screen line goes on: handed out once.
                handed[:] = before
                finished.extend(pem.lines(before, counts, pii))
            item = transcript.add_key(t, _typed(data, current, pii), current, finished, screen.in_fullscreen)
            printable = _MERGE_TYPING and data.isprintable() and data != "" and not screen.in_fullscreen
            typing = item if printable else None
        elif code == "r":
            cols, _, rows = str(data).partition("x")
            if cols.isdigit() and rows.isdigit():
                screen.width = max(2, min(int(cols), 1000))
                screen.height = max(2, min(int(rows), 500))
    if typing is not None and joined:
        transcript.unjoin_secret(typing, joined)
    items = transcript.items
    _redact_cursor_lines(transcript.unredacted, pii)
    finished = pem.lines(_lines_seen(screen.take_finished(), handed), counts, pii)
    *before, current = split_after_no_echo(screen.current_line)
    if before != handed:
        finished.extend(pem.lines(before, counts, pii))
    current = pem.line(current, counts, pii)
    items.append(["end", last_t, "", current, finished, screen.in_fullscreen])
    return items


class _Transcript:
    """The items render_transcript emits, with the lines under the cursor still to be redacted."""

    def __init__(self, pii: frozenset[str]) -> None:
        self.pii = pii
        self.pem = PemBlockFilter()
        self.items: list[TranscriptItem] = []
        # Items whose line under the cursor is still raw; emptied into redact_lines before anything returns.
        self.unredacted: list[TranscriptItem] = []

    def add_key(
        self, t: float, typed: str, current: str, finished: list[str], fullscreen: bool
    ) -> TranscriptItem:
        item = ["i", t, typed, current, finished, fullscreen]
        self.items.append(item)
        if self.pem.inside or "-----BEGIN" in current:
            item[3] = self.pem.peek(current, self.pii)
        else:
            # pem.peek here is redact(current): deferred, to be redacted a batch at a time.
            self.unredacted.append(item)
            if len(self.unredacted) >= _CURSOR_LINE_BATCH:
                _redact_cursor_lines(self.unredacted, self.pii)
        return item

    def unjoin_secret(self, run: TranscriptItem, joined: list[tuple[float, str, str]]) -> None:
        """Give the keys JOINED to RUN (the last item) their own items again when their text together
        is something redaction removes: a secret typed a key at a time never stands whole in the
        transcript (each key alone is too short to redact)."""
        if redact(run[2], None, self.pii) == run[2]:
            return
        run[2] = run[2][: len(run[2]) - sum(len(keys) for _, keys, _ in joined)]
        for t, keys, current in joined:
            self.add_key(t, keys, current, [], False)


def _typed(data: str, current: str, pii: frozenset[str]) -> str:
    """Keys as the transcript keeps them: masked after a no-echo prompt (CURRENT, the line under the
    cursor, ends in one), else redacted."""
    no_echo = current.rstrip().endswith(":") and NO_ECHO_PROMPT.search(current) is not None
    return _TYPED.sub("*", data) if no_echo else redact(data, None, pii)


def _redact_cursor_lines(items: list[TranscriptItem], pii: frozenset[str]) -> None:
    """Redact, uncounted, the line under the cursor of each of ITEMS (in place), then forget the items.

    One keystroke's line is the previous one plus a character, so consecutive lines share their
    pre-checks: redact_lines runs them once over the batch instead of once a keystroke.
    """
    for item, line in zip(items, redact_lines([item[3] for item in items], None, pii), strict=True):
        item[3] = line
    items.clear()


def _lines_seen(lines: list[str], handed: list[str]) -> list[str]:
    """Finished screen lines, a password prompt and the prompt printed on its line apart (less one
    handed out already)."""
    # Only a line with a colon and a prompt's end can hold both; most output lines are passed over here,
    # most often all at once (": " is in the joined lines only where it is in a line).
    if ": " not in "\n".join(lines) or not any(
        ": " in ln and ("$ " in ln or "# " in ln or "% " in ln or "> " in ln) for ln in lines
    ):
        return lines
    out: list[str] = []
    for line in lines:
        parts = split_after_no_echo(line)
        if len(parts) > 1 and parts[:1] == handed:
            parts, handed[:] = parts[1:], []
        out.extend(parts)
    return out


def redact_record(
    parsed: ParsedRecord, counts: Counter[str], pii: frozenset[str] = DEFAULT_PII, texts: bool = True
) -> ParsedRecord:
    """Render a terminal recording and redact every text field of a parsed record, in place.

    `texts=False` skips the text fields: for records parsed from an already redacted payload (the
    runner redacts decoded JSON before the graph sees it), whose strings are redacted already.
    """
    if parsed.get("events") is not None:
        # Input the terminal did not echo is a secret whatever the prompt said (or in which language).
        mask_unechoed_input(parsed["events"], counts)
        parsed["transcript"] = render_transcript(
            parsed["events"], parsed.get("width", 80), parsed.get("height", 24), counts, pii
        )
        parsed["events"] = []  # the transcript replaces the raw events; free them
    if texts:
        _each_text(parsed, lambda text: redact_text_or_json(text, counts, pii))
    return parsed


def normalise_record(
    parsed: ParsedRecord, counts: Counter[str], pii: frozenset[str] = DEFAULT_PII
) -> ParsedRecord:
    """Normalise tool output (CRLF, escapes rendered) and redact what that reveals, in place."""

    def clean(text: str) -> str:
        cleaned = clean_tool_output(text)
        return text if cleaned is text else redact_text_or_json(cleaned, counts, pii)

    _each_text(parsed, clean, thoughts=False)
    return parsed


def denoise_record(
    parsed: ParsedRecord, counts: Counter[str], pii: frozenset[str] = DEFAULT_PII
) -> ParsedRecord:
    """Both steps: render and redact, then normalise (what ingest and denoise do together)."""
    return normalise_record(redact_record(parsed, counts, pii), counts, pii)


def _each_text(parsed: ParsedRecord, fn: Any, thoughts: bool = True) -> None:
    if isinstance(parsed.get("task"), str):
        parsed["task"] = fn(parsed["task"])
    system = parsed.get("system_prompt")
    if isinstance(system, str):
        parsed["system_prompt"] = fn(system)
    for turn in parsed.get("turns", []):
        turn["action"] = fn(turn.get("action", ""))
        turn["observation"] = fn(turn.get("observation", ""))
        meta = turn.get("metadata", {})
        for key in ("thought", "reasoning", "narration_text"):
            if thoughts and isinstance(meta.get(key), str):
                meta[key] = fn(meta[key])
    metadata = parsed.get("metadata", {})
    for key, value in list(metadata.items()):
        if isinstance(value, str):
            metadata[key] = fn(value) if key == "initial_state" or thoughts else value
