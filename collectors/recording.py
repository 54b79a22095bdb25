"""Turning terminal bytes into observation text, and recording sessions as asciicast v2 files.

A recording is redacted before it is published (worldline.redaction): secrets in the output stream,
and input the terminal did not echo. What was typed without echo stays in memory for the collection job to
take out of the trajectory (`take_redactions`); it is never written anywhere.
"""

from __future__ import annotations

import codecs
import inspect
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pyte
from pyte import charsets as cs
from pyte import modes as mo
from pyte.screens import Char, StaticDefaultDict, wcwidth

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


_MAX_ROWS = 20_000

# What the plain renderer (below) handles exactly as the emulator does: printable text, line feeds,
# carriage returns, backspaces, tabs, colours (SGR) and erase-in-line. Anything else goes to pyte.
_NOT_PLAIN = re.compile(rb"[^\x20-\x7e\x80-\xff\r\n\b\t\x1b]|\x1b(?!\[[0-9;]*m|\[[012]?K)")
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_PLAIN_TOKEN = re.compile(r"[\x20-\x7e]+|[^\x00-\x7f]+|[\r\n\b\t]|\x1b\[([012]?)K")


@dataclass(frozen=True)
class ScreenRender:
    """A render of one step's bytes on a tall screen: the text (`screen_text`), and for a plain render
    what the screen holds afterwards, so the session's screen can take it over instead of emulating
    the same bytes again (`TerminalScreen.adopt`)."""

    text: str
    data: bytes
    seed: str  # what the first row showed before `data` (the prefix, cut to the width)
    cols: int
    rows: list[list[str]] | None  # one cell per character, rows 0..cursor y; None: rendered by pyte
    cursor: tuple[int, int]  # (x, y); x == cols: a wrap is pending
    peak_x: int  # the largest cursor column reached


def _tolerant(name: str) -> Callable[..., None]:
    """pyte.Screen's CSI handler NAME, taking what a terminal takes: extra parameters are ignored
    (`ESC[1;2C` moves one column, as xterm does) and a private-parameter variant pyte does not
    implement (`ESC[?5A`, `ESC[?m`) changes nothing, where pyte itself raises TypeError."""
    base = getattr(pyte.Screen, name)
    params = inspect.signature(base).parameters
    takes_private = "private" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    variadic = any(p.kind is p.VAR_POSITIONAL for p in params.values())
    positional = sum(
        1
        for p in list(params.values())[1:]
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "private"
    )

    def handler(self: pyte.Screen, *args: int, **kwargs: bool) -> None:
        if kwargs.get("private") and not takes_private:
            return
        if not takes_private:
            kwargs.pop("private", None)
        base(self, *(args if variadic else args[:positional]), **kwargs)

    handler.__name__ = name
    return handler


class TolerantScreen(pyte.Screen):
    """pyte's screen that never raises on a sequence a terminal would take (see `_tolerant`): a task's
    output cannot make a step fail by printing an odd escape sequence."""


for _name in sorted(set(pyte.Stream.csi.values())):
    setattr(TolerantScreen, _name, _tolerant(_name))


def screen_text(data: bytes, cols: int, *, prefix: str = "", keep_prefix: bool = False) -> str:
    """What a terminal `cols` wide shows after `data`, as text: one emulator (pyte) applies cursor
    movement (relative and absolute), erases, overwrites and wrapping at the terminal's width. `prefix`
    is what the cursor's row already showed (the prompt) so the first line wraps where it did on
    screen; it is left out of the result unless `keep_prefix` (an observation starts at the row the
    action was typed on, docs/observations.md). Rows are joined with newlines and trailing blanks
    dropped, except on the cursor's row, which keeps its text up to the cursor (a prompt ends with a
    space)."""
    return render_screen(data, cols, prefix=prefix, keep_prefix=keep_prefix).text


def render_screen(data: bytes, cols: int, *, prefix: str = "", keep_prefix: bool = False) -> ScreenRender:
    """`screen_text` with what the screen holds afterwards. Plain output (the common case: lines of
    text, colours, progress lines redrawn with \\r) is rendered without the emulator, by rules that
    are pyte's for exactly those bytes (tests/collectors/test_render_once.py holds them to it)."""
    cols = max(2, cols)
    seed = prefix[-cols:] if len(prefix) >= cols else prefix
    # Enough rows that nothing scrolls away: every row ends with a newline or after `cols` characters.
    rows = max(2, min(data.count(b"\n") + len(data) // cols + 2, _MAX_ROWS))
    plain = _plain_render(data, cols, rows, seed)
    cells: list[list[str]] | None = None
    if plain is not None:
        cells, (x, y), peak = plain
        lines = ["".join(row) for row in cells]
        used = [i for i, row in enumerate(cells) if row.count(" ") != len(row)]
    else:
        screen = TolerantScreen(cols, rows)
        stream = pyte.ByteStream(screen)
        stream.feed(seed.encode("utf-8", "replace"))
        stream.feed(data)
        used = [y for y, line in screen.buffer.items() if any(ch.data != " " for ch in line.values())]
        x, y, peak = screen.cursor.x, screen.cursor.y, cols
        lines = []
        for i in range(max([y, *used]) + 1):
            line = screen.buffer[i]
            width = max(line.keys(), default=-1) + 1
            lines.append("".join(line[c].data for c in range(width)))
    out = _screen_lines(lines, x, y, max([y, *used]))
    if out and seed and out[0].startswith(seed) and not keep_prefix:
        out[0] = out[0][len(seed) :]
    return ScreenRender("\n".join(out), data, seed, cols, cells, (x, y), peak)


def _screen_lines(lines: list[str], x: int, y: int, last: int) -> list[str]:
    """Rows 0..`last`: trailing blanks dropped, except on the cursor's row (`y`), which keeps its text
    up to the cursor."""
    out: list[str] = []
    for i in range(last + 1):
        text = lines[i] if i < len(lines) else ""
        if i == y:
            text = text[: max(len(text.rstrip()), x)].ljust(x)
        else:
            text = text.rstrip()
        out.append(text)
    return out


def _plain_render(
    data: bytes, cols: int, rows: int, seed: str
) -> tuple[list[list[str]], tuple[int, int], int] | None:
    """Plain output after SEED on a fresh screen `cols` wide and `rows` tall, as pyte renders it: the
    rows' cells (a wide character's second cell is ""), the cursor and the largest column it reached.
    None when anything else is in the bytes (a character pyte does not advance over included), a
    character is left incomplete at the end, or the screen would scroll: pyte renders those."""
    if _NOT_PLAIN.search(data):
        return None
    decoder = codecs.getincrementaldecoder("utf-8")("replace")  # as pyte.ByteStream decodes
    text = decoder.decode(data)
    if decoder.getstate()[0]:
        return None
    if "\x1b" in text:
        text = _SGR.sub("", text)
    cells: list[list[str]] = [[]]
    x = y = peak = 0
    for match in _PLAIN_TOKEN.finditer(seed + text):
        token = match.group()
        first = token[0]
        if first == "\n":  # index: one row down, same column (pyte's LNM is off)
            if y == rows - 1:
                return None
            y += 1
            if y == len(cells):
                cells.append([])
        elif first == "\r":
            x = 0
        elif first == "\b":
            x = min(max(0, (x - 1 if x == cols else x) - 1), cols - 1)
        elif first == "\t":
            stop = (x // 8 + 1) * 8
            x = stop if stop < cols else cols - 1
            peak = max(peak, x)
        elif first == "\x1b":  # erase in line: 0 from the cursor, 1 up to it, 2 all of it
            how, row = match.group(1), cells[y]
            if how in ("", "0"):
                del row[x:]
            elif how == "1":
                row[: x + 1] = [" "] * min(x + 1, len(row))
            else:
                row.clear()
        elif first < "\x80":  # printable ASCII: a cell each, wrapping at the edge
            pos = 0
            while pos < len(token):
                if x == cols:  # the pending wrap: carriage return and index
                    if y == rows - 1:
                        return None
                    x, y = 0, y + 1
                    if y == len(cells):
                        cells.append([])
                row = cells[y]
                if len(row) < x:
                    row.extend(" " * (x - len(row)))
                n = min(len(token) - pos, cols - x)
                row[x : x + n] = token[pos : pos + n]
                x += n
                pos += n
                peak = max(peak, x)
        else:
            for char in token:
                width = wcwidth(char)
                if width not in (1, 2):
                    return None  # combining, zero-width or unprintable: pyte's own rules
                if x == cols:
                    if y == rows - 1:
                        return None
                    x, y = 0, y + 1
                    if y == len(cells):
                        cells.append([])
                row = cells[y]
                wide = width == 2 and x + 1 < cols
                if len(row) < x + 1 + wide:
                    row.extend(" " * (x + 1 + wide - len(row)))
                row[x] = char
                if wide:
                    row[x + 1] = ""
                x = min(x + width, cols)
                peak = max(peak, x)
    return cells, (x, y), peak


class TerminalScreen:
    """The session's screen: where a step starts (the prompt's row) and what full-screen programs
    (less, vim, top) show, as they draw on the alternate screen rather than printing lines.

    Output is queued and emulated when the screen is read. A step's plain output is not emulated at
    all: its render (`render_screen`) is adopted instead when this screen's state shows that the
    render's rows are what emulating the same bytes would leave (`_can_adopt`)."""

    def __init__(self, cols: int, rows: int) -> None:
        self.screen = TolerantScreen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.alternate = False
        self._queued: list[bytes] = []

    def feed(self, data: bytes) -> None:
        for match in _ALT_SCREEN.finditer(data):
            self.alternate = match.group(1) == b"h"
        if data:
            self._queued.append(data)

    def catch_up(self) -> None:
        """Emulate the queued output, read by read."""
        queued, self._queued = self._queued, []
        for data in queued:
            self.stream.feed(data)

    def cursor_line(self) -> str:
        """The cursor's row up to the cursor (on the main screen: the prompt before a command)."""
        self.catch_up()
        return self._cursor_line()

    def display(self) -> str:
        self.catch_up()
        lines = [line.rstrip() for line in self.screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)

    def adopt(self, render: ScreenRender) -> None:
        """The step's output was rendered as RENDER: take its rows when it is a plain render of exactly
        the queued bytes from this screen's cursor, else emulate the queued bytes."""
        if self._queued and self._can_adopt(render):
            self._take_rows(render)
        else:
            self.catch_up()

    def _cursor_line(self) -> str:
        line = self.screen.buffer[self.screen.cursor.y]
        return "".join(line[x].data for x in range(self.screen.cursor.x))

    def _can_adopt(self, render: ScreenRender) -> bool:
        """Whether emulating the queued bytes here would leave this screen's rows above the cursor as
        they are and put the render's rows from the cursor's row on (scrolling as it goes): plain
        output only moves the cursor down, so that holds when this screen's state is what a fresh
        one's would be (modes, margins, tab stops, charset, no half-read sequence or character), the
        cursor's row shows the render's seed and nothing after it, and no row below holds text."""
        screen, stream = self.screen, self.stream
        if render.rows is None or len(render.rows) != render.cursor[1] + 1:
            return False
        if b"".join(self._queued) != render.data:  # a step cut by the output cap, say
            return False
        if render.cols != screen.columns and render.peak_x >= screen.columns:
            return False  # a wider render: the same rows only if no line reached this screen's edge
        x0, y0 = screen.cursor.x, screen.cursor.y
        if len(render.seed) != x0 or self._cursor_line() != render.seed:
            return False
        if (
            mo.DECAWM not in screen.mode
            or screen.mode & {mo.IRM, mo.LNM, mo.DECOM}
            or screen.margins is not None
            or screen.charset != 0
            or screen.g0_charset != cs.LAT1_MAP
            or screen.tabstops != set(range(8, screen.columns, 8))
            or not stream.use_utf8
            or not stream._taking_plain_text  # no escape sequence half read
            or stream.utf8_decoder.getstate()[0]  # no character half read
        ):
            return False
        for y, line in screen.buffer.items():
            if y >= y0 and any(ch.data != " " for x, ch in line.items() if y > y0 or x >= x0):
                return False
        return True

    def _take_rows(self, render: ScreenRender) -> None:
        screen = self.screen
        assert render.rows is not None
        y0 = screen.cursor.y
        x, y = render.cursor
        drop = max(0, y0 + y + 1 - screen.lines)  # rows scrolled off the top
        rows: dict[int, StaticDefaultDict[int, Char]] = {}
        for old in range(drop, y0):
            line = screen.buffer.get(old)
            if line:
                rows[old - drop] = line
        for i in range(max(0, drop - y0), y + 1):
            line = StaticDefaultDict[int, Char](screen.default_char)
            line.update(enumerate(map(_CELLS.__getitem__, render.rows[i])))
            rows[y0 + i - drop] = line
        screen.buffer.clear()
        screen.buffer.update(rows)
        screen.dirty.update(range(screen.lines))
        screen.cursor.x, screen.cursor.y = x, y0 + y - drop
        self._queued.clear()


class _Cells(dict[str, Char]):
    """A plain render's cells as the emulator's characters, made once each; only their text is read."""

    def __missing__(self, data: str) -> Char:
        self[data] = cell = Char(data)
        return cell


_CELLS = _Cells()


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
