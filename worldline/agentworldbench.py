"""AgentWorldBench samples <-> worldline trajectories: read, convert, select turns, write.

AgentWorldBench (the Qwen-AgentWorld evaluation set) ships one JSONL per domain, named
`<domain>_test.jsonl`. One line is one evaluation sample: the turn `turn_idx` (1-based) of a trajectory
with `total_turns` turns. Our reading of the format, matched against the reference evaluator:

- `system_str` is the world model's system prompt, carried by every sample of the trajectory.
- `prompt[i]` / `response[i]` are the action prompt and the ground-truth observation of turn i+1.
  The published data carries the whole trajectory in every sample (`len == total_turns`); derived sets
  carry only the turns up to the evaluated one (`len == turn_idx`). The evaluator reads history from
  `prompt[:turn_idx-1]` / `response[:turn_idx-1]` and the ground truth from `response[turn_idx-1]`,
  so both layouts are valid; we accept any length in `turn_idx..total_turns` and remember it.
- `current_prompt` is the action prompt of the evaluated turn: normally `prompt[turn_idx-1]`.
- `task` names the domain (`mcp`, or a path-like `group/mcp`: the last segment counts).
- An action prompt is `### Turn N`, optionally `**Current State:**` and the state, then `**Action:**`
  and a fenced block (JSON for tool calls and keystrokes). A response starts with
  `**Environment Observation:**`. World models answer in `<predicted_observation>` blocks.

Import. Samples with the same domain and `id` are turn variants of one trajectory and become ONE
trajectory: its turns come from the variant with the longest lists, and what differs per variant (the
set of `turn_idx` present, list lengths, a `current_prompt` that is not `prompt[turn_idx-1]`) is kept in
`metadata["agentworldbench"]`. A variant whose history contradicts the others (different system prompt,
turns or total) becomes its own trajectory with an id derived from its content, and is counted.
Import reads each file twice (index, then convert), so memory holds small per-id fingerprints, never
the samples. Text that does not follow the canonical layout is kept verbatim in metadata and used on
export while it still agrees with the turn's fields, so import -> export -> import is lossless for every
field the format has.

System prompt. Exports compose `system_str` from the five parts under fixed headings (`# Task
Description`, `# Action Space` with tools as a JSON block, `# Initial State`, `# Demonstrations`,
`# Simulation Instruction`) between a per-domain role preamble and the output requirements; import
splits a system prompt in exactly that layout back into the parts. Any other system prompt (such as
the published benchmark's) is kept whole as the task description, flagged verbatim. A part whose text
itself contains one of the heading lines cannot be split unambiguously; empty action-space descriptions
are read back as none.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from schemas import (
    GUI_DOMAINS,
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
    stable_id,
)
from worldline.redaction import DEFAULT_PII, redact_text_or_json
from worldline.redaction.records import redact_trajectory

META_KEY = "agentworldbench"
"""Key of the trajectory / turn metadata that carries what only the AgentWorldBench layout has."""

SOURCE_NAME = "agentworldbench"
RESPONSE_MARKER = "**Environment Observation:**"
ACTION_MARKER = "**Action:**"
STATE_MARKER = "**Current State:**"
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
PAPER_MIDDLE_TURNS = 3

TurnSelection = Literal["all", "paper", "source"]

DOMAIN_ACTION_KIND: dict[Domain, ActionKind] = {
    Domain.MCP: ActionKind.TOOL_CALL,
    Domain.SEARCH: ActionKind.TOOL_CALL,
    Domain.SWE: ActionKind.TOOL_CALL,
    Domain.TERMINAL: ActionKind.KEYSTROKES,
    Domain.WEB: ActionKind.GUI,
    Domain.ANDROID: ActionKind.GUI,
    Domain.OS: ActionKind.CODE,
}

DOMAIN_LABEL: dict[Domain, tuple[str, str]] = {
    Domain.MCP: ("Tool", "the results of tool calls against MCP servers"),
    Domain.SEARCH: ("Search", "a web search engine, a page extractor and a key-value memory"),
    Domain.TERMINAL: ("Terminal", "a Linux terminal driven by keystrokes, including its prompt"),
    Domain.SWE: ("Software Engineering", "a code repository: file reads, edits and command output"),
    Domain.ANDROID: ("Android", "an Android device screen after taps, swipes and typing"),
    Domain.WEB: ("Web", "a browser page as its accessibility tree after BrowserGym actions"),
    Domain.OS: ("Desktop", "a desktop as its accessibility tree after mouse and keyboard actions"),
}

SECTION_TASK = "# Task Description"
SECTION_ACTION_SPACE = "# Action Space"
OPTIONAL_SECTIONS = (
    ("initial_state", "# Initial State"),
    ("demonstrations", "# Demonstrations"),
    ("simulation_instruction", "# Simulation Instruction"),
)
OUTPUT_REQUIREMENTS = (
    "# Output Requirements\n\n"
    "Reason step by step about how the environment reacts to the action. Then write the complete next "
    "observation, in the same format as the observations above and with nothing else, inside one "
    "<predicted_observation></predicted_observation> block."
)


def role_preamble(domain: Domain) -> str:
    """The fixed opening of an exported system prompt: what the world model simulates."""
    label, what = DOMAIN_LABEL[domain]
    return (
        "# Role and Objective\n\n"
        f"You are a **{label} World Model**: you simulate {what}. Given the description below, the "
        "interaction history and the agent's current action, predict the exact next environment "
        "observation, consistent with everything the history has already shown."
    )


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# The sample
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# Reading and writing sample files
# --------------------------------------------------------------------------------------------------


def iter_sample_lines(path: str | Path) -> Iterator[tuple[int, AgentWorldBenchSample | SampleError]]:
    """Stream (line number, sample or the error that line has) from a sample file; blank lines skip."""
    p = Path(path)
    try:
        fh = open(p, "rb")
    except OSError as exc:
        raise SampleError(p, 0, "<file>", "unreadable_file", f"cannot open ({exc.strerror})") from exc
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield (
                    lineno,
                    SampleError(
                        p,
                        lineno,
                        "<line>",
                        "invalid_utf8",
                        f"byte {exc.start} is not valid UTF-8; re-encode the file",
                    ),
                )
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                yield (
                    lineno,
                    SampleError(
                        p,
                        lineno,
                        "<line>",
                        "invalid_json",
                        f"not valid JSON ({exc.msg} at column {exc.colno})",
                    ),
                )
                continue
            try:
                yield lineno, AgentWorldBenchSample.from_json(obj)
            except SampleFieldError as exc:
                yield lineno, SampleError(p, lineno, exc.field, exc.reason, str(exc))


def read_samples(path: str | Path) -> Iterator[AgentWorldBenchSample]:
    """Stream the samples of one JSONL file; the first bad line raises `SampleError` (file, line, field)."""
    for _, item in iter_sample_lines(path):
        if isinstance(item, SampleError):
            raise item
        yield item


class AtomicTextFile:
    """A text file that appears at its path only when closed without error (temp + rename)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        self.fh: IO[str] = open(self.tmp, "w", encoding="utf-8", newline="\n")
        self.lines = 0

    def write_line(self, line: str) -> None:
        self.fh.write(line)
        self.fh.write("\n")
        self.lines += 1

    def commit(self) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        self.fh.close()
        self.tmp.unlink(missing_ok=True)


def write_samples(path: str | Path, samples: Iterable[AgentWorldBenchSample]) -> int:
    """Write samples as JSONL, atomically; returns how many were written."""
    out = AtomicTextFile(Path(path))
    try:
        for sample in samples:
            out.write_line(sample.to_json_line())
    except BaseException:
        out.abort()
        raise
    out.commit()
    return out.lines


def domain_of(sample: AgentWorldBenchSample, path: str | Path | None = None) -> Domain:
    """The sample's domain: its `task` field, else the file name (`terminal_test.jsonl`)."""
    try:
        return Domain(sample.domain_name)
    except ValueError:
        pass
    if path is not None:
        stem = Path(path).name.split(".")[0].split("_")[0]
        if stem in Domain._value2member_map_:
            return Domain(stem)
    known = ", ".join(d.value for d in Domain)
    raise SampleFieldError("task", "unknown_domain", f"{sample.task!r} is not a domain ({known})")


# --------------------------------------------------------------------------------------------------
# Turn text: action prompts and observations
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActionPrompt:
    """The parts of one canonical action prompt."""

    turn: int
    action: str
    current_state: str | None
    fence_language: str


_PROMPT_RE = re.compile(
    r"### Turn (?P<turn>[1-9][0-9]*)\n"
    r"(?:\*\*Current State:\*\*\n(?P<state>.*?)\n\n)?"
    r"\*\*Action:\*\*\n(?P<fence>`{3,})(?P<lang>[^`\n]*)\n(?P<action>.*)\n(?P=fence)",
    re.DOTALL,
)


def fence_language(action: str, domain: Domain) -> str:
    """The info string of the action block: json when the action is JSON, else the domain's language."""
    try:
        json.loads(action)
    except ValueError:
        return "python" if domain is Domain.OS else "text"
    return "json"


def _fence_for(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def render_action_prompt(turn: int, action: str, domain: Domain, current_state: str | None = None) -> str:
    """`### Turn N`, the optional current state, and the action in a fenced block."""
    fence = _fence_for(action)
    state = "" if current_state is None else f"{STATE_MARKER}\n{current_state}\n\n"
    return (
        f"### Turn {turn}\n{state}{ACTION_MARKER}\n{fence}{fence_language(action, domain)}\n{action}\n{fence}"
    )


def parse_action_prompt(text: str) -> ActionPrompt | None:
    """Split an action prompt into turn number, state and action; None when it has another layout."""
    m = _PROMPT_RE.fullmatch(text)
    if m is None:
        return None
    return ActionPrompt(int(m["turn"]), m["action"], m["state"], m["lang"])


def render_observation(text: str) -> str:
    return f"{RESPONSE_MARKER}\n{text}"


def parse_observation(text: str) -> str | None:
    """The observation inside a ground-truth response; None when the marker line is missing."""
    head = RESPONSE_MARKER + "\n"
    return text[len(head) :] if text.startswith(head) else None


def _infer_action(text: str, domain: Domain) -> Action:
    if not text.strip():
        return Action(ActionKind.EMPTY, text)
    kind = DOMAIN_ACTION_KIND[domain]
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
    fmt = ObservationFormat.TEXT
    is_error = None
    if domain is Domain.TERMINAL:
        fmt = ObservationFormat.TERMINAL
    elif domain in (Domain.WEB, Domain.OS):
        fmt = ObservationFormat.AXTREE
    elif domain is Domain.ANDROID and head.startswith("<"):
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
    if awb:
        meta[META_KEY] = awb
    return Turn(
        action=_infer_action(action_text, domain),
        observation=_infer_observation(observation, domain),
        metadata=meta,
    )


def _prompt_for(turn: Turn, position: int, domain: Domain) -> str:
    """The action prompt of a turn: its verbatim source text while that still agrees with the turn."""
    state = turn.metadata.get("current_state")
    state = state if isinstance(state, str) else None
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
        if (raw if parsed is None else parsed) == turn.observation.text:
            return raw
    return render_observation(turn.observation.text)


# --------------------------------------------------------------------------------------------------
# System prompt: the five parts
# --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class SystemPromptParts:
    """The five parts of the unified system prompt."""

    task: str
    action_space: ActionSpace = field(default_factory=ActionSpace)
    initial_state: str | None = None
    demonstrations: str | None = None
    simulation_instruction: str | None = None


def _render_action_space(space: ActionSpace) -> str:
    parts = [space.description] if space.description else []
    if space.tools:
        tools = json.dumps([t.to_json() for t in space.tools], indent=2, ensure_ascii=False, sort_keys=True)
        parts.append(f"```json\n{tools}\n```")
    return "\n\n".join(parts)


def _parse_action_space(text: str) -> ActionSpace:
    if text.endswith("\n```"):
        start = text.rfind("```json\n")
        if start == 0 or (start > 0 and text[:start].endswith("\n\n")):
            try:
                tools = json.loads(text[start + len("```json\n") : -len("\n```")])
                space = ActionSpace(
                    description=text[: start - 2] if start else None,
                    tools=[ToolSpec.from_json(t) for t in tools],
                )
            except (ValueError, TypeError, KeyError, AttributeError):
                pass
            else:
                if _render_action_space(space) == text:
                    return space
    return ActionSpace(description=text or None)


def render_system_str(domain: Domain, parts: SystemPromptParts) -> str:
    """The system prompt an exported sample carries: preamble, the five parts, output requirements."""
    sections = [
        role_preamble(domain),
        f"{SECTION_TASK}\n\n{parts.task}",
        f"{SECTION_ACTION_SPACE}\n\n{_render_action_space(parts.action_space)}",
    ]
    for attr, heading in OPTIONAL_SECTIONS:
        value = getattr(parts, attr)
        if value is not None:
            sections.append(f"{heading}\n\n{value}")
    sections.append(OUTPUT_REQUIREMENTS)
    return "\n\n".join(sections)


def parse_system_str(domain: Domain, text: str) -> SystemPromptParts | None:
    """The five parts of a system prompt in the export layout; None for any other system prompt."""
    head = f"{role_preamble(domain)}\n\n{SECTION_TASK}\n\n"
    tail = f"\n\n{OUTPUT_REQUIREMENTS}"
    if not (text.startswith(head) and text.endswith(tail)) or len(text) < len(head) + len(tail):
        return None
    body = text[len(head) : len(text) - len(tail)]
    optional: dict[str, str] = {}
    # Split from the end, each heading at its last occurrence: parts are searched in reverse order.
    for attr, heading in reversed(OPTIONAL_SECTIONS):
        cut = body.rfind(f"\n\n{heading}\n\n")
        if cut >= 0:
            optional[attr] = body[cut + len(heading) + 4 :]
            body = body[:cut]
    cut = body.rfind(f"\n\n{SECTION_ACTION_SPACE}\n\n")
    if cut < 0:
        return None
    parts = SystemPromptParts(
        task=body[:cut],
        action_space=_parse_action_space(body[cut + len(SECTION_ACTION_SPACE) + 4 :]),
        **optional,
    )
    return parts if render_system_str(domain, parts) == text else None


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
    prompts = [_prompt_for(t, i + 1, traj.domain) for i, t in enumerate(traj.turns)]
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


def domain_name_of(task: str) -> str:
    """The domain a `task` field names: its last path segment (`group/mcp` names mcp)."""
    return task.rsplit("/", 1)[-1]


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


# --------------------------------------------------------------------------------------------------
# Import: sample files -> trajectory shards
# --------------------------------------------------------------------------------------------------


def _turn_hashes(sample: AgentWorldBenchSample) -> list[bytes]:
    return [
        hashlib.blake2b(f"{p}\x00{r}".encode("utf-8", "surrogatepass"), digest_size=12).digest()
        for p, r in zip(sample.prompt, sample.response, strict=True)
    ]


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).digest()


@dataclass(slots=True)
class _Group:
    """What the index remembers of one trajectory's turn variants (fingerprints, never the texts)."""

    domain: Domain
    sample_id: int | str
    variant: str | None
    best: tuple[int, int]  # (file number, line number) of the variant with the longest lists
    hashes: list[bytes]
    system: bytes
    total_turns: int
    turn_indices: set[int] = field(default_factory=set)
    list_lengths: dict[int, int] = field(default_factory=dict)
    current_prompts: dict[int, str] = field(default_factory=dict)
    samples: int = 0

    def compatible(self, sample: AgentWorldBenchSample, hashes: list[bytes], system: bytes) -> bool:
        """Same system prompt, same length, and one history is a prefix of the other."""
        n = min(len(hashes), len(self.hashes))
        return (
            system == self.system and sample.total_turns == self.total_turns and hashes[:n] == self.hashes[:n]
        )

    def add(self, loc: tuple[int, int], sample: AgentWorldBenchSample, hashes: list[bytes]) -> None:
        if len(hashes) > len(self.hashes):
            self.best, self.hashes = loc, hashes
        self.turn_indices.add(sample.turn_idx)
        self.list_lengths[sample.turn_idx] = len(sample.prompt)
        if sample.current_prompt != sample.prompt[sample.turn_idx - 1]:
            self.current_prompts[sample.turn_idx] = sample.current_prompt
        self.samples += 1


@dataclass(slots=True)
class ImportReport:
    """Counts that reconcile: samples_read = samples_imported + samples_quarantined + samples_already_present."""

    files: list[str] = field(default_factory=list)
    samples_read: int = 0
    samples_imported: int = 0
    samples_already_present: int = 0
    trajectories_written: int = 0
    conflicting_variants: int = 0
    quarantined: dict[str, int] = field(default_factory=dict)
    quarantine_file: str | None = None
    redactions: dict[str, int] = field(default_factory=dict)  # secrets and PII redacted, per class

    @property
    def samples_quarantined(self) -> int:
        return sum(self.quarantined.values())

    def reconciles(self) -> bool:
        return (
            self.samples_read
            == self.samples_imported + self.samples_quarantined + self.samples_already_present
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "samples_read": self.samples_read,
            "samples_imported": self.samples_imported,
            "samples_quarantined": self.samples_quarantined,
            "samples_already_present": self.samples_already_present,
            "trajectories_written": self.trajectories_written,
            "conflicting_variants": self.conflicting_variants,
            "quarantined": self.quarantined,
            "quarantine_file": self.quarantine_file,
            "redactions": self.redactions,
        }


def _existing_ids(out_dir: Path) -> set[str]:
    from schemas.shards import open_dataset, read_manifest

    manifest = read_manifest(out_dir)
    if manifest is None or manifest.rows == 0:
        return set()
    return set(open_dataset(out_dir).select("id").collect()["id"].to_list())


def import_agentworldbench(
    paths: Iterable[str | Path],
    out_dir: str | Path,
    *,
    source_name: str = SOURCE_NAME,
    licence: str | None = None,
    pii: frozenset[str] = DEFAULT_PII,
) -> ImportReport:
    """Import sample files into a trajectory dataset; bad lines go to `out_dir/quarantine/`.

    Every trajectory is redacted before it is written (secrets always, the personal-data classes in
    PII), and so is every quarantined line.

    Turn variants of one trajectory (same domain and id) become one trajectory; trajectories already
    in out_dir (same stable id) are not written again, so re-running an import adds nothing.
    """
    from schemas.shards import ShardWriter

    files = [Path(p) for p in paths]
    out = Path(out_dir)
    report = ImportReport(files=[str(f) for f in files])
    groups: dict[tuple[Any, ...], _Group] = {}
    quarantine: AtomicTextFile | None = None
    redactions: Counter[str] = Counter()

    def reject(error: SampleError) -> None:
        nonlocal quarantine
        if quarantine is None:
            quarantine = AtomicTextFile(out / "quarantine" / "agentworldbench.jsonl")
        # An error quotes the sample it rejects: redacted like the trajectories.
        quarantine.write_line(
            redact_text_or_json(json.dumps(error.to_json(), ensure_ascii=False), redactions, pii)
        )
        report.quarantined[error.reason] = report.quarantined.get(error.reason, 0) + 1

    # Pass 1: validate every line and index the turn variants by fingerprint.
    try:
        for fno, path in enumerate(files):
            for lineno, item in iter_sample_lines(path):
                report.samples_read += 1
                if isinstance(item, SampleError):
                    reject(item)
                    continue
                try:
                    dom = domain_of(item, path)
                except SampleFieldError as exc:
                    reject(SampleError(path, lineno, exc.field, exc.reason, str(exc)))
                    continue
                hashes, system = _turn_hashes(item), _digest(item.system_str)
                key: tuple[Any, ...] = (dom, json.dumps(item.id))
                group = groups.get(key)
                if group is not None and not group.compatible(item, hashes, system):
                    # Same id, contradicting history: its own trajectory, keyed by its content.
                    fingerprint = hashlib.blake2b(system + b"".join(hashes), digest_size=8).hexdigest()
                    report.conflicting_variants += 1
                    key = (dom, json.dumps(item.id), fingerprint)
                    group = groups.get(key)
                if group is not None and item.turn_idx in group.turn_indices:
                    reject(
                        SampleError(
                            path,
                            lineno,
                            "turn_idx",
                            "duplicate_sample",
                            f"turn {item.turn_idx} of id {item.id!r} appeared before; keep one copy",
                        )
                    )
                    continue
                if group is None:
                    variant = key[2] if len(key) > 2 else None
                    group = groups[key] = _Group(
                        dom, item.id, variant, (fno, lineno), hashes, system, item.total_turns
                    )
                group.add((fno, lineno), item, hashes)

        present = _existing_ids(out)
        chosen: dict[tuple[int, int], _Group] = {}
        for group in groups.values():
            if trajectory_id_for(group.domain, group.sample_id, group.variant) in present:
                report.samples_already_present += group.samples
            else:
                chosen[group.best] = group
                report.samples_imported += group.samples

        # Pass 2: convert the longest variant of each trajectory, in file order.
        with ShardWriter(out) as writer:
            for fno, path in enumerate(files):
                if not any(loc[0] == fno for loc in chosen):
                    continue
                for lineno, item in iter_sample_lines(path):
                    group = chosen.get((fno, lineno))
                    if group is None or isinstance(item, SampleError):
                        continue
                    trajectory = sample_to_trajectory(
                        item,
                        domain=group.domain,
                        source_uri=str(path),
                        source_name=source_name,
                        licence=licence,
                        turn_indices=group.turn_indices,
                        list_lengths=group.list_lengths,
                        current_prompts=group.current_prompts,
                        variant=group.variant,
                    )
                    # Public samples carry what their authors' sessions showed: redacted on the way in.
                    writer.write(redact_trajectory(trajectory, redactions, pii))
                    report.trajectories_written += 1
    except BaseException:
        if quarantine is not None:
            quarantine.abort()
        raise
    if quarantine is not None:
        quarantine.commit()
        report.quarantine_file = str(quarantine.path)
    report.redactions = dict(redactions)
    return report


def inference_messages(sample: AgentWorldBenchSample, system: str | None = None) -> list[dict[str, str]]:
    """The chat messages AgentWorldBench's evaluator sends the world model for `sample`.

    system (`system_str`, or `system` when given; omitted when empty), then one user / assistant pair
    per earlier turn (the action prompt, the ground-truth response with its marker), then the current
    turn's action prompt `prompt[turn_idx-1]` as the last user message.
    """
    system_text = sample.system_str if system is None else system
    t = sample.turn_idx - 1
    messages: list[dict[str, str]] = [{"role": "system", "content": system_text}] if system_text else []
    for prompt, response in zip(sample.prompt[:t], sample.response[:t], strict=False):
        messages.append({"role": "user", "content": prompt})
        messages.append({"role": "assistant", "content": response})
    messages.append({"role": "user", "content": sample.prompt[t]})
    return messages
