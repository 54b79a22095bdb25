"""Helpers shared by the format parsers: message content to text, lenient literals, turn building."""

from __future__ import annotations

import ast
import json
import re
from datetime import datetime
from typing import Any

from curation_agents.model import RawTurn, Reason, StageFailure

_BASH_BLOCK = re.compile(r"```(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)


def content_text(content: Any) -> str:
    """OpenAI / Anthropic message content (a string or a list of parts) as plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
                elif part.get("type") in ("image", "image_url"):
                    parts.append("[image]")
        return "\n".join(parts)
    if isinstance(content, dict):
        return content_text(content.get("text") or content.get("content"))
    return str(content)


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
    return blocks[-1].strip() if blocks else None


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
        raise StageFailure(Reason.PARSE_ERROR, detail)


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


def open_binary(path: str) -> Any:
    """A binary file object over PATH, decompressing gzip transparently (detected by magic bytes)."""
    import gzip

    fh = open(path, "rb")
    head = fh.read(2)
    fh.seek(0)
    if head == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=fh, mode="rb")
    return fh


def read_limited(path: str, limit: int) -> bytes:
    """The whole (decompressed) file, or too_large when it exceeds `limit` bytes."""
    with open_binary(path) as fh:
        data: bytes = fh.read(limit + 1)
    if len(data) > limit:
        raise StageFailure(
            Reason.TOO_LARGE, f"record exceeds {limit} bytes; raise --max-record-mb to read it"
        )
    return data


def decode_json(data: bytes | str, where: str) -> Any:
    """Parse JSON, mapping every failure (syntax, encoding, nesting) onto a reason code."""
    try:
        return json.loads(data)
    except RecursionError as exc:
        raise StageFailure(Reason.TOO_DEEP, f"{where}: JSON nested too deeply") from exc
    except UnicodeDecodeError as exc:
        raise StageFailure(
            Reason.BAD_ENCODING, f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})"
        ) from exc
    except json.JSONDecodeError as exc:
        raise StageFailure(
            Reason.PARSE_ERROR, f"{where}: invalid JSON ({exc.msg} at char {exc.pos})"
        ) from exc
    except ValueError as exc:
        raise StageFailure(Reason.PARSE_ERROR, f"{where}: invalid JSON ({exc})") from exc


def as_dict(value: Any) -> dict[str, Any]:
    """VALUE when it is a JSON object, else an empty one (source logs omit and mistype fields)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """VALUE when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []
