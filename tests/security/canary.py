"""Host canaries for the containment suite: things on the machine that runs a task which no task may
read, change or reach.

- a file with a random token, in a private directory on the host (`/etc/passwd`-like data a task must
  never see in an observation, and must never modify or delete);
- a TCP service on the loopback that records every connection it accepts (a task must never reach
  127.0.0.1:PORT on the host);
- an abstract unix socket, which lives in the host's network namespace and is never bind-mounted
  (a task sharing the host's network namespace could connect to it).

`HostCanary.assert_untouched()` fails with what happened; `leaked(text)` says whether a token shows up in
an observation, a shard or anything else a task produced.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class HostCanary:
    """A file, a loopback TCP listener and an abstract unix socket, each carrying a secret token."""

    directory: Path
    token: str = field(default_factory=lambda: f"WLCANARY{secrets.token_hex(12)}")
    tcp_port: int = 0
    abstract_name: str = ""
    connections: list[str] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)
    _sockets: list[socket.socket] = field(default_factory=list)
    _file_digest: str = ""

    @property
    def file(self) -> Path:
        return self.directory / "canary.txt"

    def start(self) -> HostCanary:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.file.write_text(f"canary {self.token}\n")
        os.chmod(self.file, 0o644)
        self._file_digest = self._digest()
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(16)
        self.tcp_port = tcp.getsockname()[1]
        self.abstract_name = f"worldline-canary-{secrets.token_hex(6)}"
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind("\0" + self.abstract_name)
        unix.listen(16)
        for sock, kind in ((tcp, "tcp"), (unix, "unix")):
            self._sockets.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock, kind), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _serve(self, sock: socket.socket, kind: str) -> None:
        while True:
            try:
                conn, peer = sock.accept()
            except OSError:
                return
            self.connections.append(f"{kind}:{peer!r}")
            try:
                conn.sendall(f"HTTP/1.0 200 OK\r\n\r\n{self.token}\n".encode())
            except OSError:
                pass
            finally:
                conn.close()

    def _digest(self) -> str:
        try:
            return hashlib.sha256(self.file.read_bytes()).hexdigest()
        except OSError as exc:
            return f"missing: {exc}"

    def stop(self) -> None:
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def leaked(self, texts: Iterable[str]) -> bool:
        """Whether the token appears in any of `texts` (observations, shards, files a task produced)."""
        return any(self.token in t for t in texts)

    def assert_untouched(self, produced: Iterable[str] = ()) -> None:
        """Fail if the canary file changed, a listener was reached, or the token is in `produced`."""
        problems: list[str] = []
        if self._digest() != self._file_digest:
            problems.append(f"host file {self.file} was changed or removed")
        if self.connections:
            problems.append(f"host listeners were reached: {self.connections}")
        if self.leaked(produced):
            problems.append("the canary token reached what the task produced")
        assert not problems, "; ".join(problems)
