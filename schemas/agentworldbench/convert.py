"""AgentWorldBench samples <-> trajectories: turn text, the system prompt's parts, turn selection, export."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from schemas import mcp_observation, worldmodel
from schemas.agentworldbench.io import AtomicTextFile
from schemas.agentworldbench.sample import (
    FILE_SUFFIX,
    META_KEY,
    SOURCE_NAME,
    AgentWorldBenchSample,
    domain_name_of,
    domain_of,
)
from schemas.domains import GUI_DOMAINS, domain_spec
from schemas.trajectory import (
    Action,
    ActionKind,
    Domain,
    Observation,
    ObservationFormat,
    Source,
    SourceKind,
    Trajectory,
    TrajectoryStatus,
    Turn,
    stable_id,
)
from schemas.worldmodel import (
    SystemPromptParts,
    evaluator_messages,
    parse_action_prompt,
    parse_observation,
    render_action_prompt,
    render_observation,
)

PAPER_MIDDLE_TURNS = 3

TurnSelection = Literal["all", "paper", "source"]


def role_preamble(domain: Domain) -> str:
    """The fixed opening of an exported system prompt: what the domain's world model simulates."""
    spec = domain_spec(domain)
    return worldmodel.role_preamble(spec.label, spec.description)


# --------------------------------------------------------------------------------------------------
# Turn text: action prompts and observations
# --------------------------------------------------------------------------------------------------


def _infer_action(text: str, domain: Domain) -> Action:
    if not text.strip():
        return Action(ActionKind.EMPTY, text)
    kind = domain_spec(domain).action_kind
    tool_name = None
    if kind is ActionKind.TOOL_CALL:
        try:
            call = json.loads(text)
        except ValueError:
            call = None
        if isinstance(call, dict):
            name = call.get("name", call.get("tool"))
            tool_name = name if isinstance(name, str) else None
    return Action(kind, text, tool_name)


def _infer_observation(text: str, domain: Domain) -> Observation:
    head = text.lstrip()[:64]
    fmt = domain_spec(domain).observation_format
    is_error = None
    # Android screens and MCP results come in more than one form: the text says which.
    if domain is Domain.ANDROID and head.startswith("<"):
        is_xml = head.startswith("<?xml") or head.startswith("<hierarchy")
        fmt = ObservationFormat.VIEW_HIERARCHY if is_xml else ObservationFormat.HTML
    elif domain is Domain.MCP and head[:1] in ("{", "["):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict | list):
            fmt = ObservationFormat.JSON
            if isinstance(value, dict) and isinstance(value.get("isError"), bool):
                is_error = value["isError"]
    return Observation(text, fmt, is_error)


def _turn_from_texts(position: int, prompt: str, response: str, domain: Domain) -> Turn:
    """Turn `position` (1-based) from its prompt and response; non-canonical text is kept verbatim."""
    meta: dict[str, Any] = {}
    awb: dict[str, Any] = {}
    parsed = parse_action_prompt(prompt)
    if parsed is None:
        action_text = prompt
        awb["prompt"] = prompt
    else:
        action_text = parsed.action
        if parsed.current_state is not None:
            meta["current_state"] = parsed.current_state
        if render_action_prompt(position, parsed.action, domain, parsed.current_state) != prompt:
            awb["prompt"] = prompt
    observation = parse_observation(response)
    if observation is None:
        observation = response
        awb["response"] = response
    normalised = mcp_observation.normalise(observation) if domain is Domain.MCP else None
    if normalised is not None:
        # MCP results in another form (a whole result, other spacing) get the one MCP convention; the
        # source text stays beside it, so the export gives the sample back as it was.
        text, is_error, structured = normalised
        if text != observation:
            awb["response"] = response
        if structured is not None:
            meta[mcp_observation.STRUCTURED_CONTENT] = structured
    if awb:
        meta[META_KEY] = awb
    return Turn(
        action=_infer_action(action_text, domain),
        observation=(
            _infer_observation(observation, domain)
            if normalised is None
            else Observation(normalised[0], ObservationFormat.JSON, normalised[1])
        ),
        metadata=meta,
    )


SCREEN_SECTION = "## Screen\n"


def start_screen(initial_state: str | None) -> str | None:
    """The screen a GUI trajectory started on: the `## Screen` section its collector wrote last in the
    initial state (None when there is none)."""
    if not initial_state or SCREEN_SECTION not in initial_state:
        return None
    screen = initial_state.rsplit(SCREEN_SECTION, 1)[1].strip("\n")
    return screen or None


def _prompt_for(turn: Turn, position: int, domain: Domain, first_state: str | None = None) -> str:
    """The action prompt of a turn: its verbatim source text while that still agrees with the turn.
    `first_state` is the screen the first action was taken on, for domains whose first prompt shows it."""
    state = turn.metadata.get("current_state")
    state = state if isinstance(state, str) else None
    if state is None and position == 1 and first_state is not None and domain_spec(domain).first_prompt_state:
        state = first_state
    raw = (turn.metadata.get(META_KEY) or {}).get("prompt")
    if isinstance(raw, str):
        parsed = parse_action_prompt(raw)
        if parsed is None:
            if raw == turn.action.text and state is None:
                return raw
        elif (parsed.turn, parsed.action, parsed.current_state) == (position, turn.action.text, state):
            return raw
    return render_action_prompt(position, turn.action.text, domain, state)


def _response_for(turn: Turn) -> str:
    raw = (turn.metadata.get(META_KEY) or {}).get("response")
    if isinstance(raw, str):
        parsed = parse_observation(raw)
        source = raw if parsed is None else parsed
        if source == turn.observation.text:
            return raw
        normalised = mcp_observation.normalise(source)
        if normalised is not None and normalised[0] == turn.observation.text:
            return raw  # the same MCP result, as the sample wrote it
    return render_observation(turn.observation.text)


# --------------------------------------------------------------------------------------------------
# System prompt: the five parts
# --------------------------------------------------------------------------------------------------


def render_system_str(domain: Domain, parts: SystemPromptParts) -> str:
    """The system prompt an exported sample carries: the domain's preamble, the five parts, output requirements."""
    return worldmodel.render_system_str(role_preamble(domain), parts)


def parse_system_str(domain: Domain, text: str) -> SystemPromptParts | None:
    """The five parts of a system prompt in the export layout; None for any other system prompt."""
    return worldmodel.parse_system_str(role_preamble(domain), text)


def _system_str_for(traj: Trajectory) -> str:
    awb = traj.metadata.get(META_KEY) or {}
    plain = (
        not traj.action_space.description
        and not traj.action_space.tools
        and traj.initial_state is None
        and traj.demonstrations is None
        and traj.simulation_instruction is None
    )
    if awb.get("system_str_verbatim") and plain:
        return traj.task
    parts = SystemPromptParts(
        traj.task, traj.action_space, traj.initial_state, traj.demonstrations, traj.simulation_instruction
    )
    return render_system_str(traj.domain, parts)


# --------------------------------------------------------------------------------------------------
# Sample <-> trajectory
# --------------------------------------------------------------------------------------------------


def trajectory_id_for(domain: Domain, sample_id: int | str, variant: str | None = None) -> str:
    """The stable worldline id of an AgentWorldBench trajectory (domain + sample id [+ variant])."""
    parts = [SOURCE_NAME, domain.value, json.dumps(sample_id)]
    if variant:
        parts.append(variant)
    return stable_id(*parts, prefix="awb")


def sample_to_trajectory(
    sample: AgentWorldBenchSample,
    *,
    domain: Domain | None = None,
    source_uri: str | None = None,
    source_name: str = SOURCE_NAME,
    licence: str | None = None,
    turn_indices: Iterable[int] | None = None,
    list_lengths: dict[int, int] | None = None,
    current_prompts: dict[int, str] | None = None,
    variant: str | None = None,
) -> Trajectory:
    """One trajectory from a sample's lists (turn i = prompt[i-1] / response[i-1]).

    The keyword arguments carry what the importer learnt from the sample's turn variants: which
    `turn_idx` exist, each variant's list length and its `current_prompt` when it is not the prompt.
    Without them the sample stands alone.
    """
    dom = domain or domain_of(sample)
    turns = [
        _turn_from_texts(i + 1, p, r, dom)
        for i, (p, r) in enumerate(zip(sample.prompt, sample.response, strict=True))
    ]
    indices = sorted(set(turn_indices) if turn_indices is not None else {sample.turn_idx})
    lengths = dict(list_lengths) if list_lengths is not None else {sample.turn_idx: len(sample.prompt)}
    currents = dict(current_prompts) if current_prompts is not None else {}
    if current_prompts is None and sample.current_prompt != sample.prompt[sample.turn_idx - 1]:
        currents[sample.turn_idx] = sample.current_prompt
    for t, text in currents.items():
        turns[t - 1].metadata.setdefault(META_KEY, {})["current_prompt"] = text

    awb: dict[str, Any] = {"id": sample.id, "turn_indices": indices, "turns": len(turns)}
    if sample.task != dom.value:
        awb["task"] = sample.task
    non_full = {str(t): n for t, n in sorted(lengths.items()) if n != sample.total_turns}
    if non_full:
        awb["list_lengths"] = non_full
    if sample.total_turns != len(turns):
        awb["total_turns"] = sample.total_turns
    if sample.extra:
        awb["extra"] = sample.extra

    parts = parse_system_str(dom, sample.system_str)
    if parts is None:
        parts = SystemPromptParts(task=sample.system_str)
        awb["system_str_verbatim"] = True
    return Trajectory(
        id=trajectory_id_for(dom, sample.id, variant),
        domain=dom,
        source=Source(kind=SourceKind.PUBLIC, name=source_name, uri=source_uri, licence=licence),
        task=parts.task,
        action_space=parts.action_space,
        initial_state=parts.initial_state,
        demonstrations=parts.demonstrations,
        simulation_instruction=parts.simulation_instruction,
        turns=turns,
        status=TrajectoryStatus.COMPLETE if sample.total_turns == len(turns) else TrajectoryStatus.TRUNCATED,
        status_reason=None
        if sample.total_turns == len(turns)
        else f"the source holds {len(turns)} of {sample.total_turns} turns",
        metadata={META_KEY: awb},
    )


def select_turns_paper(num_turns: int, seed: int, key: str) -> list[int]:
    """The paper's evaluation turns (1-based): first, last and three uniformly drawn middle turns.

    The draw depends only on (seed, key, num_turns), so a trajectory gets the same turns whatever
    order trajectories are exported in. Trajectories of five turns or fewer keep every turn.
    """
    if num_turns <= PAPER_MIDDLE_TURNS + 2:
        return list(range(1, num_turns + 1))
    rng = random.Random(f"{seed}\x1f{key}\x1f{num_turns}")
    middle = rng.sample(range(2, num_turns), PAPER_MIDDLE_TURNS)
    return [1, *sorted(middle), num_turns]


def turns_for_export(traj: Trajectory, turns: TurnSelection = "all", seed: int = 0) -> list[int]:
    """Which turns of a trajectory become samples: all, the paper's selection, or the source's set.

    `paper` thins text domains only (GUI trajectories keep every turn); `source` reproduces the turn
    variants an imported trajectory came with (every turn for any other trajectory).
    """
    n = len(traj.turns)
    if turns == "all":
        return list(range(1, n + 1))
    if turns == "paper":
        return list(range(1, n + 1)) if traj.domain in GUI_DOMAINS else select_turns_paper(n, seed, traj.id)
    if turns == "source":
        recorded = (traj.metadata.get(META_KEY) or {}).get("turn_indices")
        if (
            isinstance(recorded, list)
            and recorded
            and all(isinstance(t, int) and 1 <= t <= n for t in recorded)
        ):
            return sorted(set(recorded))
        return list(range(1, n + 1))
    raise ValueError(f"turn selection {turns!r} is not one of all, paper, source")


def trajectory_to_samples(
    traj: Trajectory, turn_indices: Iterable[int] | None = None
) -> list[AgentWorldBenchSample]:
    """The AgentWorldBench samples of a trajectory: one per selected turn (default: every turn)."""
    n = len(traj.turns)
    if n == 0:
        return []
    indices = list(range(1, n + 1)) if turn_indices is None else sorted(set(turn_indices))
    bad = [t for t in indices if not 1 <= t <= n]
    if bad:
        raise ValueError(f"trajectory {traj.id}: turn index(es) {bad} outside 1..{n}")
    awb = traj.metadata.get(META_KEY) or {}
    # Totals and list lengths recorded at import hold only while the trajectory keeps those turns.
    as_imported = awb.get("turns") == n
    total = awb.get("total_turns", n) if as_imported else n
    total = total if isinstance(total, int) and total >= n else n
    lengths = awb.get("list_lengths") if as_imported else None
    lengths = lengths if isinstance(lengths, dict) else {}
    first_state = start_screen(traj.initial_state)
    prompts = [_prompt_for(t, i + 1, traj.domain, first_state) for i, t in enumerate(traj.turns)]
    responses = [_response_for(t) for t in traj.turns]
    sample_id = awb.get("id", traj.id)
    task = awb.get("task", traj.domain.value)
    if not isinstance(task, str) or domain_name_of(task) != traj.domain.value:
        task = traj.domain.value
    extra_field = awb.get("extra")
    extra: dict[str, Any] = extra_field if isinstance(extra_field, dict) else {}
    system_str = _system_str_for(traj)
    samples = []
    for t in indices:
        length = lengths.get(str(t), total)
        length = length if isinstance(length, int) and t <= length <= n else n
        current = (traj.turns[t - 1].metadata.get(META_KEY) or {}).get("current_prompt")
        samples.append(
            AgentWorldBenchSample(
                task=task,
                id=sample_id
                if isinstance(sample_id, int | str) and not isinstance(sample_id, bool)
                else traj.id,
                turn_idx=t,
                total_turns=total,
                system_str=system_str,
                prompt=prompts[:length],
                response=responses[:length],
                current_prompt=current if isinstance(current, str) else prompts[t - 1],
                extra=dict(extra),
            )
        )
    return samples


# --------------------------------------------------------------------------------------------------
# Export: trajectories -> one JSONL per domain
# --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class ExportReport:
    """What an export wrote: samples and trajectories per domain file."""

    files: dict[str, str] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)
    trajectories: dict[str, int] = field(default_factory=dict)
    skipped_empty: int = 0


def export_agentworldbench(
    trajectories: Iterable[Trajectory], out_dir: str | Path, *, turns: TurnSelection = "all", seed: int = 0
) -> ExportReport:
    """Stream trajectories into `<domain>_test.jsonl` files under out_dir (each published atomically)."""
    out = Path(out_dir)
    writers: dict[Domain, AtomicTextFile] = {}
    report = ExportReport()
    try:
        for traj in trajectories:
            if not traj.turns:
                report.skipped_empty += 1
                continue
            samples = trajectory_to_samples(traj, turns_for_export(traj, turns, seed))
            writer = writers.get(traj.domain)
            if writer is None:
                writer = writers[traj.domain] = AtomicTextFile(out / f"{traj.domain.value}{FILE_SUFFIX}")
            for sample in samples:
                writer.write_line(sample.to_json_line())
            d = traj.domain.value
            report.samples[d] = report.samples.get(d, 0) + len(samples)
            report.trajectories[d] = report.trajectories.get(d, 0) + 1
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    for dom, w in writers.items():
        w.commit()
        report.files[dom.value] = str(w.path)
    return report


def inference_messages(sample: AgentWorldBenchSample, system: str | None = None) -> list[dict[str, str]]:
    """The chat messages AgentWorldBench's evaluator sends the world model for `sample`.

    system (`system_str`, or `system` when given; omitted when empty), then one user / assistant pair
    per earlier turn (the action prompt, the ground-truth response with its marker), then the current
    turn's action prompt `prompt[turn_idx-1]` as the last user message.
    """
    system_text = sample.system_str if system is None else system
    t = sample.turn_idx - 1
    return evaluator_messages(
        system_text, zip(sample.prompt[:t], sample.response[:t], strict=False), sample.prompt[t]
    )
