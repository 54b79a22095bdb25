"""A persistent interactive shell inside a sandbox, driven through a pseudo-terminal.

One bash per trajectory keeps cwd, variables, functions and background jobs across turns, and a real
PTY makes interactive programs (a Python REPL, less, Ctrl-C) behave as they do for a person. Command
completion is detected by an invisible OSC marker at the end of the prompt that also carries `$?`.
"""

from __future__ import annotations

import re
import select
import shlex
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import docker.errors

from collectors.recording import AsciicastWriter, TerminalScreen, render_line_output
from collectors.sandbox import WORK_DIR, Sandbox, SandboxError

# OSC 697 is unassigned; terminals (and our renderer) ignore unknown OSC sequences.
PROMPT_MARKER = re.compile(rb"\x1b\]697;(\d+)\x07")
_MARKER_SCAN_OVERLAP = 32
PS1 = r"\u@\h:\w\$ "
# __wl_rc keeps $? for the marker; if a task replaces PS1 the marker is appended again, so completion
# detection survives `export PS1=...`.
_PROMPT_COMMAND = (
    "__wl_rc=$?; case \"$PS1\" in *']697;'*) ;; *) PS1=\"$PS1\"'\\[\\e]697;${__wl_rc}\\a\\]';; esac"
)
# Sent once before recording starts (leading space: kept out of history). Shell variables, not
# exported ones, so `env` inside the task shows nothing of ours.
_INIT_LINE = (
    " bind 'set enable-bracketed-paste off' 2>/dev/null; HISTCONTROL=ignorespace; "
    f"PS1={shlex.quote(PS1)}; PROMPT_COMMAND={shlex.quote(_PROMPT_COMMAND)}\n"
)

TMUX_KEYS = {
    "Enter": "\r",
    "C-m": "\r",
    "Escape": "\x1b",
    "Tab": "\t",
    "BSpace": "\x7f",
    "Space": " ",
    "Up": "\x1b[A",
    "Down": "\x1b[B",
    "Right": "\x1b[C",
    "Left": "\x1b[D",
    "Home": "\x1b[H",
    "End": "\x1b[F",
    "PageUp": "\x1b[5~",
    "PPage": "\x1b[5~",
    "PageDown": "\x1b[6~",
    "NPage": "\x1b[6~",
}
_CTRL_KEY = re.compile(r"^C-([a-zA-Z@\[\\\]^_])$")
_META_KEY = re.compile(r"^M-(.)$")


def keys_to_bytes(keystrokes: str) -> bytes:
    """Keystrokes as sent to the PTY: a tmux key name (`C-c`, `Enter`, `Up`) or literal text."""
    if keystrokes in TMUX_KEYS:
        return TMUX_KEYS[keystrokes].encode()
    ctrl = _CTRL_KEY.match(keystrokes)
    if ctrl:
        return bytes([ord(ctrl.group(1).upper()) & 0x1F])
    meta = _META_KEY.match(keystrokes)
    if meta:
        return b"\x1b" + meta.group(1).encode()
    return keystrokes.encode("utf-8")


@dataclass
class ShellOutput:
    """What one action produced on the terminal, rendered, plus the facts around it."""

    text: str
    exit_code: int | None
    prompt_returned: bool
    timed_out: bool = False
    flooded: bool = False
    omitted_bytes: int = 0
    total_bytes: int = 0

    def info(self) -> dict[str, Any]:
        return {
            "prompt_returned": self.prompt_returned,
            "timed_out": self.timed_out,
            "output_flood": self.flooded,
            "omitted_bytes": self.omitted_bytes,
            "total_bytes": self.total_bytes,
        }


class _Capture:
    """Bytes of one step: the head up to the cap, then a bounded tail; the middle is only counted."""

    def __init__(self, cap: int) -> None:
        self.tail_cap = max(256, cap // 8)
        self.head_cap = max(0, cap - self.tail_cap)
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.total = 0

    def add(self, data: bytes) -> bytes:
        """Keep what fits; returns the part that is kept in the head (for recording)."""
        self.total += len(data)
        room = self.head_cap - len(self.head)
        kept = data[:room] if room > 0 else b""
        self.head += kept
        rest = data[len(kept) :]
        if rest:
            self.tail.append(rest)
            self.tail_len += len(rest)
            while self.tail_len - len(self.tail[0]) >= self.tail_cap:
                self.tail_len -= len(self.tail.popleft())
        return kept

    def parts(self) -> tuple[bytes, int, bytes]:
        tail = b"".join(self.tail)[-self.tail_cap :] if self.tail else b""
        omitted = self.total - len(self.head) - len(tail)
        return bytes(self.head), omitted, tail


class PersistentShell:
    """An interactive bash on a PTY inside a sandbox; every byte in and out goes to the recording."""

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        cols: int = 160,
        rows: int = 40,
        recorder: AsciicastWriter | None = None,
        workdir: str = WORK_DIR,
    ) -> None:
        self.sandbox = sandbox
        self.cols, self.rows = cols, rows
        self.recorder = recorder
        self.screen = TerminalScreen(cols, rows)
        self.workdir = workdir
        self._sock: socket.socket | None = None
        self._exec_id: str | None = None
        self._scan_tail = b""

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self, timeout_s: float = 10.0) -> str:
        """Start bash and return the first prompt as the terminal shows it."""
        api = self.sandbox.client.api
        try:
            exec_id = api.exec_create(
                self.sandbox.container.id,
                ["bash", "--noprofile", "--norc", "-i"],
                stdin=True,
                tty=True,
                environment={"TERM": "xterm", "COLUMNS": str(self.cols), "LINES": str(self.rows)},
                workdir=self.workdir,
            )["Id"]
            conn = api.exec_start(exec_id, socket=True, tty=True)
        except docker.errors.APIError as exc:
            raise SandboxError(f"sandbox {self.sandbox.name}: cannot start bash on a PTY: {exc}") from exc
        self._exec_id = exc_id = exec_id
        self._sock = getattr(conn, "_sock", conn)
        try:
            api.exec_resize(exc_id, height=self.rows, width=self.cols)
        except docker.errors.APIError:
            pass  # the size is also in COLUMNS/LINES; some engines refuse a resize this early
        self._send_raw(_INIT_LINE.encode(), record=False)
        raw = self._read_until_prompt(time.monotonic() + timeout_s, record=False)
        if raw is None:
            raise SandboxError(
                f"sandbox {self.sandbox.name} ({self.sandbox.image}): bash did not show a prompt within "
                f"{timeout_s:.0f} s; the image needs bash (use worldline/debian)"
            )
        # Everything before the last line is the echo of our init line; the last line is the prompt.
        prompt = render_line_output(PROMPT_MARKER.sub(b"", raw)).split("\n")[-1]
        self.screen.feed(prompt.encode())
        if self.recorder is not None:
            self.recorder.output(prompt.encode())
        return prompt

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None

    # -- actions ------------------------------------------------------------------------------------
    def run_command(self, command: str, *, timeout_s: float) -> ShellOutput:
        """Type a command line and wait for the prompt; overrunning commands get Ctrl-C and say so."""
        line = command if command.endswith("\n") else command + "\n"
        return self._interact(line.encode("utf-8"), wait_s=timeout_s, until_prompt=True, timeout_s=timeout_s)

    def send_keys(self, keystrokes: str, *, duration_s: float, timeout_s: float) -> ShellOutput:
        """Send keystrokes and watch the terminal for `duration_s` (or until a prompt returns)."""
        data = keys_to_bytes(keystrokes)
        wait = max(0.0, min(duration_s, timeout_s))
        return self._interact(data, wait_s=wait, until_prompt=data.endswith((b"\n", b"\r")), timeout_s=None)

    # -- internals ----------------------------------------------------------------------------------
    def _interact(
        self, data: bytes, *, wait_s: float, until_prompt: bool, timeout_s: float | None
    ) -> ShellOutput:
        limits = self.sandbox.limits
        capture = _Capture(limits.output_cap_bytes)
        if data:
            self._send_raw(data)
        deadline = time.monotonic() + wait_s
        exit_code = self._pump(capture, deadline, stop_on_prompt=until_prompt or not data)
        prompt_returned = exit_code is not None
        timed_out = flooded = False
        notes: list[str] = []
        if capture.total > limits.flood_limit_bytes:
            flooded = True
        elif timeout_s is not None and not prompt_returned:
            timed_out = True
        if flooded or timed_out:
            self._send_raw(b"\x03")
            exit_code = self._pump(capture, time.monotonic() + 3.0, stop_on_prompt=True, ignore_flood=True)
            prompt_returned = exit_code is not None
            if flooded:
                notes.append(
                    f"[worldline: output exceeded {limits.flood_limit_bytes} bytes; the command was "
                    "interrupted with Ctrl-C]"
                )
            else:
                notes.append(
                    f"[worldline: command timed out after {timeout_s:g} s and was interrupted with Ctrl-C]"
                )
            if not prompt_returned:
                notes.append("[worldline: the shell did not return to a prompt after Ctrl-C]")
        head, omitted, tail = capture.parts()
        text = self._render(head, omitted, tail)
        if notes:
            text = text + ("\n" if text and not text.endswith("\n") else "") + "\n".join(notes)
            if self.recorder is not None:
                self.recorder.marker(" ".join(notes))
        return ShellOutput(
            text=text,
            exit_code=exit_code,
            prompt_returned=prompt_returned,
            timed_out=timed_out,
            flooded=flooded,
            omitted_bytes=omitted,
            total_bytes=capture.total,
        )

    def _render(self, head: bytes, omitted: int, tail: bytes) -> str:
        if self.screen.alternate:
            return self.screen.display()
        head_text = render_line_output(PROMPT_MARKER.sub(b"", head))
        if not omitted and not tail:
            return head_text
        tail_text = render_line_output(PROMPT_MARKER.sub(b"", tail))
        marker = f"[worldline: output truncated: {omitted} bytes omitted]" if omitted else ""
        return "\n".join(p for p in (head_text, marker, tail_text) if p)

    def _send_raw(self, data: bytes, *, record: bool = True) -> None:
        if self._sock is None:
            raise SandboxError(f"sandbox {self.sandbox.name}: the shell is not running")
        if record and self.recorder is not None:
            self.recorder.input(data.decode("utf-8", "replace"))
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise SandboxError(f"sandbox {self.sandbox.name}: the shell's PTY closed ({exc})") from exc

    def _pump(
        self, capture: _Capture, deadline: float, *, stop_on_prompt: bool, ignore_flood: bool = False
    ) -> int | None:
        """Read until the prompt marker (returns `$?`), the deadline, or a flood; None if no prompt."""
        assert self._sock is not None
        last_code: int | None = None
        flood_limit = self.sandbox.limits.flood_limit_bytes
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return last_code
            ready, _, _ = select.select([self._sock], [], [], remaining)
            if not ready:
                return last_code
            try:
                chunk = self._sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                return last_code  # the shell exited (e.g. the agent typed `exit`)
            kept = capture.add(chunk)
            if kept:
                self.screen.feed(kept)
                if self.recorder is not None:
                    self.recorder.output(PROMPT_MARKER.sub(b"", kept))
            code = self._scan_marker(chunk)
            if code is not None:
                last_code = code
                if stop_on_prompt:
                    return code
            if not ignore_flood and capture.total > flood_limit:
                return last_code

    def _read_until_prompt(self, deadline: float, *, record: bool) -> bytes | None:
        assert self._sock is not None
        buf = bytearray()
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self._sock], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = self._sock.recv(65536)
            if not chunk:
                break
            buf += chunk
            if self._scan_marker(chunk) is not None:
                return bytes(buf)
        return None

    def _scan_marker(self, chunk: bytes) -> int | None:
        """The exit code of the last complete marker in this chunk, including one split across chunks."""
        window = self._scan_tail + chunk
        start = len(self._scan_tail)
        code: int | None = None
        for match in PROMPT_MARKER.finditer(window):
            if match.end() > start:
                code = int(match.group(1))
        self._scan_tail = window[-_MARKER_SCAN_OVERLAP:]
        return code
