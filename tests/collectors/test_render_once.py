"""A step's output goes through one renderer once, and observations are what they were when every byte
went through the emulator twice (once for the session's screen, once for the observation).

The previous renderer is kept here, copied, as the reference: `reference_screen_text` and
`ReferenceScreen` are collectors/recording.py's `screen_text` and `TerminalScreen` before the change,
and `reference_observation` is PersistentShell._observation_text's text before it.
"""

from __future__ import annotations

import re
from typing import Any, cast

import pyte
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.recording import TerminalScreen, TolerantScreen, render_screen, screen_text
from collectors.sandbox import Sandbox
from collectors.shell import PersistentShell, _Capture

# -- the reference: the renderer as it was -------------------------------------------------------------

_MAX_ROWS = 20_000


def reference_screen_text(data: bytes, cols: int, *, prefix: str = "", keep_prefix: bool = False) -> str:
    cols = max(2, cols)
    seed = prefix[-cols:] if len(prefix) >= cols else prefix
    rows = max(2, min(data.count(b"\n") + len(data) // cols + 2, _MAX_ROWS))
    screen = TolerantScreen(cols, rows)
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


_ALT_SCREEN = re.compile(rb"\x1b\[\?(?:1049|1047|47)([hl])")


class ReferenceScreen:
    def __init__(self, cols: int, rows: int) -> None:
        self.screen = TolerantScreen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.alternate = False

    def feed(self, data: bytes) -> None:
        for match in _ALT_SCREEN.finditer(data):
            self.alternate = match.group(1) == b"h"
        self.stream.feed(data)

    def cursor_line(self) -> str:
        line = self.screen.buffer[self.screen.cursor.y]
        return "".join(line[x].data for x in range(self.screen.cursor.x))

    def display(self) -> str:
        lines = [line.rstrip() for line in self.screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)


def reference_observation(
    screen: ReferenceScreen, head: bytes, omitted: int, tail: bytes, prefix: str, cols: int
) -> str:
    if screen.alternate:
        return screen.display()
    head_text = reference_screen_text(head, cols, prefix=prefix, keep_prefix=True)
    if not omitted and not tail:
        return head_text
    tail_text = reference_screen_text(tail, cols)
    return head_text + ("" if head_text.endswith("\n") or not head_text else "\n") + tail_text


# -- sessions: the shell's screen handling, step by step, old and new --------------------------------


def _shell(cols: int, rows: int, observation_cols: int) -> PersistentShell:
    """A PersistentShell for its screen handling only: nothing here reaches the sandbox."""
    return PersistentShell(cast(Sandbox, None), cols=cols, rows=rows, observation_cols=observation_cols)


def _state(screen: TerminalScreen | ReferenceScreen) -> tuple[str, str, tuple[int, int]]:
    """The screen's text (every cell, row by row: pyte's own `display` fails on some rows), the
    cursor's row up to the cursor, and the cursor."""
    prompt_row = screen.cursor_line()
    pyte_screen = screen.screen
    rows = [
        "".join(pyte_screen.buffer[y][x].data for x in range(pyte_screen.columns))
        for y in range(pyte_screen.lines)
    ]
    return "\n".join(rows), prompt_row, (pyte_screen.cursor.x, pyte_screen.cursor.y)


def run_session(
    first: bytes, steps: list[list[bytes]], cols: int, rows: int, observation_cols: int, cap: int
) -> list[tuple[str, str, str, tuple[int, int]]]:
    """Each step's observation and the session screen afterwards (its text, the cursor's row, the
    cursor), as PersistentShell makes them: the reads go to the screen as the capture keeps them. A
    step the emulator fails on ends the session with the error's type."""
    shell = _shell(cols, rows, observation_cols)
    shell.screen = TerminalScreen(cols, rows)
    shell.screen.feed(first)
    seen = []
    for chunks in steps:
        prefix = "" if shell.screen.alternate else shell.screen.cursor_line()  # as _interact reads it
        capture = _Capture(cap)
        for chunk in chunks:
            kept = capture.add(chunk)
            if kept:
                shell.screen.feed(kept)
        head, omitted, tail = capture.parts()
        try:
            text = shell._observation_text(head, omitted, tail, prefix)
        except Exception as exc:  # pyte rejects some sequences; the step then fails as it did
            seen.append(("raised", type(exc).__name__, "", (0, 0)))
            break
        seen.append((text, *_state(shell.screen)))
    return seen


def run_reference_session(
    first: bytes, steps: list[list[bytes]], cols: int, rows: int, observation_cols: int, cap: int
) -> list[tuple[str, str, str, tuple[int, int]]]:
    screen = ReferenceScreen(cols, rows)
    screen.feed(first)
    seen = []
    for chunks in steps:
        prefix = "" if screen.alternate else screen.cursor_line()
        capture = _Capture(cap)
        try:
            for chunk in chunks:
                kept = capture.add(chunk)
                if kept:
                    screen.feed(kept)
            head, omitted, tail = capture.parts()
            text = reference_observation(screen, head, omitted, tail, prefix, observation_cols)
        except Exception as exc:
            seen.append(("raised", type(exc).__name__, "", (0, 0)))
            break
        seen.append((text, *_state(screen)))
    return seen


# -- generated terminal output ----------------------------------------------------------------------

PROMPT = "agent@sandbox:/work$ "
_words = st.text(alphabet="abcdefghij XYZ-_./:=0123456789", min_size=1, max_size=12)
_PLAIN_PIECES = [
    "\r\n",
    "\r\n",
    "\n",
    "\r",
    "\b",
    "\t",
    "\x1b[31m",
    "\x1b[0m",
    "\x1b[1;32m",
    "\x1b[38;5;200m",
    "\x1b[m",
    "\x1b[K",
    "\x1b[0K",
    "\x1b[1K",
    "\x1b[2K",
    PROMPT,
    "中文",
    "é",
    "🙂",
    "│ ├── ",
    "\ufffd",
]
_OTHER_PIECES = [
    "\x1b[3A",
    "\x1b[2B",
    "\x1b[5C",
    "\x1b[2D",
    "\x1b[10G",
    "\x1b[3;5H",
    "\x1b[H",
    "\x1b[2J",
    "\x1b[H\x1b[2J\x1b[3J",
    "\x1b[J",
    "\x1b[?1049h",
    "\x1b[?1049l",
    "\x1b[?7l",
    "\x1b[?7h",
    "\x1b[4h",
    "\x1b[4l",
    "\x1b[20h",
    "\x1b[20l",
    "\x1b[2;4r",
    "\x1b[r",
    "\x1b7",
    "\x1b8",
    "\x1bM",
    "\x1bD",
    "\x1bH",
    "\x1b[3g",
    "\x1b[2@",
    "\x1b[3P",
    "\x1b[2X",
    "\x1b(0",
    "\x1b(B",
    "\x1b]0;title\x07",
    "\x1b]697;0123abcd;0\x07",
    "\x07",
    "\x00",
    "\x01",
    "\x7f",
    "e\u0301",
    "\u200b",
    "\x0b",
    "\x0e",
    "\x0f",
]
_BYTES_PIECES = [b"\xff", b"\xe4\xb8", b"\xc2\x9b", b"\x1b[", b"\x1b"]
# What a step can leave behind that changes how the next step's output lands: modes (insert, newline,
# no wrap, origin), margins, tab stops, another charset, a half-read sequence or character, the cursor
# above rows with text or before text on its own row.
_STATE_PIECES = [
    b"\x1b[4h",
    b"\x1b[20h",
    b"\x1b[?7l",
    b"\x1b[?6h",
    b"\x1b[2;4r",
    b"\x1bH",
    b"\x1b[3g",
    b"\x1b%@",
    b"\x1b[",
    b"\x1b]0;ti",
    b"\xe4\xb8",
    b"\r\n\r\nx\x1b[2A\r",
    b"x\r\n\r\n\r\nx\x1b[2A",
    b"\x1b[5D",
]


@st.composite
def step_bytes(draw: Any, cols: int, plain: bool) -> bytes:
    """One step's output: words, long lines that wrap, and the pieces above."""
    pieces: list[bytes] = []
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.integers(0, 10 if plain else 13))
        if kind <= 3:
            pieces.append(draw(_words).encode())
        elif kind == 4:
            pieces.append(b"y" * draw(st.integers(1, 3 * cols + 2)))
        elif kind == 5:  # many lines: past the output cap, when the session has a small one
            pieces.append(b"".join(b"line %d\r\n" % i for i in range(draw(st.integers(1, 60)))))
        elif kind <= 10:
            pieces.append(draw(st.sampled_from(_PLAIN_PIECES)).encode())
        elif kind <= 12:
            pieces.append(draw(st.sampled_from(_OTHER_PIECES)).encode())
        else:
            pieces.append(draw(st.sampled_from(_BYTES_PIECES)))
    if draw(st.booleans()):
        pieces.append(b"\r\n" + PROMPT.encode())  # the next prompt ends most steps
    if not plain and draw(st.booleans()):
        pieces.append(draw(st.sampled_from(_STATE_PIECES)))
    return b"".join(pieces)


@st.composite
def reads(draw: Any, data: bytes) -> list[bytes]:
    """DATA as the socket delivered it: split anywhere, inside escape sequences and characters too."""
    cuts = sorted(set(draw(st.lists(st.integers(0, len(data)), max_size=6))))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


@st.composite
def sessions(draw: Any) -> tuple[bytes, list[list[bytes]], int, int, int, int]:
    cols = draw(st.integers(4, 30))
    rows = draw(st.integers(2, 8))
    observation_cols = draw(st.sampled_from([cols, cols, cols + draw(st.integers(1, 40))]))
    cap = draw(st.sampled_from([1 << 16, 1 << 16, draw(st.integers(257, 700))]))  # head: cap - 256
    first = draw(st.sampled_from([PROMPT, "$ ", "", "x" * cols, "中$ "])).encode()
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        data = draw(step_bytes(cols, plain=draw(st.integers(0, 3)) > 0))
        steps.append(draw(reads(data)))
    return first, steps, cols, rows, observation_cols, cap


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_observations_and_screen_equal_the_reference(
    session: tuple[bytes, list[list[bytes]], int, int, int, int],
) -> None:
    assert run_session(*session) == run_reference_session(*session)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(2, 30).flatmap(lambda cols: st.tuples(st.just(cols), step_bytes(cols, plain=True))),
    st.sampled_from(["", PROMPT, "中", "x" * 40]),
    st.booleans(),
)
def test_screen_text_equals_the_reference(case: tuple[int, bytes], prefix: str, keep: bool) -> None:
    cols, data = case
    assert screen_text(data, cols, prefix=prefix, keep_prefix=keep) == reference_screen_text(
        data, cols, prefix=prefix, keep_prefix=keep
    )


# -- each byte once ---------------------------------------------------------------------------------

LISTING = b"".join(
    b"-rw-r--r-- 1 agent agent %6d Dec  4 18:00 \x1b[01;32mfile_%04d.txt\x1b[0m\r\n" % (i * 37, i)
    for i in range(60)
)[:4096]


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many characters pyte draws, per call."""
    calls: list[int] = []
    draw = pyte.Screen.draw

    def counting(self: pyte.Screen, data: str) -> None:
        calls.append(len(data))
        draw(self, data)

    monkeypatch.setattr(pyte.Screen, "draw", counting)
    return calls


def test_plain_output_is_rendered_once_without_the_emulator(drawn: list[int]) -> None:
    steps = [[LISTING[:1000], LISTING[1000:]], [b"ls\r\n" + LISTING + PROMPT.encode()]]
    seen = run_session(PROMPT.encode(), steps, 160, 40, 160, 1 << 16)
    drawn_in_session = sum(drawn)
    assert seen == run_reference_session(PROMPT.encode(), steps, 160, 40, 160, 1 << 16)
    assert drawn_in_session <= len(PROMPT)  # only the first prompt, when the first step read its row
    assert sum(drawn) > 2 * len(LISTING)  # the reference drew every byte twice


def test_output_the_plain_renderer_does_not_handle_is_emulated_and_stays_exact(drawn: list[int]) -> None:
    moved = LISTING + b"\x1b[3A\x1b[2Kreplaced\x1b[3B\r\n" + PROMPT.encode()
    steps = [[moved[:2000], moved[2000:]], [LISTING]]
    assert run_session(PROMPT.encode(), steps, 160, 40, 160, 1 << 16) == run_reference_session(
        PROMPT.encode(), steps, 160, 40, 160, 1 << 16
    )


def test_a_render_is_not_adopted_by_a_screen_it_does_not_continue() -> None:
    screen = TerminalScreen(20, 4)
    screen.feed(b"one\r\ntwo\x1b[2D")  # text after the cursor: a step's output would overwrite it
    prefix = screen.cursor_line()
    screen.feed(b"X\r\n")
    screen.adopt(render_screen(b"X\r\n", 20, prefix=prefix, keep_prefix=True))
    reference = ReferenceScreen(20, 4)
    reference.feed(b"one\r\ntwo\x1b[2DX\r\n")
    assert screen.display() == reference.display() == "one\ntXo"


@pytest.mark.parametrize("left", _STATE_PIECES + [b"a\r\n\r\nb\x1b[1A\r", b"a\r\n\x1b[1;3r", b"\xe4"])
@pytest.mark.parametrize("cols, observation_cols", [(30, 30), (30, 80)])
def test_plain_output_after_a_step_that_changed_the_screen_state(
    left: bytes, cols: int, observation_cols: int
) -> None:
    """What one step leaves behind decides whether the next step's plain render can be taken over."""
    after = b"ls\r\nX\tx\r\nY\xc3\xa9\r\nZ\x1b[1;31m" + b"z" * 40 + b"\x1b[0m\r\nW\r\n" + PROMPT.encode()
    short = b"ab\tc\xc3\xa9\r\n$ "
    for steps in (
        [[b"ls\r\n" + left], [short]],
        [[b"ls\r\n" + left], [after]],
        [[b"ls\r\n" + left], [after[:7], after[7:]], [short], [after]],
    ):
        session = (PROMPT.encode(), steps, cols, 4, observation_cols, 1 << 16)
        assert run_session(*session) == run_reference_session(*session)


@pytest.mark.parametrize(
    ("sequence", "shown"),
    [
        ("\x1b[?5A", "ab"),  # a private variant pyte does not implement: changes nothing
        ("\x1b[?m", "ab"),
        ("\x1b[?1;2H", "ab"),
        ("\x1b[1;2C", "a b"),  # an extra parameter is ignored, as xterm ignores it
        ("\x1b[1;2;3H", "ab"),
        ("\x1b[3;4;5D", "b"),
    ],
)
def test_odd_sequences_a_task_prints_never_fail_the_step(sequence: str, shown: str) -> None:
    """Sequences on which pyte itself raises TypeError render as a terminal shows them, in the step's
    observation and on the session's screen (so printing one cannot fail an episode)."""
    data = f"a{sequence}b\r\n$ ".encode()
    with pytest.raises(TypeError):
        pyte.ByteStream(pyte.Screen(80, 24)).feed(data)
    assert screen_text(data, 80).split("\n")[0] == shown
    session = TerminalScreen(80, 24)
    session.feed(data)
    assert session.display().split("\n")[0] == shown
