"""Record-level validation: every problem names the file, the record (id or row), the field and the fix.

Validation never raises on bad data; it yields `Problem`s so `worldline validate` can list them all and
pipelines can quarantine the record with a reason code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.domains import registered_domains
from schemas.jsonl import json_lines
from schemas.shards import ShardError, check_file_schema, shard_files
from schemas.trajectory import (
    SCHEMA_MAJOR,
    SCHEMA_VERSION,
    ActionKind,
    Domain,
    ObservationFormat,
    SourceKind,
    TrajectoryStatus,
)


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with one record (or with a whole file when `row` is None)."""

    file: str
    row: int | None
    record_id: str | None
    field: str
    reason: str  # a stable reason code, e.g. "missing_field", "invalid_enum"
    message: str

    def locator(self) -> str:
        if self.record_id:
            return f"id={self.record_id}"
        return "file" if self.row is None else f"row {self.row}"

    def __str__(self) -> str:
        return f"{self.file}: {self.locator()}: {self.field}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "row": self.row,
            "record_id": self.record_id,
            "field": self.field,
            "reason": self.reason,
            "message": self.message,
        }


_ENUMS: dict[str, type[Any]] = {
    "domain": Domain,
    "status": TrajectoryStatus,
    "source.kind": SourceKind,
    "action.kind": ActionKind,
    "observation.format": ObservationFormat,
}

_REQUIRED_TOP = ("id", "schema_version", "domain", "source", "task", "action_space", "turns", "status")
_REQUIRED_SOURCE = ("kind", "name")


def check_record(rec: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Check one record (Arrow-record or JSON form); returns (field, reason, message) triples."""
    out: list[tuple[str, str, str]] = []

    def missing(path: str) -> None:
        out.append((path, "missing_field", "required field is missing or null; set it"))

    def enum(path: str, value: Any, key: str) -> None:
        allowed = (
            [s.value for s in registered_domains()] if key == "domain" else [e.value for e in _ENUMS[key]]
        )
        if value not in allowed:
            out.append((path, "invalid_enum", f"{value!r} is not one of {', '.join(allowed)}"))

    def json_object(path: str, value: Any) -> None:
        if value is None or isinstance(value, dict):
            return
        if not isinstance(value, str):
            out.append((path, "invalid_json", f"must be a JSON object, got {type(value).__name__}"))
            return
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            out.append((path, "invalid_json", f"not valid JSON ({exc.msg} at char {exc.pos})"))
            return
        if not isinstance(parsed, dict):
            out.append((path, "invalid_json", f"must be a JSON object, got {type(parsed).__name__}"))

    for name in _REQUIRED_TOP:
        if rec.get(name) is None:
            missing(name)
    if rec.get("domain") is not None:
        enum("domain", rec["domain"], "domain")
    if rec.get("status") is not None:
        enum("status", rec["status"], "status")
    if rec.get("id") is not None and not str(rec["id"]).strip():
        out.append(("id", "empty_id", "id is empty; use schemas.stable_id(source, locator)"))
    version = rec.get("schema_version")
    if isinstance(version, str):
        try:
            major = int(version.split(".")[0])
        except ValueError:
            out.append(("schema_version", "invalid_version", f"{version!r} is not major.minor.patch"))
        else:
            if major > SCHEMA_MAJOR:
                out.append(
                    (
                        "schema_version",
                        "newer_schema",
                        f"written with schema {version}; this worldline reads {SCHEMA_VERSION}: upgrade",
                    )
                )
    source = rec.get("source")
    if isinstance(source, dict):
        for name in _REQUIRED_SOURCE:
            if source.get(name) is None:
                missing(f"source.{name}")
        if source.get("kind") is not None:
            enum("source.kind", source["kind"], "source.kind")
    space = rec.get("action_space")
    if isinstance(space, dict):
        for i, tool in enumerate(space.get("tools") or []):
            if tool is None or tool.get("name") is None:
                missing(f"action_space.tools[{i}].name")
                continue
            params = tool.get("parameters")
            if params is not None:
                json_object(f"action_space.tools[{i}].parameters", params)
    json_object("metadata", rec.get("metadata"))
    for i, turn in enumerate(rec.get("turns") or []):
        where = f"turns[{i}]"
        if turn is None:
            missing(where)
            continue
        action, obs = turn.get("action"), turn.get("observation")
        if action is None:
            missing(f"{where}.action")
        else:
            if action.get("kind") is None:
                missing(f"{where}.action.kind")
            else:
                enum(f"{where}.action.kind", action["kind"], "action.kind")
            if action.get("text") is None:
                missing(f"{where}.action.text")
        if obs is None:
            missing(f"{where}.observation")
        else:
            if obs.get("text") is None:
                missing(f"{where}.observation.text")
            if obs.get("format") is None:
                missing(f"{where}.observation.format")
            else:
                enum(f"{where}.observation.format", obs["format"], "observation.format")
        duration = turn.get("duration_s")
        if duration is not None and (not isinstance(duration, int | float) or duration < 0):
            out.append(
                (f"{where}.duration_s", "invalid_value", f"{duration!r} must be a non-negative number")
            )
        json_object(f"{where}.metadata", turn.get("metadata"))
    return out


def _find_invalid_utf8(array: pa.Array, path: str) -> str | None:
    """The field path (with list indexes) of the first invalid UTF-8 string inside a one-row slice."""
    typ = array.type
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        try:
            array.validate(full=True)
        except pa.ArrowInvalid:
            return path
        return None
    if pa.types.is_struct(typ):
        struct = array.cast(typ) if isinstance(array, pa.ChunkedArray) else array
        for k in range(typ.num_fields):
            child = struct.field(k)
            found = _find_invalid_utf8(child, f"{path}.{typ.field(k).name}" if path else typ.field(k).name)
            if found:
                return found
        return None
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        for row in range(len(array)):
            if not array[row].is_valid:
                continue
            values = array.slice(row, 1).flatten()
            for j in range(len(values)):
                found = _find_invalid_utf8(values.slice(j, 1), f"{path}[{j}]")
                if found:
                    return found
        return None
    return None


def _rows_of_batch(
    file: str, batch: pa.RecordBatch, offset: int
) -> Iterator[tuple[int, dict[str, Any] | None, Problem | None]]:
    """Rows as Python dicts; a row whose bytes cannot be decoded becomes a Problem instead."""
    try:
        rows = batch.to_pylist()
    except (UnicodeDecodeError, pa.ArrowInvalid):
        for i in range(batch.num_rows):
            one = batch.slice(i, 1)
            try:
                yield offset + i, one.to_pylist()[0], None
            except (UnicodeDecodeError, pa.ArrowInvalid):
                field_path = "?"
                for name, column in zip(one.schema.names, one.columns, strict=True):
                    found = _find_invalid_utf8(column, name)
                    if found:
                        field_path = found
                        break
                rid = None
                if "id" in one.schema.names:
                    try:
                        rid = one.column("id").to_pylist()[0]
                    except (UnicodeDecodeError, pa.ArrowInvalid):
                        rid = None
                yield (
                    offset + i,
                    None,
                    Problem(
                        file,
                        offset + i,
                        rid,
                        field_path,
                        "invalid_utf8",
                        "text is not valid UTF-8; re-encode it (or decode with errors='replace') before writing",
                    ),
                )
        return
    for i, row in enumerate(rows):
        yield offset + i, row, None


def validate_parquet(path: Path, *, seen_ids: set[str] | None = None) -> Iterator[Problem]:
    """Problems in one part file: file-level ones first (unreadable, wrong schema, newer version)."""
    file = str(path)
    try:
        pf = check_file_schema(path)
    except ShardError as exc:
        yield Problem(file, None, None, "(file)", "unreadable_file", str(exc).removeprefix(f"{file}: "))
        return
    offset = 0
    try:
        for batch in pf.iter_batches(batch_size=512):
            for row, rec, problem in _rows_of_batch(file, batch, offset):
                if problem is not None:
                    yield problem
                    continue
                assert rec is not None
                yield from _record_problems(file, row, rec, seen_ids)
            offset += batch.num_rows
    except (OSError, pa.ArrowInvalid) as exc:
        yield Problem(
            file,
            offset,
            None,
            "(file)",
            "corrupt_file",
            f"cannot read past row {offset} ({exc}); the file is truncated or corrupt: rewrite it",
        )


def _record_problems(
    file: str, row: int, rec: dict[str, Any], seen_ids: set[str] | None
) -> Iterator[Problem]:
    rid = rec.get("id") if isinstance(rec.get("id"), str) else None
    for field_path, reason, message in check_record(rec):
        yield Problem(file, row, rid, field_path, reason, message)
    if seen_ids is not None and rid:
        if rid in seen_ids:
            yield Problem(
                file, row, rid, "id", "duplicate_id", "this id appears more than once; ids must be unique"
            )
        seen_ids.add(rid)


def validate_jsonl(path: Path, *, seen_ids: set[str] | None = None) -> Iterator[Problem]:
    """Problems in a trajectory JSONL file (the `worldline export jsonl` format)."""
    file = str(path)
    with open(path, "rb") as fh:
        for line in json_lines(fh):
            lineno = line.lineno
            if isinstance(line.error, UnicodeDecodeError):
                message = f"line is not valid UTF-8 ({line.error.reason})"
                yield Problem(file, lineno, None, "(line)", "invalid_utf8", message)
                continue
            if isinstance(line.error, json.JSONDecodeError):
                yield Problem(
                    file, lineno, None, "(line)", "invalid_json", f"not valid JSON ({line.error.msg})"
                )
                continue
            rec = line.value
            if not isinstance(rec, dict):
                yield Problem(file, lineno, None, "(line)", "invalid_json", "each line must be a JSON object")
                continue
            yield from _record_problems(file, lineno, rec, seen_ids)


def validate_path(path: str | Path) -> Iterator[Problem]:
    """Problems anywhere under PATH (dataset dir, folder of parts, one .parquet or .jsonl file)."""
    p = Path(path)
    seen: set[str] = set()
    if p.is_file() and p.suffix in {".jsonl", ".json"}:
        yield from validate_jsonl(p, seen_ids=seen)
        return
    try:
        files = shard_files(p)
    except ShardError as exc:
        yield Problem(str(p), None, None, "(path)", "unreadable_path", str(exc).removeprefix(f"{p}: "))
        return
    if not files:
        yield Problem(str(p), None, None, "(path)", "no_data", "no Parquet trajectory files found here")
    for f in files:
        if not f.exists():
            yield Problem(str(f), None, None, "(file)", "missing_file", "listed in manifest.json but missing")
            continue
        yield from validate_parquet(f, seen_ids=seen)


def count_rows(path: Path) -> int:
    """Rows in a part file according to its footer."""
    return int(pq.ParquetFile(path).metadata.num_rows)
