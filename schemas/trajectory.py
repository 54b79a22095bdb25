"""The unified environment trajectory: one explicit Arrow schema and the typed model that mirrors it.

The Arrow schema below is the single source of truth. The dataclasses round-trip with it exactly
(`Trajectory.from_record(t.to_record()) == t`), and the JSON Schema is derived from it, so a field
added here appears everywhere at once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import orjson
import pyarrow as pa

SCHEMA_VERSION = "1.0.0"
"""Major.minor.patch. Readers accept any minor/patch of their major and reject a newer major."""

SCHEMA_MAJOR = int(SCHEMA_VERSION.split(".")[0])
SCHEMA_METADATA_KEY = b"worldline.schema_version"


class Domain(StrEnum):
    """The kind of environment: the seven built-in ones, plus any added through schemas.domains.

    A domain's facts live in its `schemas.domains.DomainSpec`; this enum is only its value.
    """

    MCP = "mcp"
    SEARCH = "search"
    TERMINAL = "terminal"
    SWE = "swe"
    ANDROID = "android"
    WEB = "web"
    OS = "os"

    @classmethod
    def _missing_(cls, value: object) -> Domain | None:
        return _EXTENDED_DOMAINS.get(value) if isinstance(value, str) else None


_EXTENDED_DOMAINS: dict[str, Domain] = {}
"""Domains added by `schemas.domains.register_domain`, by value."""


def extended_domain(value: str) -> Domain:
    """The `Domain` of a value beyond the seven members: it parses, compares and hashes as its string,
    but is not iterated, so the Arrow schema's enum metadata (the on-disk format) stays the same."""
    member = _EXTENDED_DOMAINS.get(value)
    if member is None:
        member = str.__new__(Domain, value)
        member._name_ = value.upper()
        member._value_ = value
        _EXTENDED_DOMAINS[value] = member
    return member


def forget_extended_domain(value: str) -> None:
    _EXTENDED_DOMAINS.pop(value, None)


class SourceKind(StrEnum):
    """Where a trajectory came from; pool assignment rules key on this."""

    INFRA = "infra"
    PUBLIC = "public"
    INHOUSE = "inhouse"


class TrajectoryStatus(StrEnum):
    """How the episode ended."""

    COMPLETE = "complete"
    TRUNCATED = "truncated"
    ENV_FAILURE = "env_failure"
    POLICY_ERROR = "policy_error"
    ABORTED = "aborted"


class ActionKind(StrEnum):
    """What the action's text is."""

    COMMAND = "command"  # a shell command line
    KEYSTROKES = "keystrokes"  # raw keys with waits (terminal, Terminus form) as JSON
    TOOL_CALL = "tool_call"  # a JSON tool call {"name", "arguments"}
    GUI = "gui"  # a GUI action (BrowserGym call, tap/swipe) as text or JSON
    CODE = "code"  # free-form code (pyautogui for os)
    MESSAGE = "message"  # a message to the user
    EMPTY = "empty"  # a pause or narration with no effect on the environment


class ObservationFormat(StrEnum):
    """How to read the observation's text."""

    TEXT = "text"
    TERMINAL = "terminal"  # rendered terminal screen/scrollback, including the prompt
    JSON = "json"
    MARKDOWN = "markdown"
    AXTREE = "axtree"  # accessibility tree
    VIEW_HIERARCHY = "view_hierarchy"  # Android UI XML
    HTML = "html"
    DIFF = "diff"


# --------------------------------------------------------------------------------------------------
# The Arrow schema (source of truth)
# --------------------------------------------------------------------------------------------------


def _f(name: str, typ: pa.DataType, nullable: bool, doc: str, enum: type[StrEnum] | None = None) -> pa.Field:
    meta = {b"doc": doc.encode()}
    if enum is not None:
        meta[b"enum"] = ",".join(e.value for e in enum).encode()
    return pa.field(name, typ, nullable=nullable, metadata=meta)


TOOL_SPEC_TYPE = pa.struct(
    [
        _f("name", pa.string(), False, "Tool name as the agent calls it."),
        _f("description", pa.string(), True, "What the tool does."),
        _f("parameters", pa.string(), True, "JSON Schema of the tool's arguments, as a JSON string."),
    ]
)

ACTION_SPACE_TYPE = pa.struct(
    [
        _f("description", pa.string(), True, "The action space in words (the system prompt's section)."),
        _f("tools", pa.list_(pa.field("item", TOOL_SPEC_TYPE, nullable=False)), False, "Tool schemas."),
    ]
)

SOURCE_TYPE = pa.struct(
    [
        _f("kind", pa.string(), False, "infra | public | inhouse.", SourceKind),
        _f("name", pa.string(), False, "Source name, e.g. a collector run or a public dataset."),
        _f("uri", pa.string(), True, "Where the record came from (file path, URL, locator)."),
        _f("licence", pa.string(), True, "SPDX licence identifier of the source."),
        _f("collected_at", pa.timestamp("us", tz="UTC"), True, "When the trajectory was collected."),
        _f("agent", pa.string(), True, "The acting agent (policy / harness)."),
        _f("model", pa.string(), True, "The model behind the agent, if any."),
        _f("group", pa.string(), True, "Source group for pool assignment; defaults to the name."),
    ]
)

ACTION_TYPE = pa.struct(
    [
        _f("kind", pa.string(), False, "What the text is.", ActionKind),
        _f("text", pa.string(), False, "The action as text (or JSON)."),
        _f("tool_name", pa.string(), True, "For tool calls: the tool called."),
    ]
)

OBSERVATION_TYPE = pa.struct(
    [
        _f("text", pa.string(), False, "What the environment returned."),
        _f("format", pa.string(), False, "How to read the text.", ObservationFormat),
        _f("is_error", pa.bool_(), True, "The environment reported an error (tool isError, HTTP error)."),
    ]
)

TURN_TYPE = pa.struct(
    [
        _f("action", ACTION_TYPE, False, "What the agent did."),
        _f("observation", OBSERVATION_TYPE, False, "What the environment returned."),
        _f("started_at", pa.timestamp("us", tz="UTC"), True, "When the action was sent."),
        _f("duration_s", pa.float64(), True, "Seconds from action to complete observation."),
        _f("exit_code", pa.int32(), True, "Exit status, where the environment knows one."),
        _f("state_changed", pa.bool_(), True, "Whether the environment state changed (GUI no-change)."),
        _f("metadata", pa.string(), False, "Free metadata as a JSON object string."),
    ]
)

TRAJECTORY_SCHEMA = pa.schema(
    [
        _f("id", pa.string(), False, "Stable id: the same source record always gets the same id."),
        _f("schema_version", pa.string(), False, "Version of this schema the record was written with."),
        _f("domain", pa.string(), False, "Environment kind.", Domain),
        _f("source", SOURCE_TYPE, False, "Provenance."),
        _f("task", pa.string(), False, "System prompt part 1: the task description."),
        _f("action_space", ACTION_SPACE_TYPE, False, "System prompt part 2: the action space."),
        _f("initial_state", pa.string(), True, "System prompt part 3: packages, files, DB, UI screen."),
        _f("demonstrations", pa.string(), True, "System prompt part 4: demonstrations."),
        _f("simulation_instruction", pa.string(), True, "System prompt part 5: controllable conditions."),
        _f("turns", pa.list_(pa.field("item", TURN_TYPE, nullable=False)), False, "Ordered turns."),
        _f("status", pa.string(), False, "How the episode ended.", TrajectoryStatus),
        _f("status_reason", pa.string(), True, "Why, when the status is not complete."),
        _f("metadata", pa.string(), False, "Free metadata as a JSON object string."),
    ],
    metadata={SCHEMA_METADATA_KEY: SCHEMA_VERSION.encode()},
)


# --------------------------------------------------------------------------------------------------
# The typed model
# --------------------------------------------------------------------------------------------------


def _dump_json(obj: dict[str, Any]) -> str:
    """Canonical JSON for metadata columns: sorted keys, no ASCII escaping, compact."""
    if type(obj) is dict and all(type(k) is str and type(v) in _FLAT_JSON for k, v in obj.items()):
        # Most turn metadata: a flat object of strings. orjson writes exactly what json.dumps writes
        # for these (code-point key order, the same escapes; a property test compares), several times
        # faster; it refuses lone surrogates and integers beyond 64 bits, which json.dumps then writes.
        try:
            return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode()
        except orjson.JSONEncodeError:
            pass
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# Value types written identically by orjson and json.dumps (floats are not: 1e+16 against 1e16).
_FLAT_JSON = frozenset({str, int, bool, type(None)})


def _load_json_object(text: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not valid JSON ({exc.msg} at char {exc.pos})") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{where}: must be a JSON object, got {type(value).__name__}")
    return value


def _as_utc(value: datetime | str | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    # Arrow stores microseconds in UTC; normalise so the model compares equal after a round trip.
    return value.astimezone(UTC)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


@dataclass(slots=True)
class ToolSpec:
    """One tool the agent may call, with its JSON Schema parameters."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None

    def to_record(self) -> dict[str, Any]:
        params = None if self.parameters is None else _dump_json(self.parameters)
        return {"name": self.name, "description": self.description, "parameters": params}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> ToolSpec:
        params = rec.get("parameters")
        return cls(
            name=rec["name"],
            description=rec.get("description"),
            parameters=None if params is None else _load_json_object(params, "tool.parameters"),
        )

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ToolSpec:
        return cls(name=obj["name"], description=obj.get("description"), parameters=obj.get("parameters"))


@dataclass(slots=True)
class ActionSpace:
    """The action space: a description in words plus tool schemas where the domain has them."""

    description: str | None = None
    tools: list[ToolSpec] = field(default_factory=list)

    def tool_names(self) -> set[str]:
        return {t.name for t in self.tools}

    def to_record(self) -> dict[str, Any]:
        return {"description": self.description, "tools": [t.to_record() for t in self.tools]}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> ActionSpace:
        return cls(
            description=rec.get("description"),
            tools=[ToolSpec.from_record(t) for t in rec.get("tools") or []],
        )

    def to_json(self) -> dict[str, Any]:
        return {"description": self.description, "tools": [t.to_json() for t in self.tools]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ActionSpace:
        return cls(
            description=obj.get("description"),
            tools=[ToolSpec.from_json(t) for t in obj.get("tools") or []],
        )


@dataclass(slots=True)
class Source:
    """Provenance of a trajectory."""

    kind: SourceKind
    name: str
    uri: str | None = None
    licence: str | None = None
    collected_at: datetime | None = None
    agent: str | None = None
    model: str | None = None
    group: str | None = None

    def __post_init__(self) -> None:
        self.kind = SourceKind(self.kind)
        self.collected_at = _as_utc(self.collected_at)

    @property
    def source_group(self) -> str:
        """The group pools keep together: an explicit group, else the source name."""
        return self.group or self.name

    def to_record(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "name": self.name,
            "uri": self.uri,
            "licence": self.licence,
            "collected_at": self.collected_at,
            "agent": self.agent,
            "model": self.model,
            "group": self.group,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Source:
        return cls(
            kind=SourceKind(rec["kind"]),
            name=rec["name"],
            uri=rec.get("uri"),
            licence=rec.get("licence"),
            collected_at=rec.get("collected_at"),
            agent=rec.get("agent"),
            model=rec.get("model"),
            group=rec.get("group"),
        )

    def to_json(self) -> dict[str, Any]:
        rec = self.to_record()
        rec["collected_at"] = _iso(self.collected_at)
        return rec

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Source:
        return cls.from_record(obj)


@dataclass(slots=True)
class Action:
    """What the agent did in one turn."""

    kind: ActionKind
    text: str
    tool_name: str | None = None

    def __post_init__(self) -> None:
        self.kind = ActionKind(self.kind)

    def to_record(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "text": self.text, "tool_name": self.tool_name}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Action:
        return cls(kind=ActionKind(rec["kind"]), text=rec["text"], tool_name=rec.get("tool_name"))

    to_json = to_record
    from_json = from_record


@dataclass(slots=True)
class Observation:
    """What the environment returned in one turn."""

    text: str
    format: ObservationFormat = ObservationFormat.TEXT
    is_error: bool | None = None

    def __post_init__(self) -> None:
        self.format = ObservationFormat(self.format)

    def to_record(self) -> dict[str, Any]:
        return {"text": self.text, "format": self.format.value, "is_error": self.is_error}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Observation:
        return cls(text=rec["text"], format=ObservationFormat(rec["format"]), is_error=rec.get("is_error"))

    to_json = to_record
    from_json = from_record


@dataclass(slots=True)
class Turn:
    """One (action, observation) pair with its timing and environment facts."""

    action: Action
    observation: Observation
    started_at: datetime | None = None
    duration_s: float | None = None
    exit_code: int | None = None
    state_changed: bool | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.started_at = _as_utc(self.started_at)

    def to_record(self) -> dict[str, Any]:
        return {
            "action": self.action.to_record(),
            "observation": self.observation.to_record(),
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "exit_code": self.exit_code,
            "state_changed": self.state_changed,
            "metadata": _dump_json(self.metadata),
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Turn:
        return cls(
            action=Action.from_record(rec["action"]),
            observation=Observation.from_record(rec["observation"]),
            started_at=rec.get("started_at"),
            duration_s=rec.get("duration_s"),
            exit_code=rec.get("exit_code"),
            state_changed=rec.get("state_changed"),
            metadata=_load_json_object(rec.get("metadata") or "{}", "turn.metadata"),
        )

    def to_json(self) -> dict[str, Any]:
        rec = self.to_record()
        rec["started_at"] = _iso(self.started_at)
        rec["metadata"] = self.metadata
        return rec

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Turn:
        return cls(
            action=Action.from_json(obj["action"]),
            observation=Observation.from_json(obj["observation"]),
            started_at=obj.get("started_at"),
            duration_s=obj.get("duration_s"),
            exit_code=obj.get("exit_code"),
            state_changed=obj.get("state_changed"),
            metadata=dict(obj.get("metadata") or {}),
        )


@dataclass(slots=True)
class Trajectory:
    """System prompt (five parts) + ordered turns + provenance: one record of the unified schema."""

    id: str
    domain: Domain
    source: Source
    task: str
    action_space: ActionSpace = field(default_factory=ActionSpace)
    turns: list[Turn] = field(default_factory=list)
    initial_state: str | None = None
    demonstrations: str | None = None
    simulation_instruction: str | None = None
    status: TrajectoryStatus = TrajectoryStatus.COMPLETE
    status_reason: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    schema_version: str = SCHEMA_VERSION

    def __post_init__(self) -> None:
        self.domain = Domain(self.domain)
        self.status = TrajectoryStatus(self.status)

    # -- Arrow records ------------------------------------------------------------------------------
    def to_record(self) -> dict[str, Any]:
        """The row as pyarrow expects it under TRAJECTORY_SCHEMA."""
        return {
            "id": self.id,
            "schema_version": self.schema_version,
            "domain": self.domain.value,
            "source": self.source.to_record(),
            "task": self.task,
            "action_space": self.action_space.to_record(),
            "initial_state": self.initial_state,
            "demonstrations": self.demonstrations,
            "simulation_instruction": self.simulation_instruction,
            "turns": [t.to_record() for t in self.turns],
            "status": self.status.value,
            "status_reason": self.status_reason,
            "metadata": _dump_json(self.metadata),
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Trajectory:
        """Build the model from a row of TRAJECTORY_SCHEMA (as given by `Table.to_pylist()`)."""
        return cls(
            id=rec["id"],
            schema_version=rec["schema_version"],
            domain=Domain(rec["domain"]),
            source=Source.from_record(rec["source"]),
            task=rec["task"],
            action_space=ActionSpace.from_record(rec["action_space"]),
            initial_state=rec.get("initial_state"),
            demonstrations=rec.get("demonstrations"),
            simulation_instruction=rec.get("simulation_instruction"),
            turns=[Turn.from_record(t) for t in rec["turns"]],
            status=TrajectoryStatus(rec["status"]),
            status_reason=rec.get("status_reason"),
            metadata=_load_json_object(rec.get("metadata") or "{}", "metadata"),
        )

    # -- JSON (the `export jsonl` contract: the schema's field names, metadata as objects) ---------
    def to_json(self) -> dict[str, Any]:
        rec = self.to_record()
        rec["source"] = self.source.to_json()
        rec["action_space"] = self.action_space.to_json()
        rec["turns"] = [t.to_json() for t in self.turns]
        rec["metadata"] = self.metadata
        return rec

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Trajectory:
        return cls(
            id=obj["id"],
            schema_version=obj.get("schema_version", SCHEMA_VERSION),
            domain=Domain(obj["domain"]),
            source=Source.from_json(obj["source"]),
            task=obj["task"],
            action_space=ActionSpace.from_json(obj.get("action_space") or {}),
            initial_state=obj.get("initial_state"),
            demonstrations=obj.get("demonstrations"),
            simulation_instruction=obj.get("simulation_instruction"),
            turns=[Turn.from_json(t) for t in obj.get("turns") or []],
            status=TrajectoryStatus(obj.get("status", TrajectoryStatus.COMPLETE)),
            status_reason=obj.get("status_reason"),
            metadata=dict(obj.get("metadata") or {}),
        )

    def to_json_line(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, sort_keys=False)

    # -- conveniences ------------------------------------------------------------------------------
    @property
    def num_turns(self) -> int:
        return len(self.turns)

    def _repr_html_(self) -> str:
        return HTML_VIEW[0](self) if HTML_VIEW else f"<pre>{self!r}</pre>"


HTML_VIEW: list[Callable[[Trajectory], str]] = []
"""The notebook view of a trajectory: `schemas.view` puts its `trajectory_html` here when it is
imported (the `schemas` package imports it), so this module needs no import of the renderer."""


def to_table(trajectories: list[Trajectory]) -> pa.Table:
    """Trajectories as an Arrow table under the explicit schema (never inferred)."""
    return pa.Table.from_pylist([t.to_record() for t in trajectories], schema=TRAJECTORY_SCHEMA)


def from_table(table: pa.Table | pa.RecordBatch) -> list[Trajectory]:
    """Arrow rows back into models."""
    return [Trajectory.from_record(r) for r in table.to_pylist()]


def stable_id(*parts: str, prefix: str = "wl") -> str:
    """A stable trajectory id from the parts that identify a source record.

    Use the source name plus a locator inside it (file path and record index, task id, session id):
    the same source record then always gets the same id, across reruns and machines.
    """
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:24]
    return f"{prefix}-{digest}"


def utc_now() -> datetime:
    """Now, in UTC and truncated to the microseconds Arrow keeps."""
    return datetime.now(UTC)
