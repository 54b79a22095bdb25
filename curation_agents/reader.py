"""Find records in input files: detect each file's format, then stream its records with size limits.

A record is the unit the graph cleans: a whole recording or agent log, one JSONL line, or one element
of a top-level JSON array of samples. Whole-file records travel as their path (ingest reads them under
the limit); everything else travels decoded. Nothing larger than one record is ever held in memory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation_agents.formats import (
    Format,
    adp,
    androidworld,
    atif,
    chat,
    harbor,
    mcp_log,
    mcp_universe,
    mcpmark,
    openhands,
    osworld,
    swe_agent,
    toolathlon,
    webarena,
    widesearch,
)
from curation_agents.formats import agentworldbench as awb
from curation_agents.formats.common import CORRUPT_INPUT_ERRORS, decode_json, open_binary
from curation_agents.formats.terminal import is_input_log, looks_like_timing
from curation_agents.model import Limits, StageFailure
from schemas.reasons import ReasonCode

SNIFF_BYTES = 64 * 1024
TRACE_SUFFIXES = (
    ".cast",
    ".traj",
    ".json",
    ".jsonl",
    ".ndjson",
    ".log",
    ".txt",
    ".typescript",
    ".script",
    ".xml",
)


@dataclass(frozen=True)
class RawRecord:
    """One record found in a file, or the failure that stopped reading it."""

    locator: str
    format: Format
    payload: Any  # {"path": ...} for whole-file records, else the decoded JSON value
    failure: StageFailure | None = None
    # The JSON text the payload was decoded from, when the reader had it (a JSONL line): redaction can
    # then rule a whole record out with one check instead of one per string.
    source_text: bytes | None = None


def is_file_payload(payload: Any) -> bool:
    """Whether a record's payload is a whole file still on disk (`{"path": ...}`), not decoded JSON."""
    return isinstance(payload, dict) and len(payload) == 1 and isinstance(payload.get("path"), str)


def discover(paths: list[str], labels: dict[str, str] | None = None) -> Iterator[tuple[Path, str]]:
    """(file, dataset path) for every input; directories are walked in sorted order.

    The dataset path is relative to the argument's parent, so ids stay stable across machines. Two
    arguments with the same name (`a/logs` and `b/logs`) keep as many of their parent folders as it
    takes to tell them apart (`a/logs/...`, `b/logs/...`).
    """
    labels = labels or root_labels(paths)
    for arg in paths:
        root = Path(arg)
        label = labels[arg]
        if root.is_file():
            yield root, label
            continue
        if not root.is_dir():
            raise FileNotFoundError(f"{arg}: no such file or directory; pass trace files or folders of them")
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.startswith("."):
                    continue
                f = Path(dirpath) / name
                yield f, f"{label}/{f.relative_to(root).as_posix()}"


def root_labels(paths: list[str], sep: str = "/") -> dict[str, str]:
    """A distinct label per input argument: its name, plus as many parent names as tell equal names apart.

    Works on local paths and URLs alike (`gs://bucket/a/logs`): it splits on `sep` only.
    """
    parts = {
        arg: [p for p in arg.replace("\\", sep).rstrip(sep).split(sep) if p not in ("", ".")] for arg in paths
    }
    depth = {arg: 1 for arg in paths}
    while True:
        labels = {arg: sep.join(parts[arg][-depth[arg] :]) for arg in paths}
        clashes = [arg for arg in paths if list(labels.values()).count(labels[arg]) > 1]
        grown = False
        for arg in clashes:
            if depth[arg] < len(parts[arg]):
                depth[arg] += 1
                grown = True
        if not clashes or not grown:
            return labels


def sniff(path: Path) -> tuple[Format, str]:
    """(format, container) of a file from its first bytes; container is whole | jsonl | array | document | episodes
    | traces | trial | companion (a file another record reads: no record of its own)."""
    if harbor.is_record(path):
        return Format.HARBOR, "trial"
    if harbor.is_companion(path):
        return Format.HARBOR, "companion"  # a trial's logs, cast, verifier output; the job's files
    if mcpmark.is_messages_file(path):
        return Format.MCPMARK, "whole"
    if mcpmark.is_companion(path):
        return Format.MCPMARK, "companion"
    with open_binary(str(path)) as fh:
        head: bytes = fh.read(SNIFF_BYTES)
    if androidworld.looks_like(head):
        return Format.ANDROIDWORLD, "episodes"
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"Script started on"):
        return Format.TYPESCRIPT, "whole"
    if text.startswith(b"<?xml") or text.startswith(b"<hierarchy"):
        return (Format.UIAUTOMATOR_DUMP if b"<hierarchy" in text else Format.UNKNOWN), "whole"
    if looks_like_timing(text):
        return Format.SCRIPT_TIMING, "whole"
    if toolathlon.looks_like_head(text):
        return Format.TOOLATHLON, "whole"
    if mcp_universe.looks_like_head(text):
        return Format.MCP_UNIVERSE, "traces"
    if text.startswith(b"{"):
        first = text.split(b"\n", 1)[0]
        try:
            obj = json.loads(first)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            if obj.get("version") in (2, 3) and ("width" in obj or "term" in obj):
                return (Format.ASCIICAST_V2 if obj["version"] == 2 else Format.ASCIICAST_V3), "whole"
            if mcp_log.unwrap(obj) is not None:
                return Format.MCP_JSONRPC, "whole"
            if osworld.looks_like_step(obj):
                return Format.OSWORLD, "whole"
            return classify(obj), "jsonl"
        if len(first) == len(text) and len(head) == SNIFF_BYTES:
            # One line longer than the sniff window: JSONL (or a one-line document, read the same way).
            return Format.UNKNOWN, "jsonl"
        return Format.UNKNOWN, "document"
    if text.startswith(b"["):
        first, _, rest = text.partition(b"\n")
        if rest.strip():
            try:
                json.loads(first)
                return Format.UNKNOWN, "jsonl"  # one JSON array per line: JSONL of message lists
            except (ValueError, RecursionError):
                pass
        return Format.UNKNOWN, "array"  # decided per element (or for the whole list) at read time
    if mcp_log.looks_like_desktop_log(text):
        return Format.MCP_JSONRPC, "whole"
    return Format.UNKNOWN, "whole"


def classify(obj: Any) -> Format:
    """The format of one decoded record."""
    if awb.looks_like(obj):
        return Format.AGENTWORLDBENCH
    if widesearch.looks_like(obj):
        return Format.WIDESEARCH
    if swe_agent.looks_like(obj):
        return Format.SWE_AGENT
    if chat.looks_like_mini_swe_agent(obj):
        return Format.MINI_SWE_AGENT
    if atif.looks_like(obj):
        return Format.ATIF
    if adp.looks_like(obj):
        return Format.ADP
    if chat.looks_like_openai(obj) or chat.is_message_list(obj):
        return Format.OPENAI_MESSAGES
    if chat.looks_like_sharegpt(obj):
        return Format.SHAREGPT
    if webarena.looks_like(obj):
        return Format.WEBARENA
    if openhands.looks_like(obj):
        return Format.OPENHANDS
    return Format.UNKNOWN


def _is_single_record_list(first: Any) -> bool:
    """A top-level list that is one record (a message list, an event stream), not a list of samples."""
    return isinstance(first, dict) and (
        "role" in first or ("source" in first and ("action" in first or "observation" in first))
    )


def iter_records(path: Path, limits: Limits) -> Iterator[RawRecord]:
    """Every record in PATH, in file order, with a stable locator.

    A file that breaks while it is read (truncated or corrupt gzip, a compression bomb) ends with a
    failure record: the records read before the damage are kept, and a rerun meets the same records
    and the same failure, so a resumed run passes over it too.
    """
    produced = 0
    try:
        for record in _iter_records(path, limits):
            produced += 1
            yield record
    except StageFailure as failure:
        yield RawRecord("file" if not produced else "read-error", Format.UNKNOWN, None, failure)
    except CORRUPT_INPUT_ERRORS as exc:
        damaged = StageFailure(ReasonCode.CORRUPT_INPUT, f"{path.name}: {type(exc).__name__}: {exc}"[:500])
        yield RawRecord("file" if not produced else "read-error", Format.UNKNOWN, None, damaged)


def _iter_records(path: Path, limits: Limits) -> Iterator[RawRecord]:
    fmt, container = sniff(path)
    if fmt == Format.SCRIPT_TIMING or (fmt == Format.TYPESCRIPT and is_input_log(str(path))):
        return  # a companion file (timing, or keystrokes logged apart): its typescript reads it
    if container == "companion":
        return  # read with the record it belongs to (MCPMark's meta.json beside messages.json)
    if container == "traces":
        for locator, trace in mcp_universe.iter_traces(str(path), limits.max_record_bytes):
            yield RawRecord(locator, fmt, trace)
        return
    if container == "trial":
        for locator, payload in harbor.iter_payloads(str(path), limits.max_record_bytes):
            yield RawRecord(locator, fmt, payload)
        return
    if container == "episodes":
        for locator, payload in androidworld.iter_payloads(str(path), limits.max_record_bytes):
            yield RawRecord(locator, fmt, payload)
        return
    if container == "whole":
        yield RawRecord("file", fmt, {"path": str(path)}, None if fmt != Format.UNKNOWN else _unknown(path))
        return
    if container == "jsonl":
        yield from _iter_jsonl(path, limits)
        return
    size = _decompressed_size_at_most(path, limits.max_record_bytes)
    if size is not None:
        try:
            with open_binary(str(path)) as fh:
                doc = decode_json(fh.read(), "file")
        except StageFailure as failure:
            yield RawRecord("file", Format.UNKNOWN, None, failure)
            return
        if isinstance(doc, list) and doc and not _is_single_record_list(doc[0]):
            for index, element in enumerate(doc):
                yield _element_record(f"item-{index}", element)
            return
        fmt = classify(doc)
        yield RawRecord("file", fmt, doc, None if fmt != Format.UNKNOWN else _unknown(path))
        if fmt == Format.ATIF:
            for locator, sub in atif.subagents(doc, "file"):
                yield RawRecord(locator, fmt, sub)
        return
    if container == "array":
        yield from _iter_array_elements(path, limits)
        return
    yield RawRecord(
        "file",
        Format.UNKNOWN,
        None,
        StageFailure(ReasonCode.TOO_LARGE, f"JSON document exceeds {limits.max_record_bytes} bytes"),
    )


def _unknown(path: Path) -> StageFailure:
    return StageFailure(ReasonCode.UNSUPPORTED_FORMAT, f"{path.name}: not a trace format the cleaner reads")


def _element_record(locator: str, element: Any) -> RawRecord:
    fmt = classify(element)
    failure = (
        None
        if fmt != Format.UNKNOWN
        else StageFailure(ReasonCode.UNSUPPORTED_FORMAT, f"{locator}: unrecognised record")
    )
    return RawRecord(locator, fmt, element, failure)


def _decompressed_size_at_most(path: Path, limit: int) -> int | None:
    """The decompressed size when it is within `limit`, else None (reads at most limit+1 bytes)."""
    if path.stat().st_size <= limit and not _is_gzip(path):
        return path.stat().st_size
    total = 0
    with open_binary(str(path)) as fh:
        while total <= limit:
            chunk = fh.read(1 << 20)
            if not chunk:
                return total
            total += len(chunk)
    return None


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


_NOT_SPACE = re.compile(rb"[^ \t\r\n]")
_JSONL_CHUNK = 1 << 20


def iter_lines(fh: Any, max_line: int, chunk_size: int = _JSONL_CHUNK) -> Iterator[tuple[int, bytes | None]]:
    """(line number, line) for every non-blank line of a binary stream, leading blanks removed; None for
    a line over `max_line`.

    Reads fixed-size chunks, so a line of any length costs linear time and at most `max_line` bytes of
    memory, and runs of blank lines are skipped at C speed (counted, never looped over one by one).
    """
    parts: list[bytes] = []  # the unfinished line
    pending = 0
    oversized = False
    line_no = 0
    while True:
        chunk = fh.read(chunk_size)
        if not chunk:
            break
        start = 0
        if not parts and not oversized:
            m = _NOT_SPACE.search(chunk)
            if m is None:
                line_no += chunk.count(b"\n")
                continue
            line_no += chunk.count(b"\n", 0, m.start())
            start = m.start()
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                rest = chunk[start:]
                if not oversized:
                    if pending + len(rest) > max_line:
                        oversized, parts, pending = True, [], 0
                    elif rest:
                        parts.append(rest)
                        pending += len(rest)
                break
            line_no += 1
            piece = chunk[start : nl + 1]
            if oversized:
                yield line_no, None
            elif parts:
                if pending + len(piece) > max_line:
                    yield line_no, None
                else:
                    parts.append(piece)
                    yield line_no, b"".join(parts)
            elif len(piece) > max_line:
                yield line_no, None
            elif piece.strip():
                yield line_no, piece
            parts, pending, oversized = [], 0, False
            start = nl + 1
            m = _NOT_SPACE.search(chunk, start)
            if m is None:
                line_no += chunk.count(b"\n", start)
                break
            line_no += chunk.count(b"\n", start, m.start())
            start = m.start()
    if oversized:
        yield line_no + 1, None
    elif parts:
        line = b"".join(parts)
        if line.strip():
            yield line_no + 1, line


def _iter_jsonl(path: Path, limits: Limits) -> Iterator[RawRecord]:
    with open_binary(str(path), limits.max_gzip_expansion, limits.max_record_bytes) as fh:
        for line_no, line in iter_lines(fh, limits.max_record_bytes):
            locator = f"line-{line_no}"
            if line is None:
                yield RawRecord(
                    locator,
                    Format.UNKNOWN,
                    None,
                    StageFailure(ReasonCode.TOO_LARGE, f"line exceeds {limits.max_record_bytes} bytes"),
                )
                continue
            try:
                obj = decode_json(line, locator)
            except StageFailure as failure:
                yield RawRecord(locator, Format.UNKNOWN, None, failure)
                continue
            for record in _line_records(locator, obj):
                yield dataclasses.replace(record, source_text=line) if record.locator == locator else record


def _line_records(locator: str, obj: Any) -> Iterator[RawRecord]:
    """The records of one JSONL line: the line itself, or each element of a line that holds samples."""
    if (
        isinstance(obj, list)
        and obj
        and not _is_single_record_list(obj[0])
        and all(isinstance(e, dict | list) for e in obj)
    ):
        for index, element in enumerate(obj):
            yield _element_record(f"{locator}-item-{index}", element)
        return
    record = _element_record(locator, obj)
    yield record
    if record.format == Format.ATIF:
        for where, sub in atif.subagents(obj, locator):
            yield RawRecord(where, Format.ATIF, sub)


_ARRAY_TOKEN = re.compile(rb'["\[\]{},]')
_STRING_TOKEN = re.compile(rb'["\\]')


def _iter_array_elements(path: Path, limits: Limits) -> Iterator[RawRecord]:
    """Split a top-level JSON array larger than the record limit into its elements, streaming.

    Only object and array elements are records; a scalar element is not a trace and is passed over.
    """
    depth = 0
    in_string = False
    skip_next = False  # a backslash ended the previous chunk
    start = -1  # where the current element starts in `buf`
    oversized = False
    index = 0
    buf = bytearray()
    with open_binary(str(path)) as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                return
            pos = len(buf)
            buf.extend(chunk)
            if skip_next:
                pos += 1
                skip_next = False
            while pos < len(buf):
                m = (_STRING_TOKEN if in_string else _ARRAY_TOKEN).search(buf, pos)
                if m is None:
                    break
                ch = buf[m.start()]
                pos = m.end()
                if in_string:
                    if ch == 0x5C:  # backslash: the next byte is escaped
                        pos += 1
                        if pos > len(buf):
                            skip_next = True
                    else:
                        in_string = False
                    continue
                if ch == 0x22:
                    in_string = True
                elif ch in (0x5B, 0x7B):
                    depth += 1
                    if depth == 2 and start < 0:
                        start = m.start()
                elif ch in (0x5D, 0x7D):
                    depth -= 1
                    if depth == 1 and start >= 0:
                        too_big = oversized or m.end() - start > limits.max_record_bytes
                        yield _decoded_element(f"item-{index}", bytes(buf[start : m.end()]), too_big, limits)
                        index += 1
                        start, oversized = -1, False
                    elif depth <= 0:
                        return
            # Keep only the unfinished element; once it outgrows the limit, drop its bytes and fail it.
            if start < 0:
                del buf[:]
            elif len(buf) - start > limits.max_record_bytes:
                oversized = True
                del buf[:]
                start = 0
            else:
                del buf[:start]
                start = 0


def _decoded_element(locator: str, element: bytes, oversized: bool, limits: Limits) -> RawRecord:
    if oversized:
        return RawRecord(
            locator,
            Format.UNKNOWN,
            None,
            StageFailure(ReasonCode.TOO_LARGE, f"{locator} exceeds {limits.max_record_bytes} bytes"),
        )
    try:
        obj = decode_json(element, locator)
    except StageFailure as failure:
        return RawRecord(locator, Format.UNKNOWN, None, failure)
    return _element_record(locator, obj)
