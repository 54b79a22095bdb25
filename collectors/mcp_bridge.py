"""stdio bridge into a sandbox: runs a command inside a container and joins its stdin/stdout to ours.

The MCP SDK's stdio client starts a local process and speaks JSON-RPC lines over its pipes. For a
server that must run inside a sandbox, that local process is this bridge:

    python -m collectors.mcp_bridge [--workdir DIR] [--env K=V ...] CONTAINER -- COMMAND ARGS...

It execs COMMAND in the container through the engine's API (stdin attached, no TTY, so bytes pass
unchanged), copies our stdin to it and demultiplexes the engine's stream into our stdout and stderr.
When the command exits the bridge exits with its status; when our stdin closes (the client shut
down) the bridge stops. The engine is found exactly as the collectors find it (collectors/engine.py).
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import threading
from typing import Any

from collectors import engine

HEADER = struct.Struct(">BxxxL")  # the engine's multiplexed stream: kind (1 stdout, 2 stderr), size


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = sock.recv(min(size, 1 << 16))
        if not chunk:
            return b"".join(chunks) if not chunks else b""
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def pump_stdin(sock: socket.socket) -> None:
    """Our stdin to the command's stdin; on EOF, half-close so the command sees its stdin end."""
    stdin = sys.stdin.buffer
    try:
        while True:
            data = stdin.read1(1 << 16)  # type: ignore[union-attr]
            if not data:
                break
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def pump_output(sock: socket.socket) -> None:
    """The engine's framed stream to our stdout / stderr until it ends."""
    out, err = sys.stdout.buffer, sys.stderr.buffer
    while True:
        header = _recv_exact(sock, HEADER.size)
        if len(header) < HEADER.size:
            return
        kind, size = HEADER.unpack(header)
        payload = _recv_exact(sock, size) if size else b""
        if size and not payload:
            return
        target = err if kind == 2 else out
        target.write(payload)
        target.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("container")
    parser.add_argument("--workdir", default="/work")
    parser.add_argument("--env", action="append", default=[], metavar="K=V")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    client = engine.connect()
    api: Any = client.api
    exec_id = api.exec_create(
        args.container,
        command,
        stdin=True,
        stdout=True,
        stderr=True,
        tty=False,
        workdir=args.workdir,
        environment=dict(item.split("=", 1) for item in args.env),
    )
    conn = api.exec_start(exec_id, socket=True, tty=False)
    sock: socket.socket = getattr(conn, "_sock", conn)
    threading.Thread(target=pump_stdin, args=(sock,), daemon=True, name="stdin").start()
    try:
        pump_output(sock)
    except (OSError, KeyboardInterrupt):
        pass
    try:
        code = api.exec_inspect(exec_id).get("ExitCode")
    except Exception:  # the container is already gone: nothing more to report
        code = None
    sys.stdout.flush()
    os._exit(int(code) if isinstance(code, int) else 1)


if __name__ == "__main__":
    sys.exit(main())
