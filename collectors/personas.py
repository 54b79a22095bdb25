"""Personas of the `openai` policy: ways of working drawn per rollout, so one task yields distinct
behaviour (a careful expert, a hurried novice, an explorer of error paths, ...).

A persona is a paragraph added to the agent's system prompt after the task and the action space, plus
its sampling settings (temperature, top_p). It never changes the task's instruction or the tools.

Which persona an episode gets: the task's `metadata.persona`, else the run's (`worldline collect
--persona NAME|mix|none`, `--persona-mix`, `--persona-seed`). With `mix`, the persona is a function
of (seed, task id, rollout): the rollouts of one task go round the mix in a seeded order, each persona
as often as its weight says, so N rollouts of a task with equal weights meet N distinct personas (up to
the number of personas) and a resumed run draws exactly what the first one would have.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MIX = "mix"
NONE = "none"

SECTION = (
    "\n\nHow you work: {prompt}\n"
    "This describes your way of working only: the task and the tools are exactly as given above."
)


class PersonaError(ValueError):
    """A persona setting that cannot be used; the message names what is known."""


@dataclass(frozen=True)
class Persona:
    """One way of working: `prompt` joins the system prompt (through SECTION), the sampling settings
    go with every request of the episode, `weight` is its default share of the mix."""

    name: str
    summary: str  # one line, for --help and the docs
    prompt: str
    temperature: float
    top_p: float | None = None
    weight: float = 1.0

    @property
    def system_text(self) -> str:
        """What this persona adds to the end of the system prompt."""
        return SECTION.format(prompt=self.prompt)

    @property
    def prompt_sha256(self) -> str:
        return hashlib.sha256(self.system_text.encode("utf-8")).hexdigest()

    @property
    def sampling(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p}


PERSONAS: dict[str, Persona] = {
    p.name: p
    for p in (
        Persona(
            "careful",
            "an expert who inspects the state before acting and checks each change",
            "You are a careful expert. Before you change anything, inspect the current state (list, "
            "read, query) so that every action rests on what you have seen. After each change, check "
            "that it had the effect you intended. Prefer safe, reversible steps.",
            temperature=0.2,
            top_p=0.9,
        ),
        Persona(
            "novice",
            "a hurried beginner who guesses names and flags, makes the odd typo, retries variations",
            "You are a hurried beginner. Act on your first idea instead of investigating: guess option "
            "names, file names and paths from memory, and type fast, so an occasional typo or wrong flag "
            "slips into your commands and calls. When something fails, try a quick variation rather than "
            "reading documentation.",
            temperature=1.0,
            top_p=1.0,
        ),
        Persona(
            "explorer",
            "tries unfamiliar commands, tools and options, error paths included",
            "You are curious about this environment. On the way to finishing the task, try commands, "
            "tools, options and arguments you have not used yet, including ones that may fail (a missing "
            "file, an invalid argument, an unknown option), and read what the environment answers. Then "
            "return to the task and complete it.",
            temperature=0.9,
            top_p=0.95,
        ),
        Persona(
            "minimalist",
            "the fewest actions that finish the task, no extra checks",
            "You are a minimalist. Complete the task with as few actions as possible: no exploratory "
            "listings, no verification unless the task cannot be finished without it, and one combined "
            "action where one suffices.",
            temperature=0.3,
            top_p=0.9,
        ),
        Persona(
            "help_seeker",
            "reads --help, man pages, usage and tool descriptions before using a tool",
            "You learn tools from their own documentation. Before using a program or tool you are not "
            "sure of, read its help (--help, -h, man pages, usage messages, the tool's description or its "
            "error text), then use what the help said to complete the task.",
            temperature=0.5,
            top_p=0.95,
        ),
        Persona(
            "recoverer",
            "reads each error, finds its cause, fixes it and retries in a corrected form",
            "You treat errors as information. When an action fails or has an unexpected result, stop, "
            "read the error, find its cause (inspect the state it names), fix it and retry in a corrected "
            "form; never repeat a failing action unchanged. Before a risky step, note how you would undo it.",
            temperature=0.7,
            top_p=0.95,
        ),
    )
}

DEFAULT_MIX: dict[str, float] = {name: p.weight for name, p in PERSONAS.items()}

# Where a task enters its cycle is drawn from this many steps: a multiple of every cycle length up to
# 10 (the sum of integer weights), so with integer weights every position is equally likely.
_OFFSETS = 2520


def known() -> str:
    return ", ".join(PERSONAS)


def persona(name: str, where: str = "persona") -> Persona:
    """The persona called `name`; the error names the known ones."""
    try:
        return PERSONAS[name]
    except KeyError:
        raise PersonaError(
            f"{where}: unknown persona {name!r}; known: {known()} (or {MIX} to draw from the mix, "
            f"{NONE} for no persona)"
        ) from None


def check_mix(mix: Mapping[str, Any], where: str = "persona mix") -> dict[str, float]:
    """Weights by persona name: known names, numbers >= 0, at least one above 0."""
    if not isinstance(mix, Mapping):
        raise PersonaError(f"{where}: the persona mix must be an object of name: weight")
    out: dict[str, float] = {}
    for name, weight in mix.items():
        persona(str(name), where)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
            raise PersonaError(
                f"{where}: the weight of persona {name!r} must be a number >= 0, got {weight!r}"
            )
        out[str(name)] = float(weight)
    if not any(w > 0 for w in out.values()):
        raise PersonaError(f"{where}: the persona mix needs at least one weight above 0")
    return out


def parse_mix(text: str) -> dict[str, float]:
    """`careful=2,novice=1` (the command line's --persona-mix): only the listed personas are drawn."""
    mix: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, weight = item.partition("=")
        try:
            mix[name.strip()] = float(weight) if sep else 1.0
        except ValueError:
            raise PersonaError(f"--persona-mix {item!r}: expected NAME=WEIGHT, e.g. careful=2") from None
    return check_mix(mix, "--persona-mix")


@dataclass(frozen=True)
class PersonaSetting:
    """How an episode's persona is chosen: `name` is a persona, MIX or NONE; `mix` the weights of the
    draw (None: DEFAULT_MIX); `seed` the draw's seed."""

    name: str = NONE
    mix: Mapping[str, float] | None = None
    seed: int = 0

    def check(self, where: str = "persona") -> PersonaSetting:
        if self.name not in (MIX, NONE):
            persona(self.name, where)
        if self.mix is not None:
            check_mix(self.mix, where)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise PersonaError(f"{where}: the persona seed must be an integer, got {self.seed!r}")
        return self

    def for_task(self, task_id: str, metadata: Mapping[str, Any]) -> PersonaSetting:
        """This setting with the task's `metadata.persona` over it: a name, MIX or NONE, or an object
        with any of `name`, `mix`, `seed`."""
        value = metadata.get("persona")
        where = f"task {task_id}: metadata.persona"
        if value is None:
            return self
        if isinstance(value, str):
            return PersonaSetting(value, self.mix, self.seed).check(where)
        if not isinstance(value, Mapping):
            raise PersonaError(f"{where} must be a persona name or an object with name, mix and/or seed")
        unknown = sorted(set(value) - {"name", "mix", "seed"})
        if unknown:
            raise PersonaError(f"{where}: unknown field(s) {', '.join(unknown)}; known: name, mix, seed")
        name = value.get("name", MIX if "mix" in value else self.name)
        if not isinstance(name, str):
            raise PersonaError(f"{where}.name must be a string, got {name!r}")
        mix = check_mix(value["mix"], where) if "mix" in value else self.mix
        return PersonaSetting(name, mix, value.get("seed", self.seed)).check(where)

    def choose(self, task_id: str, rollout: int) -> Persona | None:
        """The episode's persona (None for NONE)."""
        if self.name == NONE:
            return None
        if self.name != MIX:
            return persona(self.name)
        return PERSONAS[draw(self.weights, self.seed, task_id, rollout)]

    @property
    def weights(self) -> dict[str, float]:
        return dict(self.mix) if self.mix is not None else dict(DEFAULT_MIX)


def draw(weights: Mapping[str, float], seed: int, task_id: str, rollout: int) -> str:
    """The mix's persona for rollout `rollout` of task `task_id`: the task's seeded order of the
    personas, walked by smooth weighted round robin (each persona as often as its weight, spread
    evenly) from a seeded offset, `rollout` steps on."""
    key = f"worldline-persona/{seed}/{task_id}"
    rng = random.Random(int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big"))
    names = sorted(name for name, weight in weights.items() if weight > 0)
    rng.shuffle(names)
    offset = rng.randrange(_OFFSETS)
    total = sum(weights[name] for name in names)
    current = dict.fromkeys(names, 0.0)
    pick = names[0]
    for _ in range(offset + rollout + 1):
        for name in names:
            current[name] += weights[name]
        pick = max(names, key=current.__getitem__)  # the first of equals in the task's order
        current[pick] -= total
    return pick


def record(chosen: Persona, setting: PersonaSetting, set_by: str, rollout: int) -> dict[str, Any]:
    """What a trajectory's metadata says about its persona (`persona`); `set_by` is "task" when the
    task's metadata.persona chose the setting, else "run"."""
    out: dict[str, Any] = {
        "name": chosen.name,
        "prompt_sha256": chosen.prompt_sha256,
        "sampling": chosen.sampling,
        "set_by": set_by,
    }
    if setting.name == MIX:
        out["drawn_from"] = {"mix": setting.weights, "seed": setting.seed, "rollout": rollout}
    return out


def help_text() -> str:
    """The personas, one line each, for --help."""
    return "; ".join(f"{p.name}: {p.summary} (temperature {p.temperature:g})" for p in PERSONAS.values())
