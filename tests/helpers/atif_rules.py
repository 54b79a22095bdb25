"""ATIF-v1.7's rules in our own test code: `atif_problems(doc)` lists every way a document breaks them.

Where the rules come from. The field tables of harbor's ATIF specification, RFC 0001 "Agent
Trajectory Interchange Format" at v1.7 (`rfcs/0001-trajectory-format.md` in harbor-framework/harbor,
also published as harbor's "Agent Trajectory Format (ATIF)" docs page): the root, AgentSchema,
StepObject, ToolCallSchema, ObservationSchema, ObservationResultSchema, ContentPartSchema,
ImageSourceSchema, SubagentTrajectoryRefSchema, MetricsSchema and FinalMetricsSchema, each with its
required and optional fields and their JSON types. And the checks harbor's reference pydantic models
(`harbor.models.trajectories`, harbor 0.22.0) make beyond those tables: no field outside an object's
table (producer data goes in the `extra` objects), step ids 1, 2, 3... in order, the fields only an
agent step may carry, an `llm_call_count` of 0 on an agent step ruling out `metrics` and
`reasoning_content`, a result's `source_call_id` naming a call of its own step, a subagent reference
naming a `trajectory_id` or a `trajectory_path`, embedded subagents each a whole valid trajectory
with its own unique `trajectory_id`, timestamps that Python's `datetime.fromisoformat` reads (a
trailing `Z` allowed), and the text/image rule of content parts.

Where these rules are stricter than harbor's model: `schema_version` must be present (the RFC marks
it required; the model fills in v1.7 when it is missing), and values must have their JSON type as
written (the model coerces in pydantic's lax mode, so it takes `"2"` for a step id or `"yes"` for a
boolean). Harbor's own model is not part of this repository; `harbor_model()` loads it from the
folder ATIF_MODEL_ROOT names (the folder holding `harbor/models/trajectories/`, such as a harbor
checkout's `src/`), and `assert_valid_atif` then validates with it too.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

SCHEMA_VERSIONS = frozenset(f"ATIF-v1.{minor}" for minor in range(8))
SOURCES = frozenset({"system", "user", "agent"})
AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")
"""Step fields that only a `source: "agent"` step may set (null elsewhere)."""
NO_LLM_FORBIDS = ("metrics", "reasoning_content")
"""Step fields an agent step with `llm_call_count` 0 (a deterministic dispatch) must leave unset."""
IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
CONTENT_TYPES = frozenset({"text", "image"})

Problems = list[str]
Nested = Callable[[Any, str, Problems], None]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_SCALARS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "string": (lambda v: isinstance(v, str), "a string"),
    "integer": (_is_int, "an integer"),
    "count": (lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    "ordinal": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "number": (_is_number, "a number"),
    "string or number": (lambda v: isinstance(v, str) or _is_number(v), "a string or a number"),
    "boolean": (lambda v: isinstance(v, bool), "a boolean"),
    "object": (lambda v: isinstance(v, dict), "an object"),
    "objects": (lambda v: isinstance(v, list) and all(isinstance(i, dict) for i in v), "an array of objects"),
    "integers": (lambda v: isinstance(v, list) and all(_is_int(i) for i in v), "an array of integers"),
    "numbers": (lambda v: isinstance(v, list) and all(_is_number(i) for i in v), "an array of numbers"),
}

Kind = str | frozenset[str] | Nested
"""A field's kind: a name in _SCALARS, the closed set of strings it takes, or a checker of a nested value."""
Table = dict[str, tuple[Kind, bool]]
"""An object's fields: name -> (kind, required). A required field may not be null; others may."""


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _check_fields(obj: Any, path: str, table: Table, problems: Problems) -> bool:
    """OBJ is an object with only TABLE's fields, the required ones set, each of its kind; False if
    OBJ is not an object at all (nothing else can be checked then)."""
    if not isinstance(obj, dict):
        problems.append(f"{path}: expected an object, got {_type_name(obj)}")
        return False
    for key in obj:
        if key not in table:
            problems.append(f"{path}.{key}: not an ATIF field here (producer data goes in `extra`)")
    for key, (kind, required) in table.items():
        value = obj.get(key)
        if value is None:
            if required:
                problems.append(f"{path}.{key}: required" + (", got null" if key in obj else ""))
            continue
        where = f"{path}.{key}"
        if isinstance(kind, frozenset):
            if not isinstance(value, str) or value not in kind:
                problems.append(f"{where}: expected one of {sorted(kind)}, got {value!r}"[:300])
        elif isinstance(kind, str):
            accepts, expected = _SCALARS[kind]
            if not accepts(value):
                problems.append(f"{where}: expected {expected}, got {_type_name(value)} {value!r}"[:300])
        else:
            kind(value, where, problems)
    return True


def _each(check: Nested) -> Nested:
    """A checker of an array whose every element CHECK checks."""

    def check_array(value: Any, path: str, problems: Problems) -> None:
        if not isinstance(value, list):
            problems.append(f"{path}: expected an array, got {_type_name(value)}")
            return
        for i, item in enumerate(value):
            check(item, f"{path}[{i}]", problems)

    return check_array


def _object(table: Table) -> Nested:
    """A checker of an object with TABLE's fields."""

    def check_object(value: Any, path: str, problems: Problems) -> None:
        _check_fields(value, path, table, problems)

    return check_object


_image_source = _object({"media_type": (IMAGE_MEDIA_TYPES, True), "path": ("string", True)})


def _content_part(value: Any, path: str, problems: Problems) -> None:
    table: Table = {
        "type": (CONTENT_TYPES, True),
        "text": ("string", False),
        "source": (_image_source, False),
    }
    if (
        not _check_fields(value, path, table, problems)
        or not isinstance(value.get("type"), str)
        or value["type"] not in CONTENT_TYPES
    ):
        return
    needs, refuses = ("text", "source") if value["type"] == "text" else ("source", "text")
    if value.get(needs) is None:
        problems.append(f"{path}.{needs}: required when type is {value['type']!r}")
    if value.get(refuses) is not None:
        problems.append(f"{path}.{refuses}: not allowed when type is {value['type']!r}")


def _content(value: Any, path: str, problems: Problems) -> None:
    """A message or a result's content: a string, or (v1.6 on) an array of content parts."""
    if isinstance(value, str):
        return
    if not isinstance(value, list):
        problems.append(f"{path}: expected a string or an array of content parts, got {_type_name(value)}")
        return
    _each(_content_part)(value, path, problems)


def _timestamp(value: Any, path: str, problems: Problems) -> None:
    if not isinstance(value, str):
        problems.append(f"{path}: expected an ISO 8601 string, got {_type_name(value)}")
        return
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        problems.append(f"{path}: not an ISO 8601 timestamp: {value!r}")


def _subagent_ref(value: Any, path: str, problems: Problems) -> None:
    table: Table = {
        "trajectory_id": ("string", False),
        "session_id": ("string", False),
        "trajectory_path": ("string", False),
        "extra": ("object", False),
    }
    if not _check_fields(value, path, table, problems):
        return
    if value.get("trajectory_id") is None and value.get("trajectory_path") is None:
        problems.append(
            f"{path}: sets neither trajectory_id nor trajectory_path (session_id does not resolve)"
        )


_RESULT: Table = {
    "source_call_id": ("string", False),
    "content": (_content, False),
    "subagent_trajectory_ref": (_each(_subagent_ref), False),
    "extra": ("object", False),
}


_observation = _object({"results": (_each(_object(_RESULT)), True)})
_tool_call = _object(
    {
        "tool_call_id": ("string", True),
        "function_name": ("string", True),
        "arguments": ("object", True),
        "extra": ("object", False),
    }
)


_METRICS: Table = {
    "prompt_tokens": ("integer", False),
    "completion_tokens": ("integer", False),
    "cached_tokens": ("integer", False),
    "cost_usd": ("number", False),
    "prompt_token_ids": ("integers", False),
    "completion_token_ids": ("integers", False),
    "logprobs": ("numbers", False),
    "extra": ("object", False),
}
_FINAL_METRICS: Table = {
    "total_prompt_tokens": ("integer", False),
    "total_completion_tokens": ("integer", False),
    "total_cached_tokens": ("integer", False),
    "total_cost_usd": ("number", False),
    "total_steps": ("count", False),
    "extra": ("object", False),
}
_AGENT: Table = {
    "name": ("string", True),
    "version": ("string", True),
    "model_name": ("string", False),
    "tool_definitions": ("objects", False),
    "extra": ("object", False),
}
_STEP: Table = {
    "step_id": ("ordinal", True),
    "timestamp": (_timestamp, False),
    "source": (SOURCES, True),
    "model_name": ("string", False),
    "reasoning_effort": ("string or number", False),
    "message": (_content, True),
    "reasoning_content": ("string", False),
    "tool_calls": (_each(_tool_call), False),
    "observation": (_observation, False),
    "metrics": (_object(_METRICS), False),
    "is_copied_context": ("boolean", False),
    "llm_call_count": ("count", False),
    "extra": ("object", False),
}


def _step(step: Any, path: str, problems: Problems) -> None:
    if not _check_fields(step, path, _STEP, problems):
        return
    source = step.get("source")
    if isinstance(source, str) and source in SOURCES and source != "agent":
        for key in AGENT_ONLY:
            if step.get(key) is not None:
                problems.append(f"{path}.{key}: only an agent step has it (source is {source!r})")
    if source == "agent" and _is_int(step.get("llm_call_count")) and step["llm_call_count"] == 0:
        for key in NO_LLM_FORBIDS:
            if step.get(key) is not None:
                problems.append(f"{path}.{key}: not allowed when llm_call_count is 0 (no LLM call)")
    calls = step.get("tool_calls")
    calls = calls if isinstance(calls, list) else []
    call_ids = {c.get("tool_call_id") if isinstance(c, dict) else None for c in calls}
    if not all(isinstance(c, str) for c in call_ids):
        return  # a call without an id is reported above; links are checked once every call has one
    observation = step.get("observation")
    results = observation.get("results") if isinstance(observation, dict) else None
    for i, result in enumerate(results if isinstance(results, list) else []):
        call_id = result.get("source_call_id") if isinstance(result, dict) else None
        if isinstance(call_id, str) and call_id not in call_ids:
            problems.append(
                f"{path}.observation.results[{i}].source_call_id: {call_id!r} is no tool_call_id of this step"
            )


def _trajectory(doc: Any, path: str, problems: Problems) -> None:
    table: Table = {
        "schema_version": (SCHEMA_VERSIONS, True),
        "session_id": ("string", False),
        "trajectory_id": ("string", False),
        "agent": (_object(_AGENT), True),
        "steps": (_each(_step), True),
        "notes": ("string", False),
        "final_metrics": (_object(_FINAL_METRICS), False),
        "continued_trajectory_ref": ("string", False),
        "extra": ("object", False),
        "subagent_trajectories": (_each(_trajectory), False),
    }
    if not _check_fields(doc, path, table, problems):
        return
    steps = doc.get("steps")
    if isinstance(steps, list):
        if not steps:
            problems.append(f"{path}.steps: empty (a trajectory has at least one step)")
        for i, step in enumerate(steps):
            step_id = step.get("step_id") if isinstance(step, dict) else None
            if isinstance(step_id, int) and _is_int(step_id) and step_id >= 1 and step_id != i + 1:
                problems.append(
                    f"{path}.steps[{i}].step_id: expected {i + 1} (in order from 1), got {step_id}"
                )
    subagents = doc.get("subagent_trajectories")
    seen: set[str] = set()
    for i, sub in enumerate(subagents if isinstance(subagents, list) else []):
        sub_id = sub.get("trajectory_id") if isinstance(sub, dict) else None
        if isinstance(sub, dict) and sub_id is None:
            problems.append(
                f"{path}.subagent_trajectories[{i}].trajectory_id: required on an embedded subagent"
            )
        elif isinstance(sub_id, str):
            if sub_id in seen:
                problems.append(f"{path}.subagent_trajectories[{i}].trajectory_id: {sub_id!r} is not unique")
            seen.add(sub_id)


def atif_problems(doc: Any) -> list[str]:
    """Every way DOC (a parsed JSON document) breaks ATIF-v1.7's rules, each as "JSON path: what is
    wrong" (the path from `$`, the document); [] when DOC is valid ATIF."""
    problems: Problems = []
    _trajectory(doc, "$", problems)
    return problems


def harbor_model() -> Any:
    """Harbor's `harbor.models.trajectories.Trajectory` from the folder ATIF_MODEL_ROOT names; None
    when the variable is unset."""
    root = os.environ.get("ATIF_MODEL_ROOT")
    if not root:
        return None
    if root not in sys.path:
        sys.path.insert(0, root)
    from harbor.models.trajectories import Trajectory

    return Trajectory


HARBOR_MODEL = harbor_model()


def assert_valid_atif(doc: Any) -> dict[str, Any]:
    """DOC as it is on disk (a JSON round trip) when it follows ATIF-v1.7's rules, else an
    AssertionError listing every problem; with ATIF_MODEL_ROOT, harbor's model validates it too."""
    text = json.dumps(doc, ensure_ascii=False)
    on_disk: dict[str, Any] = json.loads(text)
    problems = atif_problems(on_disk)
    assert not problems, "not valid ATIF:\n" + "\n".join(problems)
    if HARBOR_MODEL is not None:
        HARBOR_MODEL.model_validate_json(text)
    return on_disk
