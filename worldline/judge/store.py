"""Per-sample results written as they finish, so a stopped run resumes where it stopped.

One JSON line per finished sample, flushed at once. Reopening reads the finished ids back (a torn
last line from a killed run is ignored and rewritten); results whose endpoint call failed are not
counted as finished, so a rerun retries them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class ResultStore:
    """An append-only JSONL of results keyed by `key_of(record)`; the last record of a key wins."""

    def __init__(
        self,
        path: Path,
        *,
        key: str = "sample_id",
        retry_if: Callable[[dict[str, Any]], bool] | None = None,
        keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        """`keep` projects what stays in memory per record (the file always gets all of it), so a
        large run does not hold every judge answer in memory."""
        self.path = path
        self.key = key
        self.retry_if = retry_if
        self.keep = keep or (lambda record: record)
        self.records: dict[str, dict[str, Any]] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            self._load()
        self._handle = path.open("a", encoding="utf-8")

    def _load(self) -> None:
        good: list[str] = []
        with self.path.open(encoding="utf-8") as handle:
            for line in handle:
                if not line.endswith("\n"):
                    break  # torn by a kill mid-write
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and self.key in record:
                    self.records[str(record[self.key])] = self.keep(record)
                    good.append(line)
        # Rewrite without a torn tail so appends start on a fresh line.
        self.path.write_text("".join(good), encoding="utf-8")

    def done(self, key: str) -> bool:
        record = self.records.get(key)
        if record is None:
            return False
        return not (self.retry_if is not None and self.retry_if(record))

    def append(self, record: dict[str, Any]) -> None:
        self.records[str(record[self.key])] = self.keep(record)
        self._handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._handle.flush()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records.values())

    def __len__(self) -> int:
        return len(self.records)

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
