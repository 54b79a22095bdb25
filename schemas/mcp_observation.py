"""The MCP observation: one text for a tool result, whatever the source (collected, a cleaned log, an import).

A `tools/call` result is observed as its content blocks in MCP JSON as the server sent them (camelCase
keys, extra fields kept, keys in the schema's order, compact): one block is the block's object, several
are an array of them, none is `[]`. This is the form of AgentWorldBench's MCP ground truth, whose trajectories come from
agents on the OpenAI Agents SDK (Toolathlon, MCPMark): the SDK hands the model `content[0]` as JSON,
or the list of blocks, and its MCP system prompt names `{"type":"text","text":"..."}` as the MCP text
wrapper. `isError` is the observation's `is_error`; `structuredContent` is kept beside the observation
(turn metadata `structured_content`), since servers repeat it as a text block. A JSON-RPC error response
is `{"error": {"code", "message", "data"}}` as the server sent it.

Binary payloads (image and audio `data`, resource `blob`) are described instead of inlined:
`[image image/png, 4033 bytes, sha256 0123456789abcdef]`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Any

STRUCTURED_CONTENT = "structured_content"  # turn metadata key: the result's structuredContent, verbatim
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def write_json(value: Any) -> str:
    """Compact JSON, non-ASCII kept (what the MCP SDKs put on the wire)."""
    return _ENCODER.encode(value)


_DESCRIBED = re.compile(r"\[(?:image|audio|blob) [^\]]*, \d+ bytes, sha256 [0-9a-f]{16}\]")


def describe_binary(data: str, mime_type: Any, what: str) -> str:
    """A base64 payload as a short description: kind, MIME type, decoded size and a digest (a payload
    already described stays as it is, so an observation read again is unchanged)."""
    if _DESCRIBED.fullmatch(data):
        return data
    try:
        raw = base64.b64decode(data, validate=False)
    except (ValueError, TypeError, binascii.Error):
        raw = data.encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(raw).hexdigest()[:16]
    kind = mime_type if isinstance(mime_type, str) and mime_type else "unknown type"
    return f"[{what} {kind}, {len(raw)} bytes, sha256 {digest}]"


# Keys in the order of the MCP schema's content types (the order the Python SDK, and so the evaluator's
# samples, write them), then any other key in the order it came: servers write the same block with
# their keys in any order, and one step must have one text.
BLOCK_KEYS = ("type", "text", "data", "mimeType", "resource", "name", "title", "uri", "description", "size")
RESOURCE_KEYS = ("uri", "name", "title", "mimeType", "text", "blob", "size")
TRAILING_KEYS = ("annotations", "_meta")


def _ordered(obj: dict[str, Any], leading: tuple[str, ...]) -> dict[str, Any]:
    first = [k for k in leading if k in obj]
    last = [k for k in TRAILING_KEYS if k in obj]
    middle = [k for k in obj if k not in leading and k not in TRAILING_KEYS]
    return {k: obj[k] for k in (*first, *middle, *last)}


def observed_block(block: Any) -> Any:
    """One content block as observed: the server's fields in the schema's order, binary data replaced by
    its description."""
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    out = _ordered(block, BLOCK_KEYS)
    if kind in ("image", "audio") and isinstance(out.get("data"), str):
        out["data"] = describe_binary(out["data"], out.get("mimeType"), kind)
    resource = out.get("resource")
    if kind == "resource" and isinstance(resource, dict):
        resource = _ordered(resource, RESOURCE_KEYS)
        if isinstance(resource.get("blob"), str):
            resource["blob"] = describe_binary(resource["blob"], resource.get("mimeType"), "blob")
        out["resource"] = resource
    return out


def render_content(content: Any) -> str:
    """The observation text of a result's `content`: one block alone, several as an array, none `[]`."""
    blocks = content if isinstance(content, list) else []
    observed = [observed_block(b) for b in blocks]
    return write_json(observed[0] if len(observed) == 1 else observed)


def render_result(result: dict[str, Any]) -> tuple[str, bool, Any]:
    """(observation text, is_error, structuredContent or None) of a `tools/call` result as sent."""
    content = result.get("content")
    # A result without a content list is not MCP's shape: what the server sent is the observation.
    text = render_content(content) if isinstance(content, list) else write_json(result)
    return text, result.get("isError") is True, result.get("structuredContent")


def render_error(error: Any) -> str:
    """A JSON-RPC error response's `error` member as observed."""
    return write_json({"error": error})


def normalise(text: str) -> tuple[str, bool | None, Any] | None:
    """An observation written in another MCP form, in this one: a whole `tools/call` result
    (`{"content": [...], "isError": ...}`), or content blocks written with other spacing or escapes.
    None when `text` is none of these (plain text, a JSON-RPC error, other JSON): it stays as it is."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, dict) and isinstance(value.get("content"), list) and "type" not in value:
        rendered, _, structured = render_result(value)
        flag = value.get("isError")
        return rendered, flag if isinstance(flag, bool) else None, structured
    if _is_block(value) or (isinstance(value, list) and all(_is_block(b) for b in value)):
        return render_content(value if isinstance(value, list) else [value]), None, None
    return None


def _is_block(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str)
