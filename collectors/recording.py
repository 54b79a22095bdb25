"""Turning terminal bytes into observation text, and recording sessions as asciicast v2 files.

A recording is redacted before it is published (worldline.redaction): secrets in the output stream,
and input the terminal did not echo. What was typed without echo stays in memory for the collection job to
take out of the trajectory (`take_redactions`); it is never written anywhere.
"""

from __future__ import annotations

import codecs
import json
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import IO

import pyte

from schemas.atomic import publish_file, temp_path
from worldline.redaction.records import redact_cast_file

# Per published recording: (texts typed without echo, redactions per class), until the collection job takes them.
_REDACTIONS: dict[Path, tuple[list[str], Counter[str]]] = {}
_REDACTIONS_LOCK = threading.Lock()


def take_redactions(path: Path) -> tuple[list[str], Counter[str]]:
    """What redacting the recording at PATH removed: the texts typed without echo (to be taken out of
    the trajectory too) and the count per class. Forgotten once taken."""
    with _REDACTIONS_LOCK:
        return _REDACTIONS.pop(path, ([], Counter()))


def remove_unpublished(folder: Path) -> int:
    """Delete the recordings a killed run left half-written in FOLDER (never redacted, never
    published); returns how many. Their episodes were not published either, so they run again."""
    removed = 0
    for stale in folder.glob(".*.cast*.tmp") if folder.is_dir() else []:  # schemas.atomic's temporary names
        stale.unlink(missing_ok=True)
        removed += 1
    return removed


_ALT_SCREEN = re.compile(rb"\x1b\[\?(?:1049|1047|47)([hl])")


def line_output_text(data: bytes) -> str:
    """What a terminal shows for line-oriented output: \\r overwrites, \\b moves back, erase-line
    truncates, colours and other control sequences vanish. Lines are logical (never wrapped), so a file
    printed by `cat` comes back exactly as it is on disk."""
    text = data.decode("utf-8", "replace")
    lines: list[list[str]] = [[]]
    col = 0
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\x1b":
            i, col = _apply_escape(text, i, lines[-1], col)
            continue
        line = lines[-1]
        if ch == "\n":
            lines.append([])
            col = 0
        elif ch == "\r":
            col = 0
        elif ch == "\b":
            col = max(0, col - 1)
        elif ch == "\t" or ch >= " ":
            if col < len(line):
                line[col] = ch
            else:
                line.extend(" " * (col - len(line)))
                line.append(ch)
            col += 1
        # Any other C0 control (BEL, SO/SI, ...) has no visible effect.
        i += 1
    return "\n".join("".join(line) for line in lines)


def _apply_escape(text: str, i: int, line: list[str], col: int) -> tuple[int, int]:
    """Consume one escape sequence at text[i]; apply the few that change a line's visible text."""
    n = len(text)
    if i + 1 >= n:
        return n, col
    kind = text[i + 1]
    if kind == "[":  # CSI: parameters then a final byte in @..~
        j = i + 2
        while j < n and not ("@" <= text[j] <= "~"):
            j += 1
        if j >= n:
            return n, col
        params, final = text[i + 2 : j], text[j]
        count = int(params) if params.isdigit() else 1
        if final == "K":
            if params in ("", "0"):
                del line[col:]
            elif params == "2":
                line.clear()
        elif final == "C":
            col += count
        elif final == "D":
            col = max(0, col - count)
        elif final == "P":  # delete characters at the cursor (readline uses it when editing)
            del line[col : col + count]
        return j + 1, col
    if kind == "]":  # OSC: until BEL or ST
        j = i + 2
        while j < n and text[j] != "\x07" and not (text[j] == "\x1b" and j + 1 < n and text[j + 1] == "\\"):
            j += 1
        return (j + 1 if j < n and text[j] == "\x07" else j + 2), col
    if kind in "()*+":  # charset designation takes one more byte
        return i + 3, col
    return i + 2, col


def screen_text(data: bytes, cols: int, *, prefix: str = "", keep_prefix: bool = False) -> str:
    """What a terminal `cols` wide shows after `data`, as text: one emulator (pyte) applies cursor
    movement (relative and absolute), erases, overwrites and wrapping at the terminal's width. `prefix`
    is what the cursor's row already showed (the prompt) so the first line wraps where it did on
    screen; it is left out of the result unless `keep_prefix` (an observation starts at the row the
    action was typed on, docs/observations.md). Rows are joined with newlines and trailing blanks
    dropped, except on the cursor's row, which keeps its text up to the cursor (a prompt ends with a
    space)."""
    cols = max(2, cols)
    seed = prefix[-cols:] if len(prefix) >= cols else prefix
    # Enough rows that nothing scrolls away: every row ends with a newline or after `cols` characters.
    rows = max(2, min(data.count(b"\n") + len(data) // cols + 2, _MAX_ROWS))
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    stream.feed(seed.encode("utf-8", "replace"))
    stream.feed(data)
    used = [y for y, line in screen.buffer.items() if any(ch.data != " " for ch in line.values())]
    last = max([screen.cursor.y, *used])
    out: list[str] = []
    for y in range(last + 1):
        line = screen.buffer[y]
        width = max(line.keys(), default=-1) + 1
        text = "".join(line[x].data for x in range(width))
        if y == screen.cursor.y:
            text = text[: max(len(text.rstrip()), screen.cursor.x)].ljust(screen.cursor.x)
        else:
            text = text.rstrip()
        out.append(text)
    if out and seed and out[0].startswith(seed) and not keep_prefix:
        out[0] = out[0][len(seed) :]
    return "\n".join(out)


_MAX_ROWS = 20_000


class TerminalScreen:
    """A screen emulator fed with every byte of a session; used to observe full-screen programs
    (less, vim, top) that draw on the alternate screen rather than printing lines."""

    def __init__(self, cols: int, rows: int) -> None:
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.alternate = False

    def feed(self, data: bytes) -> None:
        for match in _ALT_SCREEN.finditer(data):
            self.alternate = match.group(1) == b"h"
        self.stream.feed(data)

    def cursor_line(self) -> str:
        """The cursor's row up to the cursor (on the main screen: the prompt before a command)."""
        line = self.screen.buffer[self.screen.cursor.y]
        return "".join(line[x].data for x in range(self.screen.cursor.x))

    def display(self) -> str:
        lines = [line.rstrip() for line in self.screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)


class AsciicastWriter:
    """Writes an asciicast v2 file as the session happens; published atomically on close. A write that
    fails (a full disk) is raised, and the recording is then never published: close() removes the
    temporary file and raises that error again, so no cut recording reaches the dataset."""

    def __init__(
        self, path: Path, *, cols: int, rows: int, title: str = "", env: dict[str, str] | None = None
    ):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = temp_path(path)
        self._fh: IO[str] | None = open(self._tmp, "w", encoding="utf-8")
        self._failed: OSError | None = None
        self._start = time.monotonic()
        self._out = codecs.getincrementaldecoder("utf-8")("replace")
        header: dict[str, object] = {
            "version": 2,
            "width": cols,
            "height": rows,
            "timestamp": int(time.time()),
            "env": env or {"TERM": "xterm", "SHELL": "/bin/bash"},
        }
        if title:
            header["title"] = title
        self._write(json.dumps(header) + "\n")

    def _write(self, line: str) -> None:
        if self._fh is None or self._failed is not None:
            return
        try:
            self._fh.write(line)
        except OSError as exc:
            self._failed = exc
            raise

    def _event(self, code: str, data: str) -> None:
        if self._fh is None or not data:
            return
        self._write(
            json.dumps([round(time.monotonic() - self._start, 6), code, data], ensure_ascii=False) + "\n"
        )

    def output(self, data: bytes) -> None:
        self._event("o", self._out.decode(data))

    def input(self, data: str) -> None:
        self._event("i", data)

    def marker(self, label: str) -> None:
        self._event("m", label)

    def close(self) -> None:
        fh = self._fh
        if fh is None:
            return
        try:
            self._event("o", self._out.decode(b"", final=True))
        except OSError:
            pass  # kept in _failed
        self._fh = None
        try:
            fh.close()  # publish_file fsyncs it
        except OSError as exc:
            self._failed = self._failed or exc
        try:
            if self._failed is not None:
                raise self._failed
            counts: Counter[str] = Counter()
            typed = redact_cast_file(self._tmp, counts)
            if typed or counts:
                with _REDACTIONS_LOCK:
                    _REDACTIONS[self.path] = (typed, counts)
            publish_file(self._tmp, self.path)
        except BaseException:
            self._tmp.unlink(missing_ok=True)
            raise
