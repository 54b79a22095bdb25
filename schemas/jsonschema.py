"""JSON Schema for the `export jsonl` form of a trajectory, derived from the Arrow schema.

The Arrow schema stays the only source of truth: field names, nullability, docs and enum values all come
from its fields' metadata. JSON-string columns (`metadata`, tool `parameters`) appear as JSON objects,
exactly as `Trajectory.to_json()` writes them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from schemas.trajectory import SCHEMA_VERSION, TRAJECTORY_SCHEMA

# Columns stored as JSON text in Parquet that are objects in the JSON form.
_JSON_OBJECT_FIELDS = {"metadata", "parameters"}


def _type_schema(typ: pa.DataType) -> dict[str, Any]:
    if pa.types.is_struct(typ):
        return _struct_schema([typ.field(i) for i in range(typ.num_fields)])
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return {"type": "array", "items": _field_schema(typ.value_field, as_item=True)}
    if pa.types.is_timestamp(typ):
        return {"type": "string", "format": "date-time"}
    if pa.types.is_boolean(typ):
        return {"type": "boolean"}
    if pa.types.is_integer(typ):
        return {"type": "integer"}
    if pa.types.is_floating(typ):
        return {"type": "number"}
    return {"type": "string"}


def _field_schema(f: pa.Field, *, as_item: bool = False) -> dict[str, Any]:
    meta = f.metadata or {}
    if f.name in _JSON_OBJECT_FIELDS and pa.types.is_string(f.type):
        schema: dict[str, Any] = {"type": "object"}
    else:
        schema = _type_schema(f.type)
    if b"enum" in meta:
        schema["enum"] = meta[b"enum"].decode().split(",")
    if b"doc" in meta:
        schema["description"] = meta[b"doc"].decode()
    if f.nullable and not as_item:
        schema = {**schema, "type": [schema["type"], "null"]} if "type" in schema else schema
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
    return schema


def _struct_schema(fields: list[pa.Field]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {f.name: _field_schema(f) for f in fields},
        "required": [f.name for f in fields if not f.nullable],
        "additionalProperties": False,
    }


def trajectory_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one trajectory in its JSON form."""
    body = _struct_schema(list(TRAJECTORY_SCHEMA))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:worldline:trajectory:{SCHEMA_VERSION}",
        "title": "worldline trajectory",
        "description": "The unified environment trajectory: system prompt parts, ordered turns, provenance.",
        "x-schema-version": SCHEMA_VERSION,
        **body,
    }
