"""The optimizer's prompt (what it sees each iteration) and the parsing of its answer.

Each iteration the optimizer sees the style directive and target length band of the run, sampled
trajectories of the domain, the current template, its scores (overall and per dimension) and the
concrete worst prediction errors, and answers with a one-line description and a revised template.
A candidate that cannot be parsed, uses an unknown template variable or drops a required one is
rejected with the reason; the reason is shown to the optimizer in the next iteration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prompt_autoresearch.styles import StyleDirective
from schemas.templates import PLACEHOLDERS, REQUIRED_PLACEHOLDERS, TemplateError, check_template
from schemas.trajectory import Trajectory
from schemas.worldmodel import PREDICTION_CLOSE, PREDICTION_OPEN, SCORING_DIMENSIONS, SCORING_DIMENSIONS_TEXT

OPTIMIZER_TEMPERATURE = 1.0
OPTIMIZER_MAX_TOKENS = 32768
EXAMPLE_TURNS = 4
CLIP_CHARS = 600

_TEMPLATE_BLOCK = re.compile(r"<template>\n?(.*?)\n?</template>", re.DOTALL)
_DESCRIPTION = re.compile(r"<description>(.*?)</description>", re.DOTALL)

SYSTEM_PROMPT = """You improve system-prompt templates for a world model: a language model that simulates an agent's environment, predicting the next observation after each action.

A template is text with mustache variables filled per trajectory. Variables: {variables}. Required (a template without any one of them is rejected): {required}. `{{{{name}}}}` inserts a value; `{{{{#name}}}}...{{{{/name}}}}` keeps its body only when the value is non-empty. Use no other variables.

The world model is evaluated exactly like AgentWorldBench: your rendered template is the system message, earlier turns follow as user (action) / assistant (real observation) messages, and the model must answer with the next observation inside one {prediction_open}{prediction_close} block. A judge scores each prediction against the real observation on {dimensions} (1-5 each).

Write general guidance about simulating this domain. Do not copy the example trajectories or their contents into the template: the template must work for unseen tasks. Rules learnt from one example often overgeneralise; prefer rules that the errors show are missing.

Answer with exactly:
<description>one line: what you changed and why</description>
<template>
the complete revised template
</template>"""


@dataclass(frozen=True, slots=True)
class Proposal:
    """A parsed optimizer answer: the template text and its one-line description, or the reason it was
    rejected (then `text` may be empty)."""

    text: str
    description: str
    rejection: str = ""

    @property
    def ok(self) -> bool:
        return not self.rejection


def clip(text: str, limit: int = CLIP_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... [{len(text) - limit} more characters]"


def render_example(traj: Trajectory) -> str:
    lines = [f"Task: {clip(traj.task, 300)}"]
    for n, turn in enumerate(traj.turns[:EXAMPLE_TURNS], start=1):
        lines.append(f"Action {n}: {clip(turn.action.text, 300)}")
        lines.append(f"Observation {n}:\n{clip(turn.observation.text)}")
    if len(traj.turns) > EXAMPLE_TURNS:
        lines.append(f"... ({len(traj.turns) - EXAMPLE_TURNS} more turns)")
    return "\n".join(lines)


def optimizer_messages(
    *,
    domain: str,
    style: StyleDirective,
    template: str,
    scores: Mapping[str, Any],
    worst: Sequence[Mapping[str, Any]],
    examples: Sequence[Trajectory],
    history: Sequence[Mapping[str, Any]],
) -> list[dict[str, str]]:
    """The optimizer's conversation for one iteration; every part is deterministic given its inputs, so
    a resumed run sends the identical request (and gets it from the cache)."""
    system = SYSTEM_PROMPT.format(
        variables=", ".join(PLACEHOLDERS),
        required=", ".join(REQUIRED_PLACEHOLDERS),
        prediction_open=PREDICTION_OPEN,
        prediction_close=PREDICTION_CLOSE,
        dimensions=SCORING_DIMENSIONS_TEXT,
    )
    lines = template.count("\n") + 1
    dims = ", ".join(
        f"{d} {scores['dimensions'][d]:.2f}"
        for d in SCORING_DIMENSIONS
        if scores.get("dimensions", {}).get(d) is not None
    )
    parts = [
        f"# Domain\n{domain}",
        f"# Style of this run\n{style.name}: {style.directive}\nTarget length: {style.band} "
        f"(the current template has {lines} lines). Reach the band while improving the scores.",
        "# Example trajectories (real environment, for reference only)\n"
        + "\n\n".join(f"## Example {i}\n{render_example(t)}" for i, t in enumerate(examples, start=1)),
        f"# Current template ({lines} lines)\n<current_template>\n{template}\n</current_template>",
        f"# Its scores on held-out turns\nscore {scores.get('score', 0.0):.1f} / 100 "
        f"(noise floor {scores.get('noise_floor', 0.0):.1f}); per dimension (1-5): {dims or 'n/a'}; "
        f"judge failures {scores.get('failed', 0)} of {scores.get('samples', 0)}",
    ]
    if worst:
        errors = []
        for i, w in enumerate(worst, start=1):
            errors.append(
                f"## Error {i} (score {w.get('score', 0):.0f})\nAction:\n{clip(str(w.get('action', '')))}\n"
                f"Real observation:\n{clip(str(w.get('truth', '')))}\n"
                f"Predicted:\n{clip(str(w.get('prediction', '')))}\n"
                f"Judge: {clip('; '.join(map(str, w.get('weaknesses', []))) or str(w.get('failure', '')), 400)}"
            )
        parts.append("# Worst predictions with the current template\n" + "\n\n".join(errors))
    if history:
        tried = [
            f"- iteration {h['iteration']}: {h['status']} ({h['reason'] or 'score ' + format(h['score'], '.1f')})"
            f" - {h['description']}"
            for h in history
        ]
        parts.append("# Earlier candidates of this run\n" + "\n".join(tried))
    parts.append("Write the revised template now.")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def parse_proposal(answer: str) -> Proposal:
    """The template and description of an optimizer answer; rejected with a reason when the answer has
    no template block, or the template uses an unknown variable or drops a required one."""
    description_match = _DESCRIPTION.search(answer)
    description = " ".join((description_match.group(1) if description_match else "").split())[:300]
    blocks = _TEMPLATE_BLOCK.findall(answer)
    if not blocks:
        return Proposal("", description, "rejected: the answer has no <template>...</template> block")
    text = blocks[-1].strip("\n") + "\n"
    if not text.strip():
        return Proposal("", description, "rejected: the <template> block is empty")
    try:
        check_template(text, "candidate")
    except TemplateError as error:
        return Proposal(text, description, f"rejected: {str(error).removeprefix('candidate: ')}")
    return Proposal(text, description or "(no description)")
