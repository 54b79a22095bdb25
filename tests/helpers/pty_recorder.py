"""Record real programs through a pseudo-terminal as asciicast v2, with input events, for tests.

`record(argv, keys)` starts ARGV on a PTY of the given size, sends each key chunk after the output has
settled, and writes every output and input chunk with its time, the way `asciinema rec --stdin` does.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import termios
import time
from pathlib import Path

# Key scripts the recording tests replay in each format (asciicast, `script` typescripts).
TYPE_AHEAD_KEYS = ["echo one\recho two\recho three\r"]
"""Three commands sent at once, before the shell printed anything."""
REPL_KEYS = [
    "python3 -q\r",
    "def f(x):\r",
    "    return x * 2\r",
    "\r",
    "for i in range(2):\r",
    "    print(f(i))\r",
    "\r",
    "exit()\r",
]
"""A Python REPL session with indented `def` and `for` bodies."""
CLEAR_KEYS = [
    "echo first\r",
    "printf 'dev@box:~$ not a command\\n'\r",
    "clear\r",
    "echo second\r",
    "sleep 5 # cut",
    "\x03",
    "echo third\r",
]
"""Output before a `clear`, a line of output that looks like a prompt, and a command cut by Ctrl-C."""


def _drain(
    fd: int, events: list[list[object]], start: float, quiet_s: float, limit_s: float, first_s: float = 0.0
) -> bool:
    """Read output until it has been quiet for quiet_s (or limit_s passed); False once the program ended.
    Before the first output the wait is at least first_s: a key's echo can be late on a loaded machine,
    and the next key sent before it would be a different recording."""
    deadline = time.monotonic() + limit_s
    last = time.monotonic()
    got = False
    while time.monotonic() < deadline and time.monotonic() - last < (
        quiet_s if got else max(quiet_s, first_s)
    ):
        ready, _, _ = select.select([fd], [], [], 0.02)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:
            return False
        if not data:
            return False
        events.append([round(time.monotonic() - start, 6), "o", data.decode("utf-8", "replace")])
        last, got = time.monotonic(), True
    return True


def record(
    argv: list[str],
    keys: list[str],
    out: Path,
    *,
    width: int = 80,
    height: int = 24,
    env: dict[str, str] | None = None,
    with_input: bool = True,
    quiet_s: float = 0.15,
) -> Path:
    home = out.parent / "home"
    home.mkdir(exist_ok=True)
    pid, fd = pty.fork()
    if pid == 0:  # the child: the program under test
        # The size is set before the program starts: one that reads it once at startup (script) sees it.
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
        os.chdir(out.parent)
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm-256color", "HOME": str(home)}
        os.execvpe(argv[0], argv, {**base, "PS1": "dev@box:~$ ", "LANG": "C.UTF-8", **(env or {})})
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
    start = time.monotonic()
    events: list[list[object]] = []
    alive = _drain(fd, events, start, 0.4, 5.0)
    for chunk in keys:
        if not alive:
            break
        if with_input:
            events.append([round(time.monotonic() - start, 6), "i", chunk])
        os.write(fd, chunk.encode())
        alive = _drain(fd, events, start, quiet_s, 5.0, first_s=1.0)
    _drain(fd, events, start, 0.3, 2.0)
    try:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    os.close(fd)
    header = {"version": 2, "width": width, "height": height, "timestamp": 1700000000}
    out.write_text("\n".join(json.dumps(e) for e in [header, *events]) + "\n")
    return out
