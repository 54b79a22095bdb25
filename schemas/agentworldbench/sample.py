"""The AgentWorldBench sample record: its eight JSON fields, their validation and the domain it names."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas.domains import is_registered, registered_domains
from schemas.trajectory import Domain

META_KEY = "agentworldbench"
"""Key of the trajectory / turn metadata that carries what only the AgentWorldBench layout has."""

SOURCE_NAME = "agentworldbench"
FILE_SUFFIX = "_test.jsonl"
REQUIRED_FIELDS = (
    "task",
    "id",
    "turn_idx",
    "total_turns",
    "system_str",
    "prompt",
    "response",
    "current_prompt",
)
FIELD_ORDER = ("task", "id", "prompt", "response", "current_prompt", "system_str", "turn_idx", "total_turns")


class SampleError(ValueError):
    """A sample line that cannot be read; the message names the file, the line and the field."""

    def __init__(self, path: str | Path, line: int, field_name: str, reason: str, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.field = field_name
        self.reason = reason
        self.detail = message
        super().__init__(f"{path}:{line}: field {field_name!r}: {message}")

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "line": self.line,
            "field": self.field,
            "reason": self.reason,
            "message": self.detail,
        }


class SampleFieldError(ValueError):
    """One field of a decoded sample is missing or wrong; `reason` is the quarantine reason code."""

    def __init__(self, field_name: str, reason: str, message: str) -> None:
        self.field = field_name
        self.reason = reason
        super().__init__(message)


@dataclass(slots=True)
class AgentWorldBenchSample:
    """One AgentWorldBench line: turn `turn_idx` of a trajectory, with its history and ground truth."""

    task: str
    id: int | str
    turn_idx: int
    total_turns: int
    system_str: str
    prompt: list[str]
    response: list[str]
    current_prompt: str
    extra: dict[str, Any] = field(default_factory=dict)
    """Fields beyond the eight of the format, kept as they are."""

    @property
    def domain_name(self) -> str:
        """The domain the `task` field names (its last path segment)."""
        return domain_name_of(self.task)

    @property
    def ground_truth(self) -> str:
        return self.response[self.turn_idx - 1]

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "task": self.task,
            "id": self.id,
            "prompt": self.prompt,
            "response": self.response,
            "current_prompt": self.current_prompt,
            "system_str": self.system_str,
            "turn_idx": self.turn_idx,
            "total_turns": self.total_turns,
        }
        obj.update({k: v for k, v in self.extra.items() if k not in obj})
        return obj

    def to_json_line(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False)

    @classmethod
    def from_json(cls, obj: Any) -> AgentWorldBenchSample:
        """Validate one decoded line; raises `SampleFieldError` naming the field and the fix."""
        if not isinstance(obj, dict):
            raise SampleFieldError(
                "<line>", "not_an_object", f"a sample is a JSON object, got {type(obj).__name__}"
            )
        for name in REQUIRED_FIELDS:
            if name not in obj:
                raise SampleFieldError(name, "missing_field", "required field is missing")
        task = _expect_str(obj, "task")
        if not task.strip():
            raise SampleFieldError("task", "invalid_value", "must name the domain, e.g. 'terminal'")
        sample_id = obj["id"]
        if isinstance(sample_id, bool) or not isinstance(sample_id, int | str):
            raise SampleFieldError(
                "id", "wrong_type", f"must be an integer or a string, got {_type_name(sample_id)}"
            )
        if isinstance(sample_id, str) and not sample_id:
            raise SampleFieldError("id", "invalid_value", "must not be empty")
        turn_idx = _expect_int(obj, "turn_idx")
        total = _expect_int(obj, "total_turns")
        if total < 1:
            raise SampleFieldError("total_turns", "invalid_value", f"must be >= 1, got {total}")
        if not 1 <= turn_idx <= total:
            raise SampleFieldError(
                "turn_idx", "invalid_value", f"must be in 1..total_turns ({total}), got {turn_idx}"
            )
        system_str = _expect_str(obj, "system_str")
        # The reference evaluator accepts a bare string for a one-turn list; so do we.
        prompts = _expect_str_list(obj, "prompt")
        responses = _expect_str_list(obj, "response")
        if len(prompts) != len(responses):
            raise SampleFieldError(
                "response",
                "list_length_mismatch",
                f"has {len(responses)} item(s) but prompt has {len(prompts)}; they pair up one per turn",
            )
        if not turn_idx <= len(prompts) <= total:
            raise SampleFieldError(
                "prompt",
                "list_length_mismatch",
                f"has {len(prompts)} turn(s); it must hold at least turn_idx ({turn_idx}) and at most "
                f"total_turns ({total})",
            )
        current = _expect_str(obj, "current_prompt")
        extra = {k: v for k, v in obj.items() if k not in REQUIRED_FIELDS}
        return cls(task, sample_id, turn_idx, total, system_str, prompts, responses, current, extra)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _expect_str(obj: dict[str, Any], name: str) -> str:
    value = obj[name]
    if not isinstance(value, str):
        raise SampleFieldError(name, "wrong_type", f"must be a string, got {_type_name(value)}")
    return value


def _expect_int(obj: dict[str, Any], name: str) -> int:
    value = obj[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise SampleFieldError(name, "wrong_type", f"must be an integer, got {_type_name(value)}")
    return value


def _expect_str_list(obj: dict[str, Any], name: str) -> list[str]:
    value = obj[name]
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise SampleFieldError(name, "wrong_type", f"must be a list of strings, got {_type_name(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise SampleFieldError(f"{name}[{i}]", "wrong_type", f"must be a string, got {_type_name(item)}")
    return value


def domain_of(sample: AgentWorldBenchSample, path: str | Path | None = None) -> Domain:
    """The sample's domain: its `task` field, else the file name (`terminal_test.jsonl`)."""
    try:
        return Domain(sample.domain_name)
    except ValueError:
        pass
    if path is not None:
        stem = Path(path).name.split(".")[0].split("_")[0]
        if is_registered(stem):
            return Domain(stem)
    known = ", ".join(spec.value for spec in registered_domains())
    raise SampleFieldError("task", "unknown_domain", f"{sample.task!r} is not a domain ({known})")


def domain_name_of(task: str) -> str:
    """The domain a `task` field names: its last path segment (`group/mcp` names mcp)."""
    return task.rsplit("/", 1)[-1]
