"""Terminal recordings: asciicast v2 / v3 (asciinema, Terminal-Bench) and util-linux `script`
typescripts with their timing files. The result is an event list for denoise and segment."""

from __future__ import annotations

import functools
import io
import json
import operator
import os
import re
from collections.abc import Callable
from typing import Any

import orjson

from curation_agents.formats import Format
from curation_agents.formats.common import as_dict, open_binary
from curation_agents.model import Limits, ParsedRecord, StageFailure
from schemas.reasons import ReasonCode

_EVENT_CODES = frozenset({"o", "i", "r", "m", "x"})
_TIME_TYPES = frozenset({int, float})
# The C scanner json.loads uses underneath: (value, end index), StopIteration when no value starts there.
_SCAN_JSON: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")


_ORJSON_LOADS = orjson.loads
# orjson turns integers outside 64 bits into floats; json.loads keeps them int. Beyond this magnitude a
# float event time is decoded again by the json module.
_EXACT_FLOAT_TIME = float(2**63)


def loads_event_line(line: bytes) -> Any:
    """`json.loads(line)` for one recording line, faster; a line that is not valid UTF-8 is decoded with
    U+FFFD replacements first (json.loads would reject it).

    The common line, `[time, code, text]`, is decoded by orjson (several times faster per tiny line than
    the json module's C scanner). orjson is strict where json.loads is lenient (NaN, lone surrogates, a
    BOM, invalid UTF-8) and then raises, and its only divergence on what it accepts is integers beyond
    64 bits, which it makes floats: those lines, and any other shape, are decoded by `_loads_json_line`,
    so the result is always json.loads's (a property test compares them).
    """
    try:
        value = _ORJSON_LOADS(line)
    except orjson.JSONDecodeError:
        return _loads_json_line(line)
    if type(value) is list and len(value) == 3 and type(value[1]) is str and type(value[2]) is str:
        t = value[0]
        if type(t) is int or (type(t) is float and -_EXACT_FLOAT_TIME < t < _EXACT_FLOAT_TIME):
            return value
    return _loads_json_line(line)


def _loads_json_line(line: bytes) -> Any:
    """`json.loads(line)` for one recording line, without its per-call wrapper costs; a line that is not
    valid UTF-8 is decoded with U+FFFD replacements first (json.loads would reject it).

    Recordings hold hundreds of thousands of tiny event lines, where json.loads spends more time
    detecting the encoding and checking for trailing data than parsing. This does the same steps with
    the same C scanner: UTF-8 (what detect_encoding answers for a line starting with "[" and no NUL in
    its first bytes), then one value, then nothing but JSON whitespace. Anything else goes to json.loads.
    """
    if line[:1] != b"[" or b"\x00" in line[:4]:
        return json.loads(line.decode("utf-8", "replace") if _is_bad_utf8(line) else line)
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        # Invalid UTF-8 inside an event (a program printed raw bytes): decoded with U+FFFD, not dropped.
        text = line.decode("utf-8", "replace")
    try:
        value, end = _SCAN_JSON(text, 0)
    except StopIteration:
        return json.loads(text)  # raises the same JSONDecodeError json.loads would
    if end != len(text) and _JSON_WHITESPACE.match(text, end).end() != len(text):  # type: ignore[union-attr]
        return json.loads(text)
    return value


def _is_bad_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


# Recordings are read a block of whole lines at a time: a block whose every line is `[time, code, text]`
# decodes in one orjson call instead of one call and one trip through the loop below per line.
_BLOCK_BYTES = 1 << 20
# A v2 time spelled with an exponent or more than 6 decimals, on a line after the first of a block.
_TIME, _CODE, _TEXT = (operator.itemgetter(i) for i in range(3))
_INEXACT_TIME = re.compile(rb"\n\[[^,\n]*?(?:[eE]|\.\d{7})")


def parse_asciicast(path: str, limits: Limits) -> ParsedRecord:
    """Stream an asciicast file a block of lines at a time; v3 event times are intervals and are made
    absolute."""
    events: list[list[Any]] = []
    total = 0
    with open_binary(path, limits.max_gzip_expansion, limits.max_record_bytes) as fh:
        header_line = fh.readline(limits.max_record_bytes + 1)
        try:
            header = json.loads(header_line)
        except (ValueError, RecursionError) as exc:
            raise StageFailure(ReasonCode.PARSE_ERROR, f"asciicast header is not JSON: {exc}") from exc
        if not isinstance(header, dict) or header.get("version") not in (2, 3):
            raise StageFailure(ReasonCode.PARSE_ERROR, "asciicast header lacks version 2 or 3")
        version = header["version"]
        term = as_dict(header.get("term"))
        width = _dim(header.get("width", term.get("cols")), 80)
        height = _dim(header.get("height", term.get("rows")), 24)
        clock = 0.0
        while block := fh.read(_BLOCK_BYTES):
            if block[-1:] != b"\n":
                block += fh.readline(limits.max_record_bytes + 1)  # the rest of the block's last line
            whole = block if block[-1:] == b"\n" else block[: block.rfind(b"\n") + 1]
            decoded = _decode_block(whole) if total + len(block) <= limits.max_record_bytes else None
            if decoded is None or len(events) + len(decoded) > limits.max_events:
                # Lines of another shape, or a limit reached: line by line, each line as it is.
                clock, total = _add_lines(block, version, clock, total, limits, events)
                continue
            total += len(whole)
            clock = _add_times(decoded, whole, version, clock)
            events += decoded
            if len(whole) < len(block):  # a last line without its newline (a recording cut off)
                clock, total = _add_lines(block[len(whole) :], version, clock, total, limits, events)
    env = as_dict(header.get("env"))
    harness = "terminal-bench" if any("tmux wait -S" in e[2] for e in events if e[1] == "i") else None
    return {
        "format": Format.ASCIICAST_V2 if version == 2 else Format.ASCIICAST_V3,
        "domain": "terminal",
        "events": events,
        "width": width,
        "height": height,
        "task": str(header.get("title") or header.get("command") or ""),
        "collected_at": _timestamp(header.get("timestamp")),
        "agent": harness,
        "metadata": {
            "term": str(env.get("TERM") or term.get("type") or ""),
            "shell": str(env.get("SHELL") or ""),
            **({"harness": harness} if harness else {}),
        },
    }


def _is_plain_event(event: Any) -> bool:
    """Whether a value orjson decoded is an event `[time, code, text]` exactly as json.loads decodes it."""
    return (
        type(event) is list
        and len(event) == 3
        and type(event[1]) is str
        and event[1] in _EVENT_CODES
        and type(event[2]) is str
        and (
            type(event[0]) is int
            or (type(event[0]) is float and -_EXACT_FLOAT_TIME < event[0] < _EXACT_FLOAT_TIME)
        )
    )


def _decode_block(block: bytes) -> list[list[Any]] | None:
    """The events of BLOCK, whole lines each exactly `[time, code, text]` (no other spacing), with their
    times as written; None when any line is of another form (then each line is read on its own).

    Each line starts with `[` and ends with `]`, and orjson decodes their joined text to one flat
    `[time, code, text]` per line: a line can hold neither two events nor part of one, so every line
    decodes as it would alone.
    """
    lines = block.count(b"\n")
    if block[:1] != b"[" or block[-2:] != b"]\n" or block.count(b"]\n[") != lines - 1:
        return None
    try:
        events: list[list[Any]] = _ORJSON_LOADS(b"[" + block[:-1].replace(b"\n", b",") + b"]")
    except orjson.JSONDecodeError:
        return None
    if len(events) != lines:
        return None
    # _is_plain_event for every event, a field at a time at C speed (map and set, no Python frame per
    # event); stricter on integer times (within 64 bits signed), whose lines are then read one by one.
    try:
        if (
            set(map(type, events)) != {list}
            or set(map(len, events)) != {3}
            or not set(map(_CODE, events)) <= _EVENT_CODES
            or set(map(type, map(_TEXT, events))) != {str}
            or not set(map(type, times := list(map(_TIME, events)))) <= _TIME_TYPES
            or not -_EXACT_FLOAT_TIME < min(times) <= max(times) < _EXACT_FLOAT_TIME
        ):
            return None
    except TypeError:  # an unhashable code (a list or an object)
        return None
    return events


def _add_times(events: list[list[Any]], block: bytes, version: int, clock: float) -> float:
    """Make the times of EVENTS (decoded from BLOCK) what the line-by-line reader gives; the clock after."""
    if version == 3:
        for event in events:
            clock = clock + event[0]
            event[0] = round(clock, 6)
        return clock
    head = block[: block.find(b",")]
    if _INEXACT_TIME.search(block) is None and b"e" not in head and b"E" not in head:
        # Every time has at most 6 decimals: it is the double round(t, 6) gives (see _add_lines).
        if len(head) - head.find(b".") <= 7:
            for event in events:
                if type(event[0]) is int:
                    event[0] = float(event[0])
            return float(events[-1][0])
    for event in events:
        event[0] = round(float(event[0]), 6)
    return float(events[-1][0])


def _add_lines(
    block: bytes, version: int, clock: float, total: int, limits: Limits, events: list[list[Any]]
) -> tuple[float, int]:
    """Append the events of BLOCK's lines, one line at a time; (clock, bytes read) after them."""
    fh = io.BytesIO(block)
    max_bytes, max_events, add = limits.max_record_bytes, limits.max_events, events.append
    for line in iter(functools.partial(fh.readline, max_bytes + 1), b""):
        total += len(line)
        if total > max_bytes:
            raise StageFailure(ReasonCode.TOO_LARGE, f"recording exceeds {max_bytes} bytes")
        # The common line, `[time, code, text]` between JSON whitespace, as loads_event_line decodes
        # it; anything else below.
        try:
            event = _ORJSON_LOADS(line)
        except orjson.JSONDecodeError:
            event = None
        if _is_plain_event(event):
            if version == 3:
                clock = clock + event[0]
                add([round(clock, 6), event[1], event[2]])
            else:
                # A time written with at most 6 decimals decodes to the double round(t, 6) gives:
                # round (a decimal conversion, the costliest call here) only the others.
                clock = float(event[0])
                head = line[: line.find(b",")]
                exact = type(event[0]) is int or (
                    b"e" not in head and b"E" not in head and len(head) - head.find(b".") <= 7
                )
                add([clock if exact else round(clock, 6), event[1], event[2]])
            if len(events) > max_events:
                raise StageFailure(ReasonCode.TOO_LARGE, f"recording has more than {max_events} events")
            continue
        stripped = line.strip()
        if not stripped or stripped[:1] == b"#":
            continue
        try:
            event = loads_event_line(stripped)
        except (ValueError, RecursionError):
            # A torn last line (recording killed mid-write) is common; anything else is noise we skip.
            continue
        if (
            type(event) is not list
            or len(event) < 3
            or type(event[0]) not in _TIME_TYPES
            or type(event[1]) is not str
            or event[1] not in _EVENT_CODES
            or type(event[2]) is not str
        ):
            continue  # json decodes to exact types: no subclasses (bool is not in _TIME_TYPES)
        clock = clock + event[0] if version == 3 else float(event[0])
        add([round(clock, 6), event[1], event[2]])
        if len(events) > max_events:
            raise StageFailure(ReasonCode.TOO_LARGE, f"recording has more than {max_events} events")
    return clock, total


def _dim(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 < value < 10_000 else default


def _timestamp(value: Any) -> str | None:
    from datetime import UTC, datetime

    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 32503680000:
        return datetime.fromtimestamp(float(value), UTC).isoformat()
    return None


# -- util-linux script -------------------------------------------------------------------------------

_SCRIPT_HEADER = re.compile(rb"^Script started on (?P<when>[^\[\n]*?)\s*(?:\[(?P<attrs>[^\]\n]*)\])?\s*$")
_SCRIPT_FOOTER = re.compile(rb"\r?\n?Script done on [^\n]*\n?$")
_ATTR = re.compile(r'(\w+)="([^"]*)"')
_TIMING_CLASSIC = re.compile(rb"^(\d+(?:\.\d+)?) (\d+)$")
_TIMING_ADVANCED = re.compile(rb"^([IOHS]) (\d+(?:\.\d+)?) (.*)$")


def timing_companion(path: str) -> str | None:
    """The timing file that belongs to typescript PATH, by the names `script` users give them."""
    base, _ = os.path.splitext(path)
    folder = os.path.dirname(path)
    for candidate in (
        path + ".timing",
        path + ".tm",
        base + ".timing",
        base + ".tm",
        os.path.join(folder, "timing"),
    ):
        if candidate != path and os.path.isfile(candidate):
            return candidate
    return None


def looks_like_timing(head: bytes) -> bool:
    """Whether the start of a file is a `script` timing log (classic or advanced format)."""
    lines = [ln for ln in head.split(b"\n")[:20] if ln.strip()]
    if len(head.split(b"\n")) > 1 and lines and len(lines[-1]) < 200:
        # The last line may be cut by the sniff window; judge the complete ones.
        lines = lines[:-1] or lines
    return bool(lines) and all(_TIMING_CLASSIC.match(ln) or _TIMING_ADVANCED.match(ln) for ln in lines)


def timing_header(timing_path: str) -> dict[str, str]:
    """The `H NAME value` lines an advanced-format timing log opens with (OUTPUT_LOG, INPUT_LOG, ...)."""
    header: dict[str, str] = {}
    with open_binary(timing_path) as fh:
        for raw in fh:
            if not raw.startswith(b"H "):
                if raw.strip():
                    break  # the header comes first; the rest is the log itself
                continue
            fields = raw.rstrip(b"\r\n").split(b" ", 3)
            if len(fields) == 4:
                header[fields[2].decode("utf-8", "replace")] = fields[3].decode("utf-8", "replace")
    return header


def is_input_log(path: str) -> bool:
    """Whether PATH is the keystroke log of `script -I FILE -O OTHER`: a companion of OTHER, not a record.

    Its timing log names it INPUT_LOG and a different file OUTPUT_LOG; its typescript reads it.
    """
    timing_path = timing_companion(path)
    if timing_path is None:
        return False
    header = timing_header(timing_path)
    name = os.path.basename(path)
    return (
        os.path.basename(header.get("INPUT_LOG", ""))
        == name
        != os.path.basename(header.get("OUTPUT_LOG", name))
    )


def _script_body(data: bytes, what: str) -> tuple[re.Match[bytes], bytes]:
    """The header match and the bytes between `Script started on` and `Script done on`."""
    first_nl = data.find(b"\n")
    header = _SCRIPT_HEADER.match(data[: first_nl if first_nl >= 0 else len(data)].rstrip(b"\r"))
    if header is None:
        raise StageFailure(ReasonCode.PARSE_ERROR, f"{what} does not start with 'Script started on'")
    body_start = first_nl + 1 if first_nl >= 0 else len(data)
    footer = _SCRIPT_FOOTER.search(data, body_start)
    return header, data[body_start : footer.start() if footer else len(data)]


def _read_log(path: str, limits: Limits, what: str) -> bytes:
    with open_binary(path, limits.max_gzip_expansion, limits.max_record_bytes) as fh:
        data: bytes = fh.read(limits.max_record_bytes + 1)
    if len(data) > limits.max_record_bytes:
        raise StageFailure(ReasonCode.TOO_LARGE, f"{what} exceeds {limits.max_record_bytes} bytes")
    return data


def parse_typescript(path: str, limits: Limits) -> ParsedRecord:
    """A `script` log: output only, or output and input when the timing file marks I/O chunks.

    Input comes from the typescript itself (`script -B`) or from the separate keystroke log the
    timing file names as INPUT_LOG (`script -I keys.log -O out.log -T timing`).
    """
    header, body = _script_body(_read_log(path, limits, "typescript"), "typescript")
    attrs = dict(_ATTR.findall((header.group("attrs") or b"").decode("utf-8", "replace")))
    width = _dim(_int_or_none(attrs.get("COLUMNS")), 80)
    height = _dim(_int_or_none(attrs.get("LINES")), 24)
    timing_path = timing_companion(path)
    keys = _separate_input_log(path, timing_path, limits) if timing_path else None
    events = _timed_events(body, keys, timing_path, limits) if timing_path else [[0.0, "o", _decode(body)]]
    return {
        "format": Format.TYPESCRIPT,
        "domain": "terminal",
        "events": events,
        "width": width,
        "height": height,
        "task": attrs.get("COMMAND", ""),
        "collected_at": None,
        "agent": None,
        "metadata": {
            "term": attrs.get("TERM", ""),
            "started": header.group("when").decode("utf-8", "replace").strip(),
            "timing_file": os.path.basename(timing_path) if timing_path else None,
        },
    }


def _separate_input_log(path: str, timing_path: str, limits: Limits) -> bytes | None:
    """The body of the keystroke log beside typescript PATH, when its timing log names one apart from it.

    `script` records the names as given on its command line; the file is looked up by its base name in
    the typescript's folder, where the recording's files travel together.
    """
    header = timing_header(timing_path)
    name = os.path.basename(header.get("INPUT_LOG", ""))
    if not name or name == os.path.basename(header.get("OUTPUT_LOG", "")) or name == os.path.basename(path):
        return None
    candidate = os.path.join(os.path.dirname(path), name)
    if not os.path.isfile(candidate):
        raise StageFailure(
            ReasonCode.PARSE_ERROR,
            f"timing log {os.path.basename(timing_path)} names input log {name}, not found",
        )
    return _script_body(_read_log(candidate, limits, "input log"), "input log")[1]


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() and len(value) < 6 else None


def _decode(chunk: bytes) -> str:
    return chunk.decode("utf-8", "replace")


def _timed_events(body: bytes, keys: bytes | None, timing_path: str, limits: Limits) -> list[list[Any]]:
    """Replay the body through its timing log: classic `delay bytes`, or advanced `O|I delay bytes`.

    The advanced format yields input events too: their bytes are in KEYS, the separate input log, when
    there is one, else in the body between the output chunks (`script -B`).
    """
    events: list[list[Any]] = []
    clock = 0.0
    offset = 0
    key_offset = 0
    with open_binary(timing_path) as fh:
        for raw in fh:
            line = raw.strip()
            classic = _TIMING_CLASSIC.match(line)
            advanced = None if classic else _TIMING_ADVANCED.match(line)
            if classic:
                code, delay, rest = "o", float(classic.group(1)), classic.group(2)
            elif advanced:
                code, delay, rest = (
                    advanced.group(1).decode().lower(),
                    float(advanced.group(2)),
                    advanced.group(3),
                )
            else:
                continue
            clock += delay
            if code not in ("o", "i"):
                continue  # H (header) and S (signal) lines carry no bytes of the log
            try:
                size = int(rest.split()[0])
            except (ValueError, IndexError):
                continue
            if code == "i" and keys is not None:
                chunk = keys[key_offset : key_offset + size]
                key_offset += size
            else:
                chunk = body[offset : offset + size]
                offset += size
            if chunk:
                events.append([round(clock, 6), code, _decode(chunk)])
            if len(events) > limits.max_events:
                raise StageFailure(
                    ReasonCode.TOO_LARGE, f"typescript has more than {limits.max_events} events"
                )
    if offset < len(body):
        events.append([round(clock, 6), "o", _decode(body[offset:])])
    return events
