"""The active system-prompt template set (v0..v11): loading, checking and rendering.

A template set is a folder with `index.json` (version, file, style) and one text file per version.
The seed set ships in `schemas/templates/`; autoresearch writes evolved sets in the same layout, and
`WORLDLINE_TEMPLATES` (or an explicit folder) makes one of them the active set. The pools render
their system prompts from the active set and autoresearch evolves it; both read it here.

Templates use a tiny mustache subset, so rendering needs no template engine at train-data scale:
`{{name}}` inserts a value, `{{#name}}...{{/name}}` keeps its body only when the value is non-empty.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from schemas.trajectory import Trajectory

SEED_TEMPLATES_DIR = Path(__file__).parent / "templates"
TEMPLATES_ENV = "WORLDLINE_TEMPLATES"

REQUIRED_PLACEHOLDERS = (
    "task",
    "action_space",
    "tool_definitions",
    "initial_state",
    "demonstrations",
    "simulation_instruction",
)
"""Names every template must use, so a trajectory's own parts are re-inserted into each sample."""

PLACEHOLDERS = ("domain", *REQUIRED_PLACEHOLDERS)
"""Every name a template may use. Tool definitions, demonstrations, initial state and simulation
instruction are per trajectory and re-inserted for every sample rendered from it."""

_SECTION = re.compile(r"\{\{#(\w+)\}\}\n?(.*?)\{\{/\1\}\}\n?", re.DOTALL)
_VARIABLE = re.compile(r"\{\{(\w+)\}\}")


class TemplateError(ValueError):
    """A template set is missing, incomplete, or uses a template variable that does not exist."""


@dataclass(frozen=True, slots=True)
class Template:
    """One system-prompt template of the active set."""

    version: int
    style: str
    text: str
    path: str

    def render(self, values: dict[str, str | None]) -> str:
        """The system prompt with every template variable filled; empty optional sections disappear."""

        def section(m: re.Match[str]) -> str:
            return m.group(2) if values.get(m.group(1)) else ""

        def variable(m: re.Match[str]) -> str:
            return values.get(m.group(1)) or ""

        return _VARIABLE.sub(variable, _SECTION.sub(section, self.text)).strip() + "\n"


@dataclass(frozen=True, slots=True)
class TemplateSet:
    """A complete, checked set of templates keyed by version."""

    name: str
    folder: str
    templates: dict[int, Template]

    def get(self, version: int) -> Template:
        try:
            return self.templates[version]
        except KeyError:
            have = ", ".join(f"v{v}" for v in sorted(self.templates))
            raise TemplateError(
                f"template v{version} is not in the set at {self.folder} (it has {have}); "
                "add the file and its index.json entry or change the pools config"
            ) from None


def check_template(text: str, where: str) -> None:
    """Reject unknown template variables and templates that drop a per-trajectory part."""
    used = set(_VARIABLE.findall(_SECTION.sub(lambda m: m.group(2), text)))
    used |= {m.group(1) for m in _SECTION.finditer(text)}
    unknown = used - set(PLACEHOLDERS)
    if unknown:
        raise TemplateError(
            f"{where}: unknown template variable(s) {sorted(unknown)}; use {', '.join(PLACEHOLDERS)}"
        )
    missing = [p for p in REQUIRED_PLACEHOLDERS if p not in used]
    if missing:
        raise TemplateError(
            f"{where}: must use template variable(s) {missing} so per-trajectory parts are re-inserted"
        )


@lru_cache(maxsize=16)
def load_template_set(folder: str | None = None) -> TemplateSet:
    """The template set in `folder`, else the one named by WORLDLINE_TEMPLATES, else the seed set."""
    root = Path(folder or os.environ.get(TEMPLATES_ENV) or SEED_TEMPLATES_DIR)
    index_path = root / "index.json"
    if not index_path.is_file():
        raise TemplateError(f"{root}: no index.json; a template set lists its versions there")
    index = json.loads(index_path.read_text("utf-8"))
    templates: dict[int, Template] = {}
    for entry in index.get("templates", []):
        path = root / entry["file"]
        if not path.is_file():
            raise TemplateError(
                f"{index_path}: v{entry['version']} names {entry['file']}, which does not exist"
            )
        text = path.read_text("utf-8")
        check_template(text, str(path))
        version = int(entry["version"])
        templates[version] = Template(version, str(entry.get("style", "")), text, str(path))
    if not templates:
        raise TemplateError(f"{index_path}: lists no templates")
    return TemplateSet(name=str(index.get("set", root.name)), folder=str(root), templates=templates)


def system_values(traj: Trajectory) -> dict[str, str | None]:
    """The template variables filled from one trajectory (its own tools, demos, state, conditions)."""
    tools = [t.to_json() for t in traj.action_space.tools]
    tool_text = json.dumps(tools, ensure_ascii=False, indent=2) if tools else None
    action_space = traj.action_space.description or (
        "Calls to the tools listed below." if tools else f"The standard {traj.domain.value} actions."
    )
    return {
        "domain": traj.domain.value,
        "task": traj.task,
        "action_space": action_space,
        "tool_definitions": tool_text,
        "initial_state": traj.initial_state,
        "demonstrations": traj.demonstrations,
        "simulation_instruction": traj.simulation_instruction,
    }
