"""The world-model conversation format: the one definition pools, the judge, rewards, autoresearch and
the AgentWorldBench import/export share, so a model is trained on exactly what it is evaluated on.

A world model is asked, as AgentWorldBench's evaluator asks it:

- system: `system_str`, a role preamble, the five parts of the task under fixed headings (`# Task
  Description`, `# Action Space`, `# Initial State`, `# Demonstrations`, `# Simulation Instruction`)
  and the output requirements;
- then per earlier turn one user message (the action prompt: `### Turn N`, optionally
  `**Current State:**` and the state, then `**Action:**` and the action in a fenced block) and one
  assistant message (`**Environment Observation:**` and the real observation);
- then the current turn's action prompt as the last user message.

It answers with optional reasoning in `<think>` and the next observation in one
`<predicted_observation>` block, which a judge scores on five dimensions (1..5 each).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from schemas.domains import domain_spec
from schemas.trajectory import ActionSpace, Domain, ToolSpec

# --------------------------------------------------------------------------------------------------
# Markers and tags
# --------------------------------------------------------------------------------------------------

STATE_MARKER = "**Current State:**"
ACTION_MARKER = "**Action:**"
OBSERVATION_MARKER = "**Environment Observation:**"
"""The line a ground-truth response (an assistant history message) starts with."""

PREDICTION_OPEN = "<predicted_observation>"
PREDICTION_CLOSE = "</predicted_observation>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

SCORING_DIMENSIONS = ("format", "factuality", "consistency", "realism", "quality")
"""The judge's five dimensions, each scored 1..5, in the order the judge is asked for them."""
SCORING_DIMENSIONS_TEXT = ", ".join(SCORING_DIMENSIONS[:-1]) + " and " + SCORING_DIMENSIONS[-1]
"""The dimensions as prompts name them: "format, factuality, consistency, realism and quality"."""


# --------------------------------------------------------------------------------------------------
# Turn text: action prompts, observations, predictions
# --------------------------------------------------------------------------------------------------


TURN_HEADING_RE = re.compile(r"^### Turn (?P<turn>[1-9][0-9]*)\n", re.MULTILINE)
"""Where an action prompt starts in a text that holds several turns."""


def turn_heading(turn: int) -> str:
    """The first line of turn `turn`'s action prompt (1-based), with its newline."""
    return f"### Turn {turn}\n"


@dataclass(frozen=True, slots=True)
class ActionPrompt:
    """The parts of one canonical action prompt."""

    turn: int
    action: str
    current_state: str | None
    fence_language: str


_PROMPT_RE = re.compile(
    r"### Turn (?P<turn>[1-9][0-9]*)\n"
    rf"(?:{re.escape(STATE_MARKER)}\n(?P<state>.*?)\n\n)?"
    rf"{re.escape(ACTION_MARKER)}\n(?P<fence>`{{3,}})(?P<lang>[^`\n]*)\n(?P<action>.*)\n(?P=fence)",
    re.DOTALL,
)


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run inside `text`, so the block cannot be closed early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def fence_language(action: str, domain: Domain) -> str:
    """The info string of the action block: json when the action is JSON, else the domain's language."""
    try:
        json.loads(action)
    except ValueError:
        return domain_spec(domain).action_language
    return "json"


def render_action_prompt(turn: int, action: str, domain: Domain, current_state: str | None = None) -> str:
    """`### Turn N`, the optional current state, and the action in a fenced block."""
    fence = fence_for(action)
    state = "" if current_state is None else f"{STATE_MARKER}\n{current_state}\n\n"
    return f"{turn_heading(turn)}{state}{ACTION_MARKER}\n{fence}{fence_language(action, domain)}\n{action}\n{fence}"


def parse_action_prompt(text: str) -> ActionPrompt | None:
    """Split an action prompt into turn number, state and action; None when it has another layout."""
    m = _PROMPT_RE.fullmatch(text)
    if m is None:
        return None
    return ActionPrompt(int(m["turn"]), m["action"], m["state"], m["lang"])


def render_observation(text: str) -> str:
    """A ground-truth response: the observation marker line, then the observation."""
    return f"{OBSERVATION_MARKER}\n{text}"


def parse_observation(text: str) -> str | None:
    """The observation inside a ground-truth response; None when the marker line is missing."""
    head = OBSERVATION_MARKER + "\n"
    return text[len(head) :] if text.startswith(head) else None


def prediction_block(observation: str) -> str:
    """An observation as a world model answers it: inside one prediction block."""
    return f"{PREDICTION_OPEN}\n{observation}\n{PREDICTION_CLOSE}"


def answer_text(observation: str, reasoning: str | None = None) -> str:
    """A world model's whole answer: the reasoning in a think block (when given), then the prediction."""
    block = prediction_block(observation)
    return block if reasoning is None else f"{THINK_OPEN}\n{reasoning.strip()}\n{THINK_CLOSE}\n\n{block}"


# --------------------------------------------------------------------------------------------------
# System prompt: role preamble, the five parts, output requirements
# --------------------------------------------------------------------------------------------------

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
    f"{PREDICTION_OPEN}{PREDICTION_CLOSE} block."
)


def role_preamble(label: str, simulates: str) -> str:
    """The fixed opening of a system prompt: a `label` world model that simulates `simulates`."""
    return (
        "# Role and Objective\n\n"
        f"You are a **{label} World Model**: you simulate {simulates}. Given the description below, the "
        "interaction history and the agent's current action, predict the exact next environment "
        "observation, consistent with everything the history has already shown."
    )


@dataclass(slots=True)
class SystemPromptParts:
    """The five parts of the unified system prompt."""

    task: str
    action_space: ActionSpace = field(default_factory=ActionSpace)
    initial_state: str | None = None
    demonstrations: str | None = None
    simulation_instruction: str | None = None


def render_action_space(space: ActionSpace) -> str:
    """The action-space section's body: the description, then the tools as one JSON block."""
    parts = [space.description] if space.description else []
    if space.tools:
        tools = json.dumps([t.to_json() for t in space.tools], indent=2, ensure_ascii=False, sort_keys=True)
        parts.append(f"```json\n{tools}\n```")
    return "\n\n".join(parts)


def parse_action_space(text: str) -> ActionSpace:
    """The action space of a section body `render_action_space` wrote; other text is the description."""
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
                if render_action_space(space) == text:
                    return space
    return ActionSpace(description=text or None)


def render_system_str(preamble: str, parts: SystemPromptParts) -> str:
    """The system prompt: `preamble` (see `role_preamble`), the five parts, the output requirements."""
    sections = [
        preamble,
        f"{SECTION_TASK}\n\n{parts.task}",
        f"{SECTION_ACTION_SPACE}\n\n{render_action_space(parts.action_space)}",
    ]
    for attr, heading in OPTIONAL_SECTIONS:
        value = getattr(parts, attr)
        if value is not None:
            sections.append(f"{heading}\n\n{value}")
    sections.append(OUTPUT_REQUIREMENTS)
    return "\n\n".join(sections)


def parse_system_str(preamble: str, text: str) -> SystemPromptParts | None:
    """The five parts of a system prompt `render_system_str(preamble, ...)` wrote; None for any other.

    A part whose text itself contains one of the heading lines cannot be split unambiguously: headings
    are taken at their last occurrence, and the result must render back to `text` exactly.
    """
    head = f"{preamble}\n\n{SECTION_TASK}\n\n"
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
        action_space=parse_action_space(body[cut + len(SECTION_ACTION_SPACE) + 4 :]),
        **optional,
    )
    return parts if render_system_str(preamble, parts) == text else None


# --------------------------------------------------------------------------------------------------
# The evaluator's conversation shape
# --------------------------------------------------------------------------------------------------


def evaluator_messages(
    system: str, history: Iterable[tuple[str, str]], current_prompt: str
) -> list[dict[str, str]]:
    """The chat messages the evaluator sends a world model for one turn.

    The system prompt (omitted when empty), one user (action prompt) / assistant (ground-truth
    response with its marker) pair per earlier turn, then the current action prompt as the last user
    message.
    """
    messages: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
    for prompt, response in history:
        messages.append({"role": "user", "content": prompt})
        messages.append({"role": "assistant", "content": response})
    messages.append({"role": "user", "content": current_prompt})
    return messages


def evaluator_roles(history_turns: int, *, answered: bool = False) -> list[str]:
    """The roles of an evaluator conversation with a system prompt and `history_turns` earlier turns;
    `answered` adds the assistant's answer to the current turn (an SFT sample)."""
    return ["system", *["user", "assistant"] * history_turns, "user", *(["assistant"] if answered else [])]
