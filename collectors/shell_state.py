"""What the host sees of a sandboxed shell: whether it waits at its own prompt, read from /proc.

With a local engine (rootful Podman here, or Docker on the same machine) a container's processes are
host processes, so the collector reads, from outside the sandbox, the facts that say a command step
ended, none of which a process in the sandbox can fake:

- the terminal's foreground process group is led by a bash that is the terminal shell or one of its
  descendants (`tpgid` in /proc/PID/stat; /proc/PID/exe is a bash binary),
- that bash sleeps in the system call readline waits in (pselect6 on the terminal), with the terminal in
  readline's raw mode (no ICANON) and no unread input queued on it (TIOCINQ),
- and bash's own globals, read from its memory through /proc/PID/mem at the addresses its dynamic symbol
  table gives, say it is at the top level of its command loop: no builtin running (`read -e` runs
  readline from a builtin), no function, trap, subshell or continuation line (PS2) in progress.

The exit code comes from the same place: `last_command_exit_value`, bash's `$?`. The collector process
needs the rights of the engine's host user over these processes (root for rootful Podman); where it
lacks them or the engine is remote, `ShellProbe.attach` says why and the shell falls back to its
in-band marker, recording every boundary as unconfirmed.
"""

from __future__ import annotations

import errno
import fcntl
import os
import platform
import struct
import termios
import threading
from dataclasses import dataclass
from pathlib import Path

# The bash globals read at a prompt (all C ints in every bash since 4.x).
_GLOBALS = (
    "last_command_exit_value",
    "executing_builtin",
    "variable_context",
    "running_trap",
    "subshell_environment",
    "current_command_line_count",
    "interactive",
)
# System calls bash's readline waits in, per architecture: pselect6 (and read, for builds without it).
_WAIT_SYSCALLS = {"x86_64": {270, 0}, "aarch64": {72, 63}, "arm64": {72, 63}}
_MAX_ANCESTRY = 32  # how far up from the foreground shell the terminal shell may be (nested shells)


@dataclass(frozen=True)
class PromptState:
    """One look at the terminal: whether its shell idles at a prompt, and what it knows then."""

    idle: bool
    reason: str  # why not idle, or which shell is ("the terminal shell", "a nested shell (pid N)")
    exit_code: int | None = None
    pid: int = 0
    reads: int = 0  # read system calls the idle shell has made (readline reads one byte per call)


class _Symbols:
    """Offsets of bash's globals in its executable, from the ELF dynamic symbol table (cached)."""

    _cache: dict[tuple[int, int], dict[str, int] | None] = {}
    _lock = threading.Lock()

    @classmethod
    def of(cls, exe: str) -> dict[str, int] | None:
        st = os.stat(exe)
        key = (st.st_dev, st.st_ino)
        with cls._lock:
            if key in cls._cache:
                return cls._cache[key]
        try:
            found = _dynamic_symbols(Path(exe).read_bytes(), set(_GLOBALS))
        except (OSError, ValueError, struct.error):
            found = {}
        table = found if set(found) == set(_GLOBALS) else None
        with cls._lock:
            cls._cache[key] = table
        return table


def _dynamic_symbols(elf: bytes, wanted: set[str]) -> dict[str, int]:
    """Values of `wanted` symbols in a little-endian ELF64 file's .dynsym (its section headers)."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    found: dict[str, int] = {}
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != 11:  # SHT_DYNSYM
            continue
        str_offset = sections[link][4]
        for pos in range(offset, offset + size, entsize or 24):
            st_name, _st_info, _st_other, _shndx, st_value, _st_size = struct.unpack_from("<IBBHQQ", elf, pos)
            end = elf.index(b"\0", str_offset + st_name)
            name = elf[str_offset + st_name : end].decode("ascii", "replace")
            if name in wanted and st_value:
                found[name] = st_value
    return found


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat from field 3 (state) on; the command name may contain spaces and parentheses."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def _read_calls(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("syscr:"):
            return int(line.split()[1])
    return 0


def _load_base(pid: int, exe: str) -> int:
    """Where the executable's first segment is mapped (PIE load address)."""
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5] == exe and int(parts[2], 16) == 0:
            return int(parts[0].split("-")[0], 16)
    raise ValueError(f"{exe} is not mapped in process {pid}")


class ShellProbe:
    """Looks at the terminal shell of one sandbox from the host (see the module docstring)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.tty_nr = int(_stat_fields(pid)[4])
        self.waits = _WAIT_SYSCALLS.get(platform.machine(), set())

    @classmethod
    def attach(cls, pid: int | None, token: str) -> tuple[ShellProbe | None, str]:
        """A probe for the shell process `pid` whose environment holds `token`, or None and why not."""
        if not pid:
            return None, "the engine does not report the shell's process id"
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError as exc:
            return None, f"the shell's process {pid} is not visible from this host ({exc.strerror})"
        if token.encode() not in environ:
            return None, f"process {pid} on this host is not the sandbox's shell (a remote engine?)"
        try:
            probe = cls(pid)
            exe = os.readlink(f"/proc/{pid}/exe")
            if _Symbols.of(f"/proc/{pid}/exe") is None:
                return None, f"the shell {exe} has no bash symbol table to read its state from"
        except (OSError, ValueError) as exc:
            return None, f"the shell's process {pid} cannot be inspected: {exc}"
        return probe, ""

    def check(self) -> PromptState:
        """Whether the terminal's foreground shell waits at its top-level prompt, with its `$?`."""
        try:
            return self._check()
        except (OSError, ValueError, IndexError, struct.error) as exc:
            if isinstance(exc, OSError) and exc.errno in (errno.ENOENT, errno.ESRCH):
                return PromptState(False, "the shell's process is gone")
            return PromptState(False, f"the shell's state could not be read: {exc}")

    def _check(self) -> PromptState:
        top = _stat_fields(self.pid)
        tpgid = int(top[5])
        if tpgid <= 0:
            return PromptState(False, "the terminal has no foreground process group")
        leader = _stat_fields(tpgid)
        if int(leader[2]) != tpgid or int(leader[4]) != self.tty_nr:
            return PromptState(False, f"the foreground group {tpgid} is not led by a shell on this terminal")
        if leader[0] != "S":
            return PromptState(False, f"the foreground process {tpgid} is not waiting (state {leader[0]})")
        if tpgid != self.pid and not self._descends(tpgid):
            return PromptState(False, f"the foreground process {tpgid} is not started by the terminal shell")
        syscall = Path(f"/proc/{tpgid}/syscall").read_text().split()
        if (
            len(syscall) < 2
            or not syscall[0].isdigit()
            or int(syscall[0]) not in self.waits
            or int(syscall[1], 16) > 1  # read(0, ...) or pselect6(1, {0}, ...): the terminal, nothing else
        ):
            return PromptState(False, f"the foreground process {tpgid} is not waiting for terminal input")
        exe = os.readlink(f"/proc/{tpgid}/exe")
        symbols = _Symbols.of(f"/proc/{tpgid}/exe")
        if symbols is None:
            return PromptState(False, f"the foreground process {tpgid} ({exe}) is not bash")
        values = self._read_globals(tpgid, exe, symbols)
        busy = [name for name in _GLOBALS[1:-1] if values[name] != 0]
        if busy or values["interactive"] != 1:
            return PromptState(False, f"bash {tpgid} reads input, but not at its prompt ({', '.join(busy)})")
        fd = os.open(f"/proc/{tpgid}/fd/0", os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            lflag = termios.tcgetattr(fd)[3]
            pending = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        finally:
            os.close(fd)
        if lflag & termios.ICANON:
            return PromptState(False, f"bash {tpgid} reads a line, not through its prompt's line editor")
        if pending:
            return PromptState(False, f"{pending} bytes of input wait on the terminal")
        who = "the terminal shell" if tpgid == self.pid else f"a nested shell (pid {tpgid})"
        return PromptState(
            True, who, exit_code=values["last_command_exit_value"], pid=tpgid, reads=_read_calls(tpgid)
        )

    def position(self) -> tuple[int, int]:
        """(pid, read system calls) of the terminal's foreground process: taken before input is sent,
        so a prompt counts only once the shell has read that input (it may still be on its way)."""
        try:
            tpgid = int(_stat_fields(self.pid)[5])
            return tpgid, _read_calls(tpgid)
        except (OSError, ValueError, IndexError):
            return 0, 0

    def _descends(self, pid: int) -> bool:
        for _ in range(_MAX_ANCESTRY):
            pid = int(_stat_fields(pid)[1])
            if pid == self.pid:
                return True
            if pid <= 1:
                return False
        return False

    @staticmethod
    def _read_globals(pid: int, exe: str, symbols: dict[str, int]) -> dict[str, int]:
        base = _load_base(pid, exe)
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
        try:
            return {name: struct.unpack("<i", os.pread(fd, 4, base + symbols[name]))[0] for name in _GLOBALS}
        finally:
            os.close(fd)
