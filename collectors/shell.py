"""A persistent interactive shell inside a sandbox, driven through a pseudo-terminal.

One bash per trajectory keeps cwd, variables, functions and background jobs across turns, and a real
PTY makes interactive programs (a Python REPL, less, Ctrl-C) behave as they do for a person.

Step boundaries. A command step ends when the terminal's foreground process is a bash of this terminal
waiting at its top-level prompt, with no input left unread, and nothing more arrives for a moment. The
collector confirms that from the host (collectors/shell_state.py): the PTY's foreground process group,
the shell's system call and terminal mode, and bash's own globals read from its memory, which say that
no builtin (`read -e`), function, trap, subshell or continuation line is in progress. The exit code is
bash's `$?` read from the same memory. Nothing a process in the sandbox prints can end a step.

The shell also prints an invisible OSC 697 marker with a per-session secret at the end of its prompt
(`PROMPT_COMMAND`, exported so nested bash shells print it too, re-appended if a task replaces `PS1`,
omitted while input is pending). It only tells the collector to look now instead of at its next poll
(every 10 to 100 ms while the terminal is quiet): a prompt without it (a nested shell with its own rc
file, `su -`, PROMPT_COMMAND removed, `exec bash`) is still found. The secret is therefore no proof of
anything; a task that prints it, with or without fake exit codes, in pieces, from a background job or
before `read`, only makes the collector look early.

What a task can still do: replace the terminal's bash with another bash (`exec bash`): that bash's
prompts are real prompts and are confirmed. Replace it with something else (`exec sh`, a fake shell in
Python), or leave the terminal at a program that never returns to bash's prompt: the step is never
confirmed; after the time limit and Ctrl-C it says `sync_lost` and the collection job ends the trajectory
with that reason. Print output right after its own command returns, from a background job: that output
is shown with the next step, as on a real terminal, and counted as late output. A process of the
sandbox cannot read or write the shell's memory (the shell runs from an execute-only copy of bash, so it
is not dumpable, and ptrace is denied by seccomp), so it cannot fake the globals read from the host.

Against an engine whose processes this host cannot see (a remote Docker Engine), or without the rights
to read them, the marker alone ends a step and every step says `boundary: unconfirmed (why)`; a task
that reads the secret from `PROMPT_COMMAND` can then forge boundaries.
"""

from __future__ import annotations

import logging
import re
import secrets
import select
import shlex
import socket
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import docker.errors

from collectors.recording import AsciicastWriter, TerminalScreen, render_screen, screen_text
from collectors.sandbox import WORK_DIR, Sandbox, SandboxError
from collectors.shell_state import PromptState, ShellProbe
from schemas import turn_facts

_log = logging.getLogger(__name__)

# OSC 697 is unassigned; terminals (and our screen emulation) ignore unknown OSC sequences.
_OSC = b"\x1b]697;"
PS1 = r"\u@\h:\w\$ "
# How long a command step waits for the prompt after the Ctrl-C that follows a timeout.
_INTERRUPT_GRACE_S = 3.0
SYNC_LOST = "sync_lost"
# Before a command that follows a step which did not end at the prompt (keystrokes, a timeout), output
# is collected this long first, so a prompt already on its way is not taken for this step's end.
_SETTLE_S = 0.05
# Confirming a prompt from the host: the first look comes this soon after a marker, the looks while the
# terminal is quiet and shows no marker start at the minimum and back off to the maximum. An idle shell
# counts once it is still idle after a quiet period with no output in between: short when the last
# thing read was a marker (everything the shell printed before its prompt has arrived, in order), long
# without one, for the output still on its way from the engine (on a loaded host, milliseconds).
_CONFIRM_FIRST_S = 0.0005
_QUIET_POLL_MIN_S = 0.01
_QUIET_POLL_MAX_S = 0.1
_CONFIRM_QUIET_S = 0.0015
_UNMARKED_QUIET_S = 0.1
# The terminal's bash: an execute-only copy where the image has one (infra/build-images.sh), so the shell
# is not dumpable and no process of the sandbox can read or write its memory.
_SHELL_BINARY = "/usr/lib/worldline/bash"
BOUNDARY_CONFIRMED = "confirmed"


def prompt_command(secret: str) -> str:
    """The shell integration: keep `$?`, emit the marker only when no input is pending, re-append the
    marker to PS1 if a task replaced it. No subshell (bash keeps `$?` across PROMPT_COMMAND itself),
    so a step costs no extra process."""
    return (
        "__wl_rc=$?; if read -t 0 2>/dev/null; then __wl_m=; "
        f"else printf -v __wl_m '\\033]697;{secret};%s\\007' \"$__wl_rc\"; fi; "
        'case "$PS1" in *__wl_m*) ;; *) PS1="$PS1"\'\\[${__wl_m}\\]\';; esac'
    )


def _rcfile(secret: str) -> str:
    """What the outer bash reads instead of ~/.bashrc (it comes through an environment variable that
    the rc file removes, so `env` inside the task shows only PROMPT_COMMAND of ours)."""
    return (
        "unset __WL_RC\n"
        "bind 'set enable-bracketed-paste off' 2>/dev/null\n"
        "HISTCONTROL=ignorespace\n"
        f"PS1={shlex.quote(PS1)}\n"
        f"export PROMPT_COMMAND={shlex.quote(prompt_command(secret))}\n"
    )


class MarkerFilter:
    """Splits the shell's output stream into data and this session's prompt markers (exit codes).

    Only markers with the session's secret count; anything else (a program printing OSC 697) stays
    data. A marker split across reads is held back until it is complete."""

    def __init__(self, secret: str) -> None:
        self.prefix = _OSC + secret.encode() + b";"
        self._marker = re.compile(re.escape(self.prefix) + rb"(\d+)\x07")
        self._held = b""

    def feed(self, chunk: bytes) -> list[bytes | int]:
        """Events in stream order: bytes of output, or an int (the exit code of an idle prompt)."""
        buf = self._held + chunk
        self._held = b""
        events: list[bytes | int] = []
        pos = 0
        for match in self._marker.finditer(buf):
            if match.start() > pos:
                events.append(buf[pos : match.start()])
            events.append(int(match.group(1)))
            pos = match.end()
        rest = buf[pos:]
        cut = self._partial_start(rest)
        if cut is not None:
            self._held = rest[cut:]
            rest = rest[:cut]
        if rest:
            events.append(rest)
        return events

    def flush(self) -> bytes:
        held, self._held = self._held, b""
        return held

    def _partial_start(self, data: bytes) -> int | None:
        """Where an incomplete marker starts at the end of `data` (to wait for its remainder)."""
        i = data.rfind(b"\x1b", max(0, len(data) - len(self.prefix) - 12))
        if i < 0:
            return None
        tail = data[i:]
        if self.prefix.startswith(tail):
            return i
        if tail.startswith(self.prefix) and tail[len(self.prefix) :].isdigit():
            return i
        return None


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
    """What one action produced on the terminal, as screen text, plus the facts around it.

    The text holds only what the terminal showed; what the harness did (a timeout and its Ctrl-C, the
    output cap, a flood, a shell that did not come back) is in `info()`'s harness facts
    (schemas.turn_facts), never in the text."""

    text: str
    exit_code: int | None
    prompt_returned: bool
    timed_out: bool = False
    flooded: bool = False
    omitted_bytes: int = 0
    total_bytes: int = 0
    late_bytes: int = 0  # output of an earlier step that arrived before this step's input was sent
    sync_lost: str | None = None  # why the step's end could not be confirmed by the shell
    shell_ended: str | None = None  # why the shell is gone (exit, killed, sandbox stopped)
    boundary: str | None = None  # "confirmed" from the host, or "unconfirmed (why)"
    timeout_s: float | None = None  # the time limit a timed-out step hit
    flood_limit_bytes: int | None = None  # the limit a flooded step passed
    no_prompt_after_s: float | None = None  # how long the prompt was awaited after the Ctrl-C, in vain

    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"prompt_returned": self.prompt_returned}
        if self.timed_out:
            turn_facts.record(info, turn_facts.TIMED_OUT, {"after_s": self.timeout_s})
        if self.flooded:
            turn_facts.record(info, turn_facts.OUTPUT_FLOOD, {"limit_bytes": self.flood_limit_bytes})
        if self.omitted_bytes:
            kept = self.total_bytes - self.omitted_bytes
            turn_facts.record(
                info, turn_facts.TRUNCATED, {"bytes_total": self.total_bytes, "bytes_kept": kept}
            )
        if self.no_prompt_after_s is not None:
            turn_facts.record(info, turn_facts.NO_PROMPT, {"after_s": self.no_prompt_after_s})
        if self.shell_ended:
            turn_facts.record(info, turn_facts.ENDED, {"reason": self.shell_ended})
        if self.late_bytes:
            info["late_output_bytes"] = self.late_bytes
        if self.sync_lost:
            info[SYNC_LOST] = self.sync_lost
        if self.shell_ended:
            info["shell_ended"] = self.shell_ended
        if self.boundary:
            info["boundary"] = self.boundary
        return info


class _Capture:
    """Bytes of one step: the head up to the cap, then a bounded tail; the middle is only counted.
    `parts` cuts both on line boundaries, so no line is shown in part."""

    def __init__(self, cap: int) -> None:
        self.tail_cap = max(256, cap // 8)
        self.head_cap = max(0, cap - self.tail_cap)
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.total = 0

    def add(self, data: bytes) -> bytes:
        """Keep what fits; returns the part that is kept in the head."""
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
        """(head, bytes omitted, tail): the head ends after a newline and the tail starts after
        one, unless the cut falls inside a line longer than the part (then it is cut at the cap)."""
        head = bytes(self.head)
        tail = b"".join(self.tail)[-self.tail_cap :] if self.tail else b""
        if self.total > len(head) + len(tail):
            end = head.rfind(b"\n") + 1
            if end:
                head = head[:end]
            start = tail.find(b"\n") + 1
            if 0 < start < len(tail):
                tail = tail[start:]
        omitted = self.total - len(head) - len(tail)
        return head, omitted, tail


@dataclass(frozen=True)
class _Prompt:
    """The shell is back at its prompt: its `$?` and how the boundary is known."""

    exit_code: int | None
    boundary: str | None


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
        observation_cols: int | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.environment = dict(environment or {})  # set in the shell's environment (SWE: no pagers)
        self.cols, self.rows = cols, rows
        # The width observations wrap at: the terminal's (lines wrap as the user saw them), or
        # wider for tool output that is read as text (SWE's Bash) rather than looked at.
        self.observation_cols = observation_cols or cols
        self.recorder = recorder
        self.screen = TerminalScreen(cols, rows)
        self.workdir = workdir
        self.secret = secrets.token_hex(16)
        self.markers = MarkerFilter(self.secret)
        self._sock: socket.socket | None = None
        self._exec_id: str | None = None
        self._pending: deque[bytes | int] = deque()  # events read past the end of the last step
        self.at_prompt = False  # the last event seen was an idle prompt
        self.ended: str | None = None  # set once the shell is gone
        self.probe: ShellProbe | None = None  # the host's view of the shell; None: unconfirmed boundaries
        self.unconfirmed: str | None = None  # why boundaries cannot be confirmed from the host
        self.last_state: PromptState | None = None  # the last look from the host that was not idle

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self, timeout_s: float = 60.0) -> str:
        """Start bash and return the first prompt as the terminal shows it."""
        api = self.sandbox.client.api
        try:
            exec_id = api.exec_create(
                self.sandbox.container.id,
                [
                    "bash",
                    "-c",
                    f'B={_SHELL_BINARY}; [ -x "$B" ] || B=bash; '
                    'exec -a bash "$B" --noprofile --rcfile <(printf %s "$__WL_RC") -i',
                ],
                stdin=True,
                tty=True,
                environment={
                    **self.environment,
                    "TERM": "xterm",
                    "COLUMNS": str(self.cols),
                    "LINES": str(self.rows),
                    "__WL_RC": _rcfile(self.secret),
                },
                workdir=self.workdir,
            )["Id"]
            conn = api.exec_start(exec_id, socket=True, tty=True)
        except docker.errors.APIError as exc:
            raise SandboxError(f"sandbox {self.sandbox.name}: cannot start bash on a PTY: {exc}") from exc
        self._exec_id = exec_id
        self._sock = getattr(conn, "_sock", conn)
        try:
            api.exec_resize(exec_id, height=self.rows, width=self.cols)
        except docker.errors.APIError:
            pass  # the size is also in COLUMNS/LINES; some engines refuse a resize this early
        capture = _Capture(1 << 20)
        # The first prompt comes before any command of the task ran in this shell, so its marker is
        # trusted; only then is the process the engine reports certainly bash (not still runc's init).
        self.probe = None
        prompt = self._pump(capture, time.monotonic() + timeout_s, stop_on_prompt=True, record=False)
        if prompt is None:
            raise SandboxError(
                f"sandbox {self.sandbox.name} ({self.sandbox.image}): bash did not show a prompt within "
                f"{timeout_s:.0f} s; the image needs bash (use worldline/debian)"
            )
        probe, why = ShellProbe.attach(self._shell_pid(timeout_s), self.secret)
        if probe is not None:
            state = probe.check()
            for _ in range(100):  # bash reaches readline's wait a moment after its prompt
                if state.idle:
                    break
                time.sleep(0.01)
                state = probe.check()
            if not state.idle:
                probe, why = None, f"the shell is not seen waiting at its first prompt ({state.reason})"
        self.probe = probe
        self.unconfirmed = None if self.probe is not None else f"unconfirmed ({why})"
        if self.probe is None:
            _log.warning("sandbox %s: step boundaries are %s", self.sandbox.name, self.unconfirmed)
        head, _, _ = capture.parts()
        first = screen_text(head, self.cols).split("\n")[-1]
        self.screen = TerminalScreen(self.cols, self.rows)
        self.screen.feed(first.encode())
        if self.recorder is not None:
            self.recorder.output(first.encode())
        return first

    def _shell_pid(self, timeout_s: float) -> int | None:
        """The shell's process id on the engine's host; the engine reports it once the exec runs."""
        deadline = time.monotonic() + min(timeout_s, 10.0)
        while True:
            try:
                pid = int(self.sandbox.client.api.exec_inspect(self._exec_id).get("Pid") or 0)
            except (docker.errors.APIError, ValueError, TypeError):
                return None
            if pid > 0 or time.monotonic() >= deadline:
                return pid or None
            time.sleep(0.01)

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None

    def interrupt(self) -> None:
        """Make a blocked step return now (from another thread): the socket is shut down."""
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # -- actions ------------------------------------------------------------------------------------
    def run_command(self, command: str, *, timeout_s: float) -> ShellOutput:
        """Type a command line and wait until the shell has run all of it and shows its prompt;
        overrunning commands get Ctrl-C and say so."""
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
        if self.ended is not None:
            return self._ended_output(capture)
        # What the cursor's row showed before this step (the prompt): the step's first line continues
        # it, and wraps where it did on screen. Read now: once the step's bytes are fed, the cursor's
        # row is the next prompt. A step that starts on the alternate screen has no such row.
        prefix = "" if self.screen.alternate else self.screen.cursor_line()
        # Output that arrived after the previous step ended (a prompt after keystrokes, a background
        # job) is shown before this step's input, as on a real terminal, and counted.
        settle = _SETTLE_S if until_prompt and not self.at_prompt else 0.0
        self._pump(capture, time.monotonic() + settle, stop_on_prompt=False)
        late = capture.total
        consumed: tuple[int, int] | None = None
        if data:
            self.at_prompt = False
            if self.probe is not None:
                pid, reads = self.probe.position()
                consumed = (pid, reads + len(data))
            self._send_raw(data)
        deadline = time.monotonic() + wait_s
        self.last_state = None
        prompt = self._pump(capture, deadline, stop_on_prompt=until_prompt or not data, consumed=consumed)
        timed_out = flooded = False
        sync_lost: str | None = None
        no_prompt_after: float | None = None
        notes: list[str] = []  # for the recording's markers only
        if capture.total > limits.flood_limit_bytes:
            flooded = True
        elif timeout_s is not None and prompt is None and self.ended is None:
            timed_out = True
        if (flooded or timed_out) and self.ended is None:
            self._send_raw(b"\x03")
            prompt = self._pump(
                capture, time.monotonic() + _INTERRUPT_GRACE_S, stop_on_prompt=True, ignore_flood=True
            )
            if flooded:
                notes.append(
                    f"[worldline: output exceeded {limits.flood_limit_bytes} bytes; the command was "
                    "interrupted with Ctrl-C]"
                )
            else:
                notes.append(
                    f"[worldline: command timed out after {timeout_s:g} s and was interrupted with Ctrl-C]"
                )
            if prompt is None and self.ended is None:
                no_prompt_after = _INTERRUPT_GRACE_S
                notes.append("[worldline: the shell did not return to a prompt after Ctrl-C]")
                seen = f" (last seen: {self.last_state.reason})" if self.last_state is not None else ""
                sync_lost = (
                    "the shell did not return to its prompt after Ctrl-C (a shell other than bash such as "
                    "sh, a program that ignores Ctrl-C or reads the terminal itself)" + seen + "; later "
                    "observations could not be attributed to their actions"
                )
        exit_code = prompt.exit_code if prompt is not None else None
        prompt_returned = prompt is not None
        if self.ended is not None:
            notes.append(f"[worldline: {self.ended}]")
        head, omitted, tail = capture.parts()
        text = self._observation_text(head, omitted, tail, prefix)
        if notes and self.recorder is not None:
            self.recorder.marker(" ".join(notes))  # the cast's markers; never observation text
        return ShellOutput(
            text=text,
            exit_code=exit_code,
            prompt_returned=prompt_returned,
            timed_out=timed_out,
            flooded=flooded,
            omitted_bytes=omitted,
            total_bytes=capture.total,
            late_bytes=late,
            sync_lost=sync_lost,
            shell_ended=self.ended,
            boundary=(prompt.boundary if prompt is not None else None),
            timeout_s=timeout_s if timed_out else None,
            flood_limit_bytes=limits.flood_limit_bytes if flooded else None,
            no_prompt_after_s=no_prompt_after,
        )

    def _ended_output(self, capture: _Capture) -> ShellOutput:
        return ShellOutput(
            text="",
            exit_code=None,
            prompt_returned=False,
            shell_ended=self.ended,
        )

    def _observation_text(self, head: bytes, omitted: int, tail: bytes, prefix: str) -> str:
        """What the terminal showed for the step: from the row the input was typed on (its prompt
        kept) to the next prompt; with the output cap, the first and last whole lines."""
        if self.screen.alternate:
            return self.screen.display()
        rendered = render_screen(head, self.observation_cols, prefix=prefix, keep_prefix=True)
        # The session's screen has only queued the step's bytes: it takes this render's rows when
        # they are what it would show, else it emulates the bytes now.
        self.screen.adopt(rendered)
        head_text = rendered.text
        if not omitted and not tail:
            return head_text
        tail_text = screen_text(tail, self.observation_cols)
        return head_text + ("" if head_text.endswith("\n") or not head_text else "\n") + tail_text

    def _send_raw(self, data: bytes, *, record: bool = True) -> None:
        if self._sock is None:
            raise SandboxError(f"sandbox {self.sandbox.name}: the shell is not running")
        if record and self.recorder is not None:
            self.recorder.input(data.decode("utf-8", "replace"))
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self._mark_ended()
            raise SandboxError(f"sandbox {self.sandbox.name}: the shell's PTY closed ({exc})") from exc

    def _next_events(self, deadline: float) -> list[bytes | int] | None:
        """Pending events, else one read's worth; [] at the deadline, None when the shell is gone."""
        if self._pending:
            events = list(self._pending)
            self._pending.clear()
            return events
        if self._sock is None or self.ended is not None:
            return None
        remaining = max(0.0, deadline - time.monotonic())
        try:
            ready, _, _ = select.select([self._sock], [], [], remaining)
        except (OSError, ValueError):
            ready = [self._sock]
        if not ready:
            return []
        try:
            chunk = self._sock.recv(65536)
        except OSError:
            chunk = b""
        if not chunk:
            held = self.markers.flush()
            self._mark_ended()
            return [held] if held else None
        return self.markers.feed(chunk)

    def _pump(
        self,
        capture: _Capture,
        deadline: float,
        *,
        stop_on_prompt: bool,
        ignore_flood: bool = False,
        record: bool = True,
        consumed: tuple[int, int] | None = None,
    ) -> _Prompt | None:
        """Read until a confirmed idle prompt, the deadline, or a flood; None if no prompt came.
        Every byte goes to the recording; the capture keeps what the observation may show.

        `consumed` is (pid, reads) of the foreground process when the step's input was sent plus its
        length: a prompt of that same process counts only after that many read calls (readline reads a
        byte per call), so a prompt shown before the input arrived, or between its lines, is not the
        step's end. After Ctrl-C there is none: the terminal discards unread input."""
        flood_limit = self.sandbox.limits.flood_limit_bytes
        probe = self.probe if stop_on_prompt else None
        poll = _QUIET_POLL_MIN_S
        idle_since: float | None = None  # when the host last saw the shell idle, with no output since
        marked = False  # the last event read is a marker
        while True:
            wake = deadline
            if probe is not None:
                quiet = _CONFIRM_QUIET_S if marked else _UNMARKED_QUIET_S
                wake = min(deadline, (idle_since + quiet) if idle_since else time.monotonic() + poll)
            events = self._next_events(wake)
            if events is None:
                return None  # the shell is gone (exit, killed, sandbox stopped)
            if not events:
                if probe is None or time.monotonic() >= deadline:
                    return None
                state = probe.check()
                if state.idle and consumed and state.pid == consumed[0] and state.reads < consumed[1]:
                    state = PromptState(False, "the shell has not read all of the step's input yet")
                if not state.idle:
                    self.last_state, idle_since = state, None
                    poll = min(poll * 2, _CONFIRM_QUIET_S * 4 if marked else _QUIET_POLL_MAX_S)
                elif idle_since is None:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since < (_CONFIRM_QUIET_S if marked else _UNMARKED_QUIET_S):
                    continue
                else:
                    self.at_prompt = True
                    _log.debug(
                        "prompt confirmed: %s, $?=%s, reads %s (needed %s), after a marker: %s",
                        state.reason,
                        state.exit_code,
                        state.reads,
                        consumed,
                        marked,
                    )
                    return _Prompt(state.exit_code, BOUNDARY_CONFIRMED)
                continue
            idle_since = None
            for i, event in enumerate(events):
                if isinstance(event, int):
                    if self.probe is None:  # no view from the host: the marker is all there is
                        self.at_prompt = True
                        if stop_on_prompt:
                            self._pending.extend(events[i + 1 :])
                            return _Prompt(event, self.unconfirmed)
                    poll, marked = _CONFIRM_FIRST_S, True  # a prompt is probably there: look now
                    continue
                self.at_prompt = marked = False
                poll = _QUIET_POLL_MIN_S  # output: the command still runs, or its prompt is coming
                if record and self.recorder is not None:
                    self.recorder.output(event)
                kept = capture.add(event)
                if kept:
                    self.screen.feed(kept)
            if not ignore_flood and capture.total > flood_limit:
                return None

    def _mark_ended(self) -> None:
        """The PTY closed: find out why (the shell exited, was killed, or the sandbox stopped)."""
        if self.ended is not None:
            return
        self.ended = describe_shell_end(self.sandbox, self._exec_id)


def describe_shell_end(sandbox: Sandbox, exec_id: str | None) -> str:
    """Why the shell's PTY closed, in words, from the engine's view of the exec and the container."""
    api = sandbox.client.api
    try:
        state = api.inspect_container(sandbox.container.id).get("State", {})
    except (docker.errors.DockerException, OSError):
        return "the sandbox is gone (removed while the step ran)"
    if not state.get("Running", False):
        return f"the sandbox stopped while the step ran (state {state.get('Status', '?')})"
    code = None
    for _ in range(20):  # the engine records the exit code a moment after the PTY closes
        try:
            info = api.exec_inspect(exec_id) if exec_id else {}
        except (docker.errors.DockerException, OSError):
            break
        if not info.get("Running") and info.get("ExitCode") is not None:
            code = int(info["ExitCode"])
            break
        time.sleep(0.05)
    if code is not None and code >= 128:
        signal_no = code - 128
        if signal_no == 9 and _oom_kills(sandbox) > 0:
            return "the shell was killed by the out-of-memory killer (exit 137)"
        return f"the shell was killed by signal {signal_no} (exit {code})"
    if code is not None:
        return f"the shell exited with status {code}"
    return "the shell's terminal closed"


def _oom_kills(sandbox: Sandbox) -> int:
    """The sandbox cgroup's OOM kill count (cgroup v2 memory.events; v1 memory.oom_control)."""
    probe = (
        "cat /sys/fs/cgroup/memory.events 2>/dev/null || cat /sys/fs/cgroup/memory/memory.oom_control "
        "2>/dev/null"
    )
    try:
        result = sandbox.exec(probe, timeout_s=10)
    except SandboxError:
        return 0
    match = re.search(r"^oom_kill\s+(\d+)", result.output, re.MULTILINE)
    return int(match.group(1)) if match else 0
