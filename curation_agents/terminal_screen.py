"""Render raw terminal output into what a person would have seen, line by line.

Recordings are mostly append-only text with carriage-return progress bars, backspaces, in-line cursor
moves and erases. Emulating those on logical lines (no wrapping, unbounded scrollback) is exact for
what matters and fast enough for hundreds of megabytes; full-screen programs (the alternate screen:
vim, less, top) are handed to pyte, a real VT100 emulator, and their last screen is kept.
"""

from __future__ import annotations

import re

import pyte

# One token: a run of plain output (printable text, CR, LF and colour sequences: most of what programs
# print, applied in one step by _feed_plain), a CSI sequence, an OSC string, another escape, or one control char.
_TOKEN = re.compile(
    r"(?P<plain>(?:[^\x00-\x09\x0b\x0c\x0e-\x1f\x7f\x1b\x9b]++|\x1b\[[0-?]*+[ -/]*+m)++)"
    r"|\x1b\[(?P<csi_params>[0-?]*)[ -/]*(?P<csi_final>[@-~])"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[()*+#%][\x20-\x7e]?"
    r"|\x1b[\x20-\x7e]?"
    r"|(?P<ctrl>[\x00-\x1f\x7f\x9b])"
)
# Select graphic rendition (colours, bold): the only CSI sequence the plain-output fast path removes.
# CSI's parameter, intermediate and final byte ranges are disjoint, so this matches exactly the CSI
# tokens of _TOKEN whose final byte is "m".
_SGR = re.compile(r"\x1b\[[0-?]*[ -/]*m")
# CSI sequences with private parameters that pyte does not implement and may raise on (vim 9 sends
# modifyOtherKeys `ESC[>4;2m`, kitty keyboard queries `ESC[?u`, DECRQM `ESC[?2026$p`): they change
# nothing on screen, so they are dropped before pyte sees them. DEC private modes (`ESC[?1049h`) stay.
_UNSUPPORTED_PRIVATE_CSI = re.compile(r"\x1b\[(?:[<>=][0-?]*[ -/]*[@-~]|\?[0-?]*(?:[ -/]+[@-~]|[@-gi-km-~]))")


class _TolerantScreen(pyte.Screen):
    """pyte's screen, ignoring private-parameter variants of sequences it would reject."""

    def select_graphic_rendition(self, *attrs: int, private: bool = False, **kwargs: object) -> None:
        if not private:
            super().select_graphic_rendition(*attrs)


_LEAVE_ALT_SCREEN = re.compile(r"\x1b\[\?(?:[0-9;]*;)?(?:47|1047|1049)(?:;[0-9;]*)?l")
_ALT_SCREEN_MODES = frozenset({"47", "1047", "1049"})
_MAX_COL = 1 << 16  # cursor moves beyond this are noise; clamp so one sequence cannot allocate gigabytes
_TAB = 8


def _ints(params: str, default: int) -> list[int]:
    out = []
    for part in params.lstrip("?>=").split(";"):
        out.append(int(part) if part.isdigit() else default)
    return out or [default]


class TerminalScreen:
    """An incremental screen emulator: feed output text, read back finished lines and the line being edited.

    `take_finished()` returns (and forgets) the lines above the cursor row; `current_line` is the row
    under the cursor, e.g. a shell prompt with the command being typed.
    """

    def __init__(
        self, width: int = 80, height: int = 24, keep_cleared: bool = False, wrap: bool = True
    ) -> None:
        self.width = max(2, min(width, 1000))
        self.height = max(2, min(height, 500))
        # A row is a logical line; the terminal shows it as screen rows `width` wide. Cursor moves
        # that a terminal confines to one screen row (CR, BS, erase-line, column moves, up and down
        # over a wrapped line) are applied to that row of the logical line: readline's forced wrap
        # at the margin (`x \r`) and its redraw of a wrapped command line stay where they were
        # drawn. Tool output read as text (`wrap=False`) has no margin.
        self.wrap = wrap
        self.rows: list[str] = [""]
        self.row = 0
        self.col = 0
        # The cursor stands past the margin after a write that filled a screen row: the row it is on
        # is still that one until the next character wraps (a terminal's pending wrap).
        self._wrap_pending = False
        # Text appended at the end of a row is collected here and joined once (see _write): re-building
        # the row string per token would make one long line cost quadratic time.
        self._tail: list[str] = []
        self._tail_row = -1
        self._tail_end = 0
        self._alt: pyte.Screen | None = None
        self._alt_stream: pyte.Stream | None = None
        self.alt_screen_entered = 0  # how many full-screen programs ran
        # A transcript keeps what a clear wiped (a person saw it before the clear): take_finished
        # returns those lines first. Rendering a tool's output keeps only the final screen.
        self.keep_cleared = keep_cleared
        self._cleared: list[str] = []

    @property
    def in_fullscreen(self) -> bool:
        return self._alt is not None

    @property
    def current_line(self) -> str:
        """The row under the cursor as drawn, trailing spaces included (a prompt ends in one)."""
        if self._tail:
            self._flush()
        return self.rows[self.row]

    def _flush(self) -> None:
        self.rows[self._tail_row] += "".join(self._tail)
        self._tail = []
        self._tail_row = -1

    def take_finished(self) -> list[str]:
        """The finished lines above the cursor, right-stripped; they are removed from the screen."""
        if self.row == 0 and not self._cleared:
            return []  # the cursor is on the first row: nothing above it (most keystrokes)
        if self._tail:
            self._flush()
        done = [r.rstrip() for r in self.rows[: self.row]]
        if self._cleared:
            done, self._cleared = self._cleared + done, []
        del self.rows[: self.row]
        self.row = 0
        return done

    def take_all(self) -> list[str]:
        """Every line including the current one (end of a recording)."""
        if self._tail:
            self._flush()
        lines = [r.rstrip() for r in self.rows]
        self.rows, self.row, self.col = [""], 0, 0
        while lines and not lines[-1]:
            lines.pop()
        return lines

    # -- feeding -----------------------------------------------------------------------------------
    def feed(self, data: str) -> None:
        if self._alt is None:
            # A keystroke's echo: one text token.
            if data.isprintable():
                if data:
                    self._write(data)
                return
        pos = 0
        while pos < len(data):
            pos = self._feed_alt(data, pos) if self._alt is not None else self._feed_main(data, pos)

    def _feed_main(self, data: str, pos: int) -> int:
        """Apply tokens from POS until the data ends or a full-screen program starts; return where it stopped.

        Every character starts some token (text, an escape, or a control character), so scanning
        with finditer visits the same tokens as matching at each position in turn.
        """
        for m in _TOKEN.finditer(data, pos):
            # lastgroup names the token kind: plain, csi_final (a CSI sequence), ctrl, or None for
            # sequences that draw nothing (OSC, DCS, charset selection, other escapes).
            kind = m.lastgroup
            if kind == "plain":
                text = m.group("plain")
                if "\x1b" in text:
                    text = _SGR.sub("", text)
                if "\n" in text or "\r" in text:
                    self._feed_plain(text)
                elif text:  # colours alone draw nothing (an empty write would pad the row)
                    self._write(text)
            elif kind == "ctrl":
                ctrl = m.group("ctrl")
                if ctrl == "\r":
                    self._carriage_return()
                else:
                    self._control(ctrl)
            elif kind == "csi_final":
                self._csi(m.group("csi_params"), m.group("csi_final"))
                if self._alt is not None:
                    return m.end()
        return len(data)

    def _feed_plain(self, data: str) -> None:
        """Text with CR and LF as its only controls: each run of text written at once.

        Colour sequences (SGR) draw nothing, so the caller removes them first; the text on either side
        of one is written to adjacent columns, exactly as two writes would.
        """
        first_line, *rest = data.split("\n")
        self._plain_line(first_line)
        if len(rest) > 1 and self.row == len(self.rows) - 1 and not self._rows_below():
            # Whole lines below the last row become new rows as they are (a CR at the end of one only
            # moves the cursor before the next LF); any other CR needs the line-by-line path.
            middle = [line.rstrip("\r") for line in rest[:-1]]
            if not any("\r" in line for line in middle):
                if self._tail:
                    self._flush()
                self._keep_blank_row()
                self.rows.extend(middle)
                self.row = len(self.rows) - 1
                self.col = len(middle[-1])  # where writing the line left the cursor
                self._wrap_pending = self._at_margin()
                rest = rest[-1:]
        for line in rest:
            self._line_feed()
            self._carriage_return()
            self._plain_line(line)

    def _plain_line(self, line: str) -> None:
        if "\r" not in line:
            if line:
                self._write(line)
        else:
            first, *redrawn = line.split("\r")
            if first:
                self._write(first)
            start = self._row_start()
            if self.wrap and any(len(part) > self.width for part in redrawn[:-1]):
                # A part that wraps moves the next CR's target to a later screen row: one at a time.
                for part in redrawn:
                    self._carriage_return()
                    if part:
                        self._write(part)
                return
            # Each part after a CR is drawn from the start of the cursor's screen row over the ones
            # before (a progress bar): what stays is, per column, the last part reaching it, and the
            # cursor ends after the last one.
            shown = redrawn[-1]
            for part in reversed(redrawn[:-1]):
                if len(part) > len(shown):
                    shown += part[len(shown) :]
            self.col = start
            self._wrap_pending = False
            if shown:
                self._write(shown)
            self.col = start + len(redrawn[-1])
            self._wrap_pending = bool(redrawn[-1]) and self._at_margin()

    def _write(self, text: str) -> None:
        if self._tail_row == self.row and self.col == self._tail_end:
            self._tail.append(text)  # appending to the row being written, the common case
            self._tail_end += len(text)
            self.col = col = self._tail_end
            self._wrap_pending = self.wrap and col % self.width == 0
            return
        if self._tail:
            self._flush()
        rows, row, col = self.rows, self.row, self.col
        line = rows[row]
        if col >= len(line):
            self._tail = [" " * (col - len(line)) + text] if col > len(line) else [text]
            self._tail_row = row
            self._tail_end = col + len(text)
        else:
            rows[row] = line[:col] + text + line[col + len(text) :]
        self.col = col + len(text)
        self._wrap_pending = self._at_margin()

    # -- screen rows of a logical line ---------------------------------------------------------------
    def _at_margin(self) -> bool:
        return self.wrap and self.col > 0 and self.col % self.width == 0

    def _row_start(self) -> int:
        """Where the cursor's screen row starts in its logical line."""
        col, width = self.col, self.width
        if not self.wrap or col < width:
            return 0
        if self._wrap_pending and col % width == 0:
            return col - width
        return col - col % width

    def _screen_x(self, start: int) -> int:
        """The cursor's column on its screen row (at the margin while a wrap is pending)."""
        return min(self.col - start, self.width - 1) if self.wrap else self.col

    def _row_end(self, start: int) -> int:
        return start + self.width if self.wrap else _MAX_COL

    def _line_length(self) -> int:
        if self._tail:
            self._flush()
        return len(self.rows[self.row])

    def _rows_below(self) -> bool:
        """Whether the cursor's logical line goes on below the cursor's screen row. Blanks do not
        count: the row readline's forced wrap left holding one space is where output starts anew."""
        if not self.wrap:
            return False
        end = self._row_start() + self.width
        return end < self._line_length() and not self.rows[self.row][end:].isspace()

    def _keep_blank_row(self) -> None:
        """Before the cursor leaves a blank screen row that continues a wrapped line (the space of
        readline's forced wrap, an erased row), that row becomes an empty line of its own: it stays on
        screen, and right-stripping the logical line would lose it."""
        start = self._row_start()
        if not self.wrap or start < self.width:
            return
        if self._tail:
            self._flush()
        line = self.rows[self.row]
        if line[start:].strip():
            return
        self.rows[self.row] = line[:start]
        self.rows.insert(self.row + 1, "")
        self.row += 1
        self.col = self.col - start

    def _carriage_return(self) -> None:
        self.col = self._row_start()
        self._wrap_pending = False

    def _control(self, ch: str) -> None:
        if ch == "\r":
            self._carriage_return()
        elif ch == "\n" or ch == "\x0b" or ch == "\x0c":
            # Recordings capture the tty after onlcr, so a bare LF is rare; treat it as a new line.
            self._line_feed()
            self._carriage_return()
        elif ch == "\b":
            start = self._row_start()
            self.col = max(start, min(self.col, self._row_end(start) - 1) - 1)
            self._wrap_pending = False
        elif ch == "\t":
            start = self._row_start()
            x = (self._screen_x(start) // _TAB + 1) * _TAB
            self.col = min(_MAX_COL, start + (min(x, self.width - 1) if self.wrap else x))
            self._wrap_pending = False
        # Bell, shift-in/out and the rest draw nothing.

    def _line_feed(self) -> None:
        """The next screen row: further down the cursor's logical line when it goes on, else the
        next logical line (the column is kept; callers that mean a new line return the carriage)."""
        if self._rows_below():
            self.col = self._row_start() + self.width + self._screen_x(self._row_start())
            self._wrap_pending = False
            return
        self._keep_blank_row()
        self.col = self._screen_x(self._row_start())
        self._wrap_pending = False
        self.row += 1
        if self.row == len(self.rows):
            self.rows.append("")

    def _csi(self, params: str, final: str) -> None:
        if final == "m":
            return
        if self._tail:
            self._flush()
        if params.startswith("?") and final in "hl":
            modes = set(params[1:].split(";"))
            if final == "h" and modes & _ALT_SCREEN_MODES:
                self._enter_alt()
            return
        n = _ints(params, 0)
        count = max(1, n[0])
        line = self.rows[self.row]
        # Line edits and column moves stay on the cursor's screen row of its logical line.
        # As pyte (the collector's emulator) has it: while a wrap is pending the cursor stands just
        # past the last column, so an erase there erases nothing and moves clamp to the last column.
        start = self._row_start()
        x = self.col - start
        cursor = self.col
        end = self._row_end(start)
        beyond = line[end:] if self.wrap and len(line) > end else ""
        if final in "CDG`AFBE":  # cursor moves end a pending wrap; erases and deletes do not
            self._wrap_pending = False
        if final == "K":
            mode = n[0]
            if mode == 0:
                head = line[:cursor]
                self.rows[self.row] = head + " " * (end - cursor) + beyond if beyond else head
            elif mode == 1:
                erased = min(x + 1, self.width) if self.wrap else x + 1
                self.rows[self.row] = (
                    line[:start] + " " * min(erased, max(0, len(line) - start)) + line[start + erased :]
                )
            else:
                self.rows[self.row] = line[:start] + " " * self.width + beyond if beyond else line[:start]
            self.col = cursor
        elif final == "C":
            self.col = min(_MAX_COL, cursor + count, end - 1 if self.wrap else _MAX_COL)
        elif final == "D":
            self.col = max(start, min(cursor, end - 1 if self.wrap else _MAX_COL) - count)
        elif final == "G" or final == "`":
            self.col = min(_MAX_COL, start + min(count, self.width if self.wrap else _MAX_COL) - 1)
        elif final == "P":
            if beyond:
                shifted = line[cursor + count : end]
                self.rows[self.row] = line[:cursor] + shifted + " " * (end - cursor - len(shifted)) + beyond
            else:
                self.rows[self.row] = line[:cursor] + line[cursor + count :]
            self.col = cursor
        elif final == "@":
            if cursor < len(line):
                blanks = " " * min(count, _MAX_COL)
                if beyond:
                    self.rows[self.row] = (line[:cursor] + blanks + line[cursor:end])[:end] + beyond
                else:
                    self.rows[self.row] = line[:cursor] + blanks + line[cursor:]
            self.col = cursor
        elif final == "X":
            if cursor < len(line):
                stop = min(cursor + count, end)
                self.rows[self.row] = line[:cursor] + " " * (min(stop, len(line)) - cursor) + line[stop:]
            self.col = cursor
        elif final == "A" or final == "F":
            self._cursor_up(count, 0 if final == "F" else x)
            self._wrap_pending = self.wrap and final == "A" and x == self.width
        elif final == "B" or final == "E":
            for _ in range(min(count, self.height)):
                self._line_feed()
            self.col = self._row_start() + (0 if final == "E" else min(x, self.col - self._row_start()))
        elif final == "H" or final == "f":
            row = max(1, n[0]) if n else 1
            col = max(1, n[1]) if len(n) > 1 else 1
            if row == 1 and col == 1 and self.row == 0 and not self.rows[0]:
                self.col = 0
                return
            target = self._screen_top() + min(row, self.height) - 1
            while target >= len(self.rows):
                self.rows.append("")
            self.row, self.col = target, min(_MAX_COL, col - 1)
        elif final == "J":
            mode = n[0]
            if mode in (2, 3) or (mode == 0 and self.row == self._screen_top() and self.col == 0):
                # A clear: what was on the screen is gone; a person now sees an empty screen.
                if self.keep_cleared:
                    kept = [r.rstrip() for r in self.rows]
                    while kept and not kept[-1]:
                        kept.pop()
                    self._cleared.extend(kept)
                self.rows, self.row, self.col = [""], 0, 0
            elif mode == 0:
                self.rows[self.row] = line[: self.col]
                del self.rows[self.row + 1 :]
        # Scroll regions, tab stops, device reports and the rest change nothing a reader sees.

    def _screen_top(self) -> int:
        return max(0, len(self.rows) - self.height)

    def _cursor_up(self, count: int, x: int) -> None:
        """Up COUNT screen rows to column X: within the cursor's logical line first, then the screen
        rows of the lines above it (their last row first), no higher than the screen's top."""
        start = self._row_start()
        width = self.width
        if self.wrap and count <= start // width:
            self.col = start - count * width + x
            return
        count -= start // width if self.wrap else 0
        row = self.row
        while count > 0 and row > self._screen_top():
            row -= 1
            rows_of = max(1, -(-len(self.rows[row]) // width)) if self.wrap else 1
            if count <= rows_of:
                self.row, self.col = row, (rows_of - count) * width * self.wrap + x
                return
            count -= rows_of
        self.row, self.col = row, x

    # -- the alternate screen ----------------------------------------------------------------------
    def _enter_alt(self) -> None:
        self._alt = _TolerantScreen(self.width, self.height)
        self._alt_stream = pyte.Stream(self._alt)
        self.alt_screen_entered += 1

    def _feed_alt(self, data: str, pos: int) -> int:
        assert self._alt is not None and self._alt_stream is not None
        m = _LEAVE_ALT_SCREEN.search(data, pos)
        end = m.start() if m else len(data)
        chunk = _UNSUPPORTED_PRIVATE_CSI.sub("", data[pos:end])
        try:
            self._alt_stream.feed(chunk)
        except Exception:
            # A sequence pyte cannot handle: its parser is spent; keep the screen, start a new parser.
            self._alt_stream = pyte.Stream(self._alt)
        if m is None:
            return len(data)
        if self._tail:
            self._flush()
        screen_lines = [line.rstrip() for line in self._alt.display]
        while screen_lines and not screen_lines[-1]:
            screen_lines.pop()
        self._alt, self._alt_stream = None, None
        # The full-screen program's last screen stands in for its output, then the main screen resumes.
        for text in [line for line in screen_lines if line]:
            self._write(text)
            self._line_feed()
            self.col = 0
        return m.end()


def screen_text(data: str, width: int = 200, height: int = 50, wrap: bool = True) -> str:
    """A finished chunk of terminal output as the screen shows it, in plain text (all lines, escapes
    applied); logical lines, with line edits on the screen rows of WIDTH unless `wrap=False`."""
    screen = TerminalScreen(width, height, wrap=wrap)
    screen.feed(data)
    return "\n".join(screen.take_all())


_HAS_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")
_CONTROL_ASCII = bytes([*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F])  # _HAS_CONTROL less U+009B


def _has_control(text: str) -> bool:
    """`_HAS_CONTROL.search(text) is not None`; ASCII text by deleting the control bytes, several times
    faster than the regex on long tool output."""
    if text.isascii():
        return len(text.encode("ascii").translate(None, _CONTROL_ASCII)) != len(text)
    return _HAS_CONTROL.search(text) is not None


def clean_tool_output(text: str) -> str:
    """Normalise tool-log text: CRLF to LF, and terminal escapes applied only when present."""
    if not _has_control(text):
        return text
    without_crlf = text.replace("\r\n", "\n")
    if _HAS_CONTROL.search(without_crlf) is None:
        return without_crlf
    return screen_text(text, width=1000, wrap=False)  # tool output is text, not a screen
