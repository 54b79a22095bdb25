"""The cleaner's vocabulary: stages, limits (reason codes: `schemas.reasons`), and the typed state each graph node reads and writes.

State values are plain dicts, lists and strings, except the typed `Trajectory` objects align hands to
score (no JSON round trip between them); checkpoints persist those through CHECKPOINT_TYPES.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypedDict

from schemas import trajectory as _trajectory
from schemas.reasons import ReasonCode
from schemas.trajectory import Trajectory


class Stage(StrEnum):
    """The cleaner's agents, in graph order."""

    INGEST = "ingest"
    DENOISE = "denoise"
    SEGMENT = "segment"
    ALIGN = "align"
    SCORE = "score"


class StageFailure(Exception):
    """A record cannot pass a stage; the graph routes it to quarantine with this reason."""

    def __init__(self, reason: ReasonCode, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Limits:
    """Bounds that keep ingest safe on hostile or broken input."""

    max_record_bytes: int = 64 * 1024 * 1024  # one record (a session, a .traj, one JSONL line)
    max_json_depth: int = 200  # nesting beyond this is quarantined as too_deep
    max_events: int = 2_000_000  # terminal events in one recording
    max_turns: int = 20_000  # turns in one record before segmentation
    # A gzip file may expand to at most this many times its size (or max_record_bytes, if larger);
    # beyond that it is a compression bomb and the rest of the file is quarantined.
    max_gzip_expansion: int = 200


@dataclass(frozen=True)
class CleanConfig:
    """Everything a clean run needs besides its inputs; the graph nodes read it."""

    source_kind: str = "public"
    source_name: str = "public-traces"
    licence: str | None = None
    accept_threshold: float = 0.5
    # Scores within this distance of the threshold are "unsure": the LLM scorer decides when configured.
    unsure_band: float = 0.15
    max_episode_turns: int = 200  # long sessions are split into episodes of at most this many turns
    episode_gap_s: float = 1800.0  # idle time that starts a new episode in a terminal recording
    min_turns: int = 2
    limits: Limits = field(default_factory=Limits)
    use_llm: bool = False
    # Personal-data classes redacted besides secrets (redact.PII_CLASSES: email, card, iban, phone, ip).
    pii: tuple[str, ...] = ("email", "card", "iban", "phone")


class RawTurn(TypedDict, total=False):
    """One (action, observation) pair as a format parser sees it, before alignment."""

    action: str
    action_kind: str  # an ActionKind value
    tool_name: str | None
    observation: str
    observation_format: str  # an ObservationFormat value
    is_error: bool | None
    exit_code: int | None
    started_at: str | None  # ISO 8601
    duration_s: float | None
    metadata: dict[str, Any]


class ParsedRecord(TypedDict, total=False):
    """What ingest produced: a format-neutral session, or terminal events awaiting segmentation."""

    format: str
    domain: str | None  # a Domain value when the format says so
    task: str
    system_prompt: str | None
    tools: list[dict[str, Any]]  # ToolSpec.to_json() dicts declared by the source
    agent: str | None
    model: str | None
    collected_at: str | None
    status: str  # a TrajectoryStatus value
    status_reason: str | None
    turns: list[RawTurn]
    # Terminal recordings: [seconds, code, data] events (code o / i / r / m) plus screen size.
    events: list[list[Any]]
    transcript: list[list[Any]]  # denoise: rendered terminal transcript (see denoise.TranscriptItem)
    width: int
    height: int
    metadata: dict[str, Any]


class RecordRef(TypedDict):
    """Where a record came from; `key` is unique per record and names it in outputs and checkpoints."""

    key: str  # "<dataset path>#<locator>"
    source_path: str  # the file as found on disk
    dataset_path: str  # the path relative to the input root: stable across machines
    locator: str  # where inside the file (record index, line number)
    format: str


class QuarantineEntry(TypedDict):
    """One quarantined record or episode."""

    stage: str
    reason: str
    detail: str
    episode: int | None


# The schema's classes a checkpoint of the state may hold (LangGraph's msgpack serde allow-list).
CHECKPOINT_TYPES: tuple[tuple[str, str], ...] = tuple(
    (_trajectory.__name__, name)
    for name in (
        "Trajectory",
        "Turn",
        "Action",
        "Observation",
        "Source",
        "ActionSpace",
        "ToolSpec",
        "Domain",
        "SourceKind",
        "TrajectoryStatus",
        "ActionKind",
        "ObservationFormat",
    )
)


def as_trajectory(value: Trajectory | dict[str, Any]) -> Trajectory:
    """A trajectory from the state; checkpoints written by earlier versions hold its JSON form."""
    return value if isinstance(value, Trajectory) else Trajectory.from_json(value)


class CleanState(TypedDict, total=False):
    """The graph's state. ingest writes `parsed`; denoise rewrites it; segment writes `episodes`;
    align writes `trajectories`; score writes `accepted` and `quarantine`."""

    record: RecordRef
    payload: Any  # the raw record: decoded JSON, a text body, or terminal events
    payload_redacted: bool  # the cleaning run already redacted a decoded payload (before checkpointing it)
    parsed: ParsedRecord
    redactions: int
    redaction_kinds: dict[str, int]
    preflight: dict[str, str] | None  # a failure the reader already found (ingest reports it)
    episodes: list[list[RawTurn]]
    trajectories: list[Trajectory]  # one per episode, typed (checkpoints store them: CHECKPOINT_TYPES)
    accepted: list[Trajectory]
    quarantine: list[QuarantineEntry]
    failed: bool
    notes: list[str]
