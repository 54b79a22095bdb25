"""AgentWorldBench sample files: stream and validate their lines, write them atomically."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from schemas.agentworldbench.sample import AgentWorldBenchSample, SampleError, SampleFieldError
from schemas.atomic import publish_file, temp_path
from schemas.jsonl import json_lines


def iter_sample_lines(path: str | Path) -> Iterator[tuple[int, AgentWorldBenchSample | SampleError]]:
    """Stream (line number, sample or the error that line has) from a sample file; blank lines skip."""
    p = Path(path)
    try:
        fh = open(p, "rb")
    except OSError as exc:
        raise SampleError(p, 0, "<file>", "unreadable_file", f"cannot open ({exc.strerror})") from exc
    with fh:
        for line in json_lines(fh):
            lineno = line.lineno
            if isinstance(line.error, UnicodeDecodeError):
                message = f"byte {line.error.start} is not valid UTF-8; re-encode the file"
                yield lineno, SampleError(p, lineno, "<line>", "invalid_utf8", message)
                continue
            if isinstance(line.error, json.JSONDecodeError):
                message = f"not valid JSON ({line.error.msg} at column {line.error.colno})"
                yield lineno, SampleError(p, lineno, "<line>", "invalid_json", message)
                continue
            obj = line.value
            try:
                yield lineno, AgentWorldBenchSample.from_json(obj)
            except SampleFieldError as exc:
                yield lineno, SampleError(p, lineno, exc.field, exc.reason, str(exc))


def read_samples(path: str | Path) -> Iterator[AgentWorldBenchSample]:
    """Stream the samples of one JSONL file; the first bad line raises `SampleError` (file, line, field)."""
    for _, item in iter_sample_lines(path):
        if isinstance(item, SampleError):
            raise item
        yield item


class AtomicTextFile:
    """A JSONL file written line by line that appears at its path only on `commit` (`schemas.atomic`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = temp_path(path)
        self.fh: IO[str] = open(self.tmp, "w", encoding="utf-8", newline="\n")
        self.lines = 0

    def write_line(self, line: str) -> None:
        self.fh.write(line)
        self.fh.write("\n")
        self.lines += 1

    def commit(self) -> None:
        self.fh.close()
        publish_file(self.tmp, self.path)

    def abort(self) -> None:
        self.fh.close()
        self.tmp.unlink(missing_ok=True)


def write_samples(path: str | Path, samples: Iterable[AgentWorldBenchSample]) -> int:
    """Write samples as JSONL, atomically; returns how many were written."""
    out = AtomicTextFile(Path(path))
    try:
        for sample in samples:
            out.write_line(sample.to_json_line())
    except BaseException:
        out.abort()
        raise
    out.commit()
    return out.lines
