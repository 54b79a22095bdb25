"""The twelve style directives that seed autoresearch runs, each with a target length band.

Run k starts from style k (mod 12): the seed template of that style and a directive the optimizer is
told every iteration, including the band of lines the template should reach. The bands run from a
~30-line constraint list to a ~1,100-line formal specification, the spread of the paper's set, so the
evolved v0..v11 differ in length as well as in style.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StyleDirective:
    """One style: its name, the instruction given to the optimizer, the seed template version and the
    target length band in lines (inclusive)."""

    name: str
    directive: str
    seed_version: int
    min_lines: int
    max_lines: int

    @property
    def band(self) -> str:
        return f"{self.min_lines}-{self.max_lines} lines"

    def in_band(self, lines: int) -> bool:
        return self.min_lines <= lines <= self.max_lines


STYLES: tuple[StyleDirective, ...] = (
    StyleDirective(
        "short constraint list",
        "A terse numbered list of hard constraints the simulated environment must satisfy; no prose.",
        0,
        25,
        45,
    ),
    StyleDirective(
        "concise checklist",
        "A checklist the world model runs through before answering: short imperative items grouped "
        "under a few headings.",
        3,
        30,
        70,
    ),
    StyleDirective(
        "plain transcript document",
        "A plain document that reads like the header of a recorded session: what the environment is, "
        "then how its transcript continues; minimal instructions.",
        1,
        40,
        100,
    ),
    StyleDirective(
        "environment persona",
        "Speak as the environment itself in the first person: what it is, what state it holds, how it "
        "reacts to actions and to mistakes.",
        5,
        60,
        150,
    ),
    StyleDirective(
        "format-first",
        "Lead with the exact output format of each kind of observation in this domain (headers, "
        "prompts, error shapes, JSON layouts), then the behaviour rules.",
        6,
        90,
        200,
    ),
    StyleDirective(
        "do and do-not rules",
        "Paired DO / DO NOT rules, each with a one-line reason, covering format, facts, consistency "
        "and realism.",
        7,
        120,
        260,
    ),
    StyleDirective(
        "questions and answers",
        "A FAQ: the questions a simulator faces at each step (what changed? what would the real "
        "system print? what if the action is invalid?) with precise answers.",
        8,
        160,
        340,
    ),
    StyleDirective(
        "state-tracking-first",
        "Start from explicit state tracking: how to keep a ledger of files, processes, pages or "
        "records across turns and derive every observation from it.",
        9,
        220,
        450,
    ),
    StyleDirective(
        "demonstration-heavy",
        "Teach by worked examples: many short action -> observation demonstrations covering normal "
        "results, errors and edge cases, each with a note on what it shows.",
        4,
        300,
        600,
    ),
    StyleDirective(
        "verbose prose specification",
        "A long prose specification in sections: the environment, its state, its output conventions, "
        "failure behaviour and consistency requirements, with rationale.",
        2,
        400,
        750,
    ),
    StyleDirective(
        "per-domain handbook",
        "A handbook with one chapter per kind of action or tool in this domain: semantics, output "
        "format, typical errors and realistic runtime details.",
        10,
        550,
        950,
    ),
    StyleDirective(
        "formal numbered specification",
        "A formal specification with numbered clauses and sub-clauses (definitions, state model, "
        "output grammar, error semantics, conformance checks), exhaustive and precise.",
        11,
        750,
        1150,
    ),
)
"""Twelve directives; shortest band first (the order export follows for v0..v11)."""


def style_for_run(run: int) -> StyleDirective:
    """The style that seeds run `run` (0-based): style run mod 12."""
    return STYLES[run % len(STYLES)]
