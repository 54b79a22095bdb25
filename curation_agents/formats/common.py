"""Helpers shared by the format parsers: message content to text, lenient literals, turn building."""

from __future__ import annotations

import ast
import json
import re
import zlib
from datetime import datetime
from typing import Any

from curation_agents.model import RawTurn, StageFailure
from schemas.reasons import ReasonCode

# Fenced shell blocks; mini-swe-agent 2 fences its actions as ```mswea_bash_command (its text-based
# config) or tags them <mswea_bash_command> (its XML config), so they never clash with examples.
_BASH_BLOCK = re.compile(
    r"```(?:bash|sh|shell|console|mswea_bash_command)?[ \t]*\n(.*?)```"
    r"|<mswea_bash_command>(.*?)</mswea_bash_command>",
    re.DOTALL,
)


def content_text(content: Any) -> str:
    """OpenAI / Anthropic / MCP message content (a string or a list of parts) as plain text.

    Parts without text are described rather than dropped: images and audio by mime type and size,
    MCP embedded resources by URI (with their text when they carry it), resource links by name, URI,
    mime type and size.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [content_part_text(part) for part in content]
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict):
        if "type" in content:
            return content_part_text(content)
        return content_text(content.get("text") or content.get("content"))
    return str(content)


def _size(value: Any, encoded: Any = None) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value} bytes"
    if isinstance(encoded, str) and encoded:
        return f"{len(encoded) * 3 // 4} bytes"  # base64
    return "size unknown"


def content_part_text(part: Any) -> str:
    """One content part as text (see content_text)."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    kind = part.get("type")
    text = part.get("text")
    if isinstance(text, str) and kind in (None, "text", "input_text", "output_text"):
        return text
    if kind in ("image", "audio", "image_url", "input_image", "input_audio"):
        source = as_dict(part.get("source"))
        mime = part.get("mimeType") or part.get("media_type") or source.get("media_type") or "unknown type"
        data = part.get("data") if isinstance(part.get("data"), str) else source.get("data")
        url = as_dict(part.get("image_url")).get("url") or source.get("url")
        if isinstance(url, str) and url.startswith("data:"):
            mime = url[5:].split(";", 1)[0] or mime
            data, url = url.split(",", 1)[-1], None
        where = f", {url}" if isinstance(url, str) else ""
        return f"[{'audio' if 'audio' in str(kind) else 'image'}: {mime}, {_size(part.get('size'), data)}{where}]"
    if kind == "resource":
        resource = as_dict(part.get("resource"))
        uri = resource.get("uri") or "unknown uri"
        mime = resource.get("mimeType") or "unknown type"
        if isinstance(resource.get("text"), str):
            return f"[resource: {uri} ({mime})]\n{resource['text']}"
        return f"[resource: {uri} ({mime}, {_size(resource.get('size'), resource.get('blob'))})]"
    if kind == "resource_link":
        name = part.get("name") or part.get("title") or ""
        uri = part.get("uri") or "unknown uri"
        mime = part.get("mimeType") or "unknown type"
        desc = f" - {part['description']}" if isinstance(part.get("description"), str) else ""
        return f"[resource_link: {name} {uri} ({mime}, {_size(part.get('size'))}){desc}]".replace("  ", " ")
    if kind == "tool_result":
        return content_text(part.get("content"))
    if kind in ("tool_use", "thinking", "redacted_thinking"):
        return ""  # calls and hidden reasoning are read by the parsers, not shown as text
    if isinstance(text, str):
        return text
    return ""


def lenient_literal(text: Any) -> Any:
    """A value that may be JSON or a Python literal written by repr(); None when it is neither."""
    if not isinstance(text, str):
        return text
    if len(text) > 4_000_000:
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None


def bash_block(text: str) -> str | None:
    """The last fenced shell block in an agent message (mini-swe-agent's action convention)."""
    blocks = _BASH_BLOCK.findall(text)
    return (blocks[-1][0] or blocks[-1][1]).strip() if blocks else None


def tool_call_json(name: str, arguments: Any) -> str:
    """A tool call in the schema's JSON form: {"name": ..., "arguments": {...}}."""
    if isinstance(arguments, str):
        parsed = lenient_literal(arguments)
        arguments = parsed if isinstance(parsed, dict) else {"raw": arguments}
    if arguments is None:
        arguments = {}
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False, sort_keys=True)


def turn(
    action: str,
    action_kind: str,
    observation: str,
    *,
    tool_name: str | None = None,
    observation_format: str = "text",
    is_error: bool | None = None,
    exit_code: int | None = None,
    started_at: str | None = None,
    duration_s: float | None = None,
    metadata: dict[str, Any] | None = None,
) -> RawTurn:
    return {
        "action": action,
        "action_kind": action_kind,
        "tool_name": tool_name,
        "observation": observation,
        "observation_format": observation_format,
        "is_error": is_error,
        "exit_code": exit_code,
        "started_at": started_at,
        "duration_s": duration_s,
        "metadata": metadata or {},
    }


def require(condition: bool, detail: str) -> None:
    """Fail the record with parse_error when a format invariant does not hold."""
    if not condition:
        raise StageFailure(ReasonCode.PARSE_ERROR, detail)


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if -(2**31) <= value < 2**31 else None
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,9}", value.strip()):
        return int(value.strip())
    return None


def source_time(value: str | None) -> datetime | None:
    """An ISO time from a source log, or None when it is missing or not a time."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


GZIP_MAGIC = b"\x1f\x8b"
DEFAULT_GZIP_EXPANSION = 200
GZIP_FLOOR_BYTES = 64 * 1024 * 1024


class ExpansionGuard:
    """A gzip stream that hands out everything it could decompress, then reports damage, and stops with
    too_large once it has produced more than `allowed` bytes.

    Real logs compress 5-50x; a file of newlines compresses a thousand-fold, so without a bound a few
    megabytes on disk become gigabytes to scan. A truncated or corrupt file yields the records before
    the damage (gzip.GzipFile would drop the last decompressed block), then raises EOFError or
    zlib.error. Concatenated gzip members are read one after another, as gzip does.
    """

    _RAW_CHUNK = 1 << 16

    def __init__(self, raw: Any, allowed: int, name: str) -> None:
        self._raw = raw
        self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._buf = bytearray()
        self._error: BaseException | None = None
        self._done = False
        self._member_open = False  # inside a gzip member: input ending here means a truncated file
        self.allowed = allowed
        self.produced = 0
        self.name = name

    def _fill(self, want: int) -> None:
        """Decompress until the buffer holds `want` bytes (or a newline when want < 0) or the input ends."""
        while not self._done and (len(self._buf) < want if want >= 0 else self._buf.find(b"\n") < 0):
            try:
                chunk = self._inflate.unconsumed_tail or self._raw.read(self._RAW_CHUNK)
                if not chunk:
                    if self._member_open:
                        self._error = EOFError("compressed file ended before the end-of-stream marker")
                    self._done = True
                    break
                if not self._member_open and not chunk.strip(b"\x00"):
                    continue  # padding after the last member
                self._member_open = True
                data = self._inflate.decompress(chunk, self._RAW_CHUNK * 16)
                while self._inflate.eof:  # a member ended; the next may start in the same chunk
                    rest = self._inflate.unused_data
                    self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    self._member_open = bool(rest.strip(b"\x00"))
                    if not self._member_open:
                        break
                    data += self._inflate.decompress(rest, self._RAW_CHUNK * 16)
            except zlib.error as exc:
                self._error, self._done = exc, True
                break
            self.produced += len(data)
            if self.produced > self.allowed:
                self._error = StageFailure(
                    ReasonCode.TOO_LARGE,
                    f"{self.name}: gzip expands beyond {self.allowed} bytes (a compression bomb?); "
                    "raise --max-record-mb if it is a real log",
                )
                self._done = True
                break
            self._buf += data

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        if not out and self._error is not None:
            error, self._error = self._error, None
            raise error
        return out

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            self._fill(1 << 62)
            return self._take(len(self._buf))
        self._fill(size)
        return self._take(size)

    def readline(self, size: int = -1) -> bytes:
        self._fill(-1 if size is None or size < 0 else 0)
        nl = self._buf.find(b"\n")
        while nl < 0 and not self._done and (size is None or size < 0 or len(self._buf) < size):
            self._fill(len(self._buf) + self._RAW_CHUNK)
            nl = self._buf.find(b"\n")
        end = nl + 1 if nl >= 0 else len(self._buf)
        if size is not None and size >= 0:
            end = min(end, size)
        return self._take(end)

    def __iter__(self) -> Any:
        while True:
            line = self.readline()
            if not line:
                return
            yield line

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> ExpansionGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_binary(path: str, max_expansion: int = DEFAULT_GZIP_EXPANSION, floor: int = GZIP_FLOOR_BYTES) -> Any:
    """A binary file object over PATH, decompressing gzip transparently (detected by magic bytes).

    Decompressed gzip is bounded to max(floor, max_expansion x the compressed size).
    """
    import os

    fh = open(path, "rb")
    head = fh.read(2)
    fh.seek(0)
    if head == GZIP_MAGIC:
        allowed = max(floor, max_expansion * os.fstat(fh.fileno()).st_size)
        return ExpansionGuard(fh, allowed, os.path.basename(path))
    return fh


# Exceptions that mean the bytes of a file are damaged: truncated or corrupt gzip, unreadable file.
CORRUPT_INPUT_ERRORS: tuple[type[BaseException], ...] = (EOFError, OSError, zlib.error)


def read_limited(path: str, limit: int) -> bytes:
    """The whole (decompressed) file, or too_large when it exceeds `limit` bytes."""
    with open_binary(path) as fh:
        data: bytes = fh.read(limit + 1)
    if len(data) > limit:
        raise StageFailure(
            ReasonCode.TOO_LARGE, f"record exceeds {limit} bytes; raise --max-record-mb to read it"
        )
    return data


def decode_json(data: bytes | str, where: str) -> Any:
    """Parse JSON, mapping every failure (syntax, encoding, nesting) onto a reason code."""
    try:
        return json.loads(data)
    except RecursionError as exc:
        raise StageFailure(ReasonCode.TOO_DEEP, f"{where}: JSON nested too deeply") from exc
    except UnicodeDecodeError as exc:
        raise StageFailure(
            ReasonCode.BAD_ENCODING, f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})"
        ) from exc
    except json.JSONDecodeError as exc:
        raise StageFailure(
            ReasonCode.PARSE_ERROR, f"{where}: invalid JSON ({exc.msg} at char {exc.pos})"
        ) from exc
    except ValueError as exc:
        raise StageFailure(ReasonCode.PARSE_ERROR, f"{where}: invalid JSON ({exc})") from exc


def as_dict(value: Any) -> dict[str, Any]:
    """VALUE when it is a JSON object, else an empty one (source logs omit and mistype fields)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """VALUE when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []
