"""Align: map a parsed, segmented record onto the unified trajectory schema.

Domain, action kinds, tool calls as JSON, the action space (declared tools, plus the tools actually
used when the source declares none) and provenance. When the domain can only be guessed, the record
is marked `align_unsure` and the LLM aligner decides if an endpoint is configured.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from curation_agents.formats import TERMINAL_FORMATS, Format
from curation_agents.formats.common import source_time
from curation_agents.model import CleanConfig, ParsedRecord, RawTurn, RecordRef, StageFailure
from schemas import (
    Action,
    ActionKind,
    ActionSpace,
    Domain,
    Observation,
    ObservationFormat,
    Source,
    SourceKind,
    ToolSpec,
    Trajectory,
    TrajectoryStatus,
    Turn,
    domain_spec,
    registered_domains,
    stable_id,
)
from schemas.domains import CONTROL_TOOLS, tool_base_name
from schemas.reasons import ReasonCode


def infer_domain(parsed: ParsedRecord, turns: list[RawTurn]) -> tuple[Domain, bool]:
    """(domain, unsure). Sources that name their domain are trusted; otherwise the registered domains'
    signals decide (schemas/domains.py `DomainSignals`), in the order documented there."""
    if parsed.get("format") in TERMINAL_FORMATS:
        return Domain.TERMINAL, False
    if parsed.get("domain"):
        return Domain(str(parsed["domain"])), False
    calls = Counter(tool_base_name(str(t["tool_name"])) for t in turns if t.get("tool_name"))
    used = set(calls)
    kinds = {t.get("action_kind") for t in turns}
    specs = registered_domains()
    # What the tools do: the domain that claims the most calls (registry order breaks ties).
    claimed = [
        (sum(n for tool, n in calls.items() if spec.signals.claims(tool)), -i, spec)
        for i, spec in enumerate(specs)
    ]
    best = max(claimed, key=lambda c: c[:2], default=None)
    if best is not None and best[0] > 0:
        return best[2].domain, False
    acting = used - CONTROL_TOOLS
    for spec in specs:
        if acting and spec.signals.only_tools and acting <= spec.signals.only_tools:
            return spec.domain, False
    for spec in specs:
        if spec.signals.action_kind is not None and spec.signals.action_kind in kinds:
            return spec.domain, False
    generic = next(spec.domain for spec in specs if spec.signals.generic_tools)
    if used:
        return generic, True  # tool calls nothing claims: most likely that domain's, but a guess
    for spec in specs:
        if spec.signals.likely_action_kind is not None and spec.signals.likely_action_kind in kinds:
            return spec.domain, True
    return generic, True


def action_space_for(domain: Domain, parsed: ParsedRecord, turns: list[RawTurn]) -> ActionSpace:
    declared = [ToolSpec.from_json(t) for t in parsed.get("tools", []) if isinstance(t.get("name"), str)]
    fixed = domain_spec(domain).action_description
    if fixed is not None:
        return ActionSpace(description=fixed, tools=[])
    if declared:
        return ActionSpace(description=None, tools=declared)
    used: list[str] = []
    for t in turns:
        name = t.get("tool_name")
        if name and name not in used:
            used.append(name)
    return ActionSpace(
        description="Inferred from the tools this trajectory used.", tools=[ToolSpec(n) for n in used]
    )


def check_tools(domain: Domain, space: ActionSpace, turns: list[RawTurn], declared: bool) -> None:
    """Paper rule: MCP/SWE trajectories that call tools absent from their declared action space are dropped."""
    if not domain_spec(domain).per_trajectory_tools or not declared:
        return
    names = space.tool_names()
    for index, t in enumerate(turns):
        name = t.get("tool_name")
        if t.get("action_kind") == "tool_call" and name and name not in names:
            raise StageFailure(
                ReasonCode.UNKNOWN_TOOL,
                f"turn {index + 1} calls {name!r}, which is not in the declared tools ({', '.join(sorted(names))})",
            )


# Parts of the system prompt a parser found in the source (ParsedRecord metadata): they go to the
# trajectory's own fields, not to its metadata.
_SYSTEM_PROMPT_PARTS = frozenset({"initial_state", "demonstrations", "simulation_instruction"})

# Enum members by value: a dict lookup per turn instead of an Enum call (several times slower).
_ACTION_KINDS = {kind.value: kind for kind in ActionKind}
_OBSERVATION_FORMATS = {fmt.value: fmt for fmt in ObservationFormat}


def _turn(raw: RawTurn) -> Turn:
    kind = raw.get("action_kind") or "command"
    observation_format = raw.get("observation_format") or "text"
    return Turn(
        action=Action(
            kind=_ACTION_KINDS[kind] if type(kind) is str and kind in _ACTION_KINDS else ActionKind(kind),
            text=raw.get("action", ""),
            tool_name=raw.get("tool_name"),
        ),
        observation=Observation(
            text=raw.get("observation", ""),
            format=_OBSERVATION_FORMATS[observation_format]
            if type(observation_format) is str and observation_format in _OBSERVATION_FORMATS
            else ObservationFormat(observation_format),
            is_error=raw.get("is_error"),
        ),
        started_at=source_time(raw.get("started_at")),
        duration_s=raw.get("duration_s"),
        exit_code=raw.get("exit_code"),
        state_changed=raw.get("metadata", {}).get("state_changed"),
        metadata={k: v for k, v in raw.get("metadata", {}).items() if k != "state_changed"},
    )


def align_episode(
    parsed: ParsedRecord,
    turns: list[RawTurn],
    episode: int,
    episodes: int,
    record: RecordRef,
    config: CleanConfig,
    redactions: int,
    domain_override: str | None = None,
) -> Trajectory:
    """One episode as a Trajectory with a stable id and full provenance."""
    domain, unsure = infer_domain(parsed, turns)
    if domain_override:
        domain, unsure = Domain(domain_override), False
    space = action_space_for(domain, parsed, turns)
    check_tools(domain, space, turns, declared=bool(parsed.get("tools")))
    fmt = str(parsed.get("format") or record["format"])
    meta: dict[str, Any] = {
        "format": fmt,
        "episode": episode,
        "episodes": episodes,
        "redactions": redactions,
        **({"align_unsure": True} if unsure else {}),
        **{
            k: v
            for k, v in parsed.get("metadata", {}).items()
            if k not in _SYSTEM_PROMPT_PARTS and v not in (None, "")
        },
    }
    if parsed.get("system_prompt"):
        meta["source_system_prompt"] = parsed["system_prompt"]
    status = TrajectoryStatus(parsed.get("status") or "complete")
    if episode < episodes - 1:
        status = TrajectoryStatus.TRUNCATED  # a session split into episodes continues in the next one
    return Trajectory(
        id=stable_id(config.source_name, record["dataset_path"], record["locator"], f"episode-{episode}"),
        domain=domain,
        source=Source(
            kind=SourceKind(config.source_kind),
            name=config.source_name,
            uri=record["key"],
            licence=config.licence,
            collected_at=source_time(parsed.get("collected_at")),
            agent=parsed.get("agent"),
            model=parsed.get("model"),
        ),
        task=parsed.get("task") or "",
        action_space=space,
        turns=[_turn(t) for t in turns],
        initial_state=parsed.get("metadata", {}).get("initial_state") or None,
        demonstrations=parsed.get("metadata", {}).get("demonstrations") or None,
        simulation_instruction=parsed.get("metadata", {}).get("simulation_instruction") or None,
        status=status,
        status_reason=parsed.get("status_reason") if status != TrajectoryStatus.COMPLETE else None,
        metadata=meta,
    )


def is_single_observation(fmt: str) -> bool:
    return fmt == Format.UIAUTOMATOR_DUMP
