"""Persistent response cache: SQLite in WAL mode, keyed on a sha256 of the full canonical request.

The key covers the model, messages, tools and every sampling parameter plus `sample_index`, and never
the endpoint URL or key: the same request served by another replica of the same model is the same
answer, while three rollouts of one prompt are three entries.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CACHE_KEY_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    created_at REAL NOT NULL,
    response TEXT NOT NULL
)
"""


def canonical_request_json(request: Mapping[str, Any]) -> str:
    """Deterministic JSON of a request: sorted keys, no whitespace, None-valued fields dropped."""
    cleaned = {key: value for key, value in request.items() if value is not None}
    return json.dumps(
        {"cache_key_version": CACHE_KEY_VERSION, **cleaned},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )


def cache_key(request: Mapping[str, Any]) -> str:
    """sha256 hex digest of the canonical request."""
    return hashlib.sha256(canonical_request_json(request).encode("utf-8")).hexdigest()


class ResponseCache:
    """A key -> JSON response store shared safely by threads, asyncio tasks and processes.

    One SQLite connection per (process, thread); WAL lets readers proceed while one writer commits, and
    the busy timeout makes concurrent writers from several worker processes wait instead of failing.
    """

    def __init__(self, path: Path | str, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._all_connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        with self._lock:
            connection = self._connect()
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(_SCHEMA)
            connection.commit()

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=self._busy_timeout_s, check_same_thread=False)
        connection.execute("PRAGMA synchronous=NORMAL")
        self._all_connections.append(connection)
        return connection

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        # A forked worker must not reuse its parent's connection.
        if connection is None or getattr(self._local, "pid", None) != os.getpid():
            with self._lock:
                connection = self._connect()
            self._local.connection = connection
            self._local.pid = os.getpid()
        return connection

    def get(self, key: str) -> dict[str, Any] | None:
        row = self._connection().execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except ValueError:
            return None  # a corrupted entry is a miss; the next successful call overwrites it
        return value if isinstance(value, dict) else None

    def put(self, key: str, model: str, response: Mapping[str, Any]) -> None:
        connection = self._connection()
        with connection:
            connection.execute(
                "INSERT OR REPLACE INTO responses (key, model, created_at, response) VALUES (?, ?, ?, ?)",
                (key, model, time.time(), json.dumps(response, ensure_ascii=False)),
            )

    def __len__(self) -> int:
        row = self._connection().execute("SELECT COUNT(*) FROM responses").fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            for connection in self._all_connections:
                try:
                    connection.close()
                except sqlite3.Error:
                    pass
            self._all_connections.clear()
        self._local = threading.local()
