"""Per-sample results written as they finish, so a stopped run resumes where it stopped.

One JSON line per finished sample, flushed at once. Reopening reads the finished ids back (a torn
last line from a killed run is ignored and rewritten); results whose endpoint call failed are not
counted as finished, so a rerun retries them. The file holds one line per key: a retried key's
superseded line is dropped when the store is opened again or closed (rewritten atomically), so
readers of results.jsonl never see a sample twice once the command has ended.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from schemas.atomic import atomic_open


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
        self._superseded = False
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            self._load()
        self._handle = path.open("a", encoding="utf-8")

    def _load(self) -> None:
        last: dict[str, int] = {}
        with self.path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle):
                if not line.endswith("\n"):
                    break  # torn by a kill mid-write
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and self.key in record:
                    self.records[str(record[self.key])] = self.keep(record)
                    last[str(record[self.key])] = number
        self._compact(set(last.values()))

    def _compact(self, keep_lines: set[int] | None = None) -> None:
        """Rewrite the file with the last line of every key only (and without a torn tail, so appends
        start on a fresh line); written beside it and renamed, so a kill never loses a result."""
        if keep_lines is None:
            last: dict[str, int] = {}
            with self.path.open(encoding="utf-8") as handle:
                for number, line in enumerate(handle):
                    if not line.endswith("\n"):
                        break
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict) and self.key in record:
                        last[str(record[self.key])] = number
            keep_lines = set(last.values())
        with self.path.open(encoding="utf-8") as src, atomic_open(self.path, "w") as dst:
            for number, line in enumerate(src):
                if number in keep_lines:
                    dst.write(line)

    def done(self, key: str) -> bool:
        record = self.records.get(key)
        if record is None:
            return False
        return not (self.retry_if is not None and self.retry_if(record))

    def append(self, record: dict[str, Any]) -> None:
        self._superseded |= str(record[self.key]) in self.records
        self.records[str(record[self.key])] = self.keep(record)
        self._handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._handle.flush()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records.values())

    def __len__(self) -> int:
        return len(self.records)

    def close(self) -> None:
        if self._handle.closed:
            return
        self._handle.close()
        if self._superseded:
            self._compact()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
