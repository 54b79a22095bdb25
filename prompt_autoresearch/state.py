"""An experiment's settings and its state file (RUNDIR/state.json, written atomically).

The state holds the settings (a resume must use the same), per-run progress, every candidate with its
template text and worst errors, usage and approvals. Every LLM request of the loop is a pure function
of it, which is what makes a resume send no repeated call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from schemas.atomic import atomic_write_json
from schemas.templates import SEED_TEMPLATES_DIR

STATE_FILE = "state.json"
REQUESTS_FILE = "llm-requests.jsonl"
"""RUNDIR's request journal: every request of every session, written before it is sent."""
STATE_VERSION = 1


class StateMismatch(ValueError):
    """RUNDIR holds a state started with different settings; resuming would mix two experiments."""


@dataclass(frozen=True)
class AutoresearchConfig:
    """What defines an autoresearch experiment (stored in the state; a resume must match it)."""

    domain: str
    data: tuple[str, ...]
    runs: int = 12
    iterations: int = 10
    eval_size: int = 8
    recheck_size: int = 8
    seed: int = 0
    examples: int = 3
    worst: int = 3
    judge_attempts: int = 3
    models: Mapping[str, str] = field(default_factory=dict)
    seed_templates: str = str(SEED_TEMPLATES_DIR)

    def __post_init__(self) -> None:
        for name in ("runs", "iterations", "eval_size", "recheck_size", "judge_attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")

    def fingerprint(self) -> dict[str, Any]:
        record = asdict(self)
        record["data"] = list(self.data)
        record["models"] = dict(sorted(self.models.items()))
        return record


def load_state(rundir: Path) -> dict[str, Any] | None:
    path = rundir / STATE_FILE
    if not path.is_file():
        return None
    state = json.loads(path.read_text("utf-8"))
    if state.get("version") != STATE_VERSION:
        raise StateMismatch(f"{path}: state version {state.get('version')} is not {STATE_VERSION}")
    return cast(dict[str, Any], state)


def new_state(config: AutoresearchConfig) -> dict[str, Any]:
    return {
        "version": STATE_VERSION,
        "config": config.fingerprint(),
        "usage": {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0},
        "stopped": None,
        "runs": {},
        "approvals": {},
    }


def check_resume(state: Mapping[str, Any], config: AutoresearchConfig, rundir: Path) -> None:
    stored, wanted = state["config"], config.fingerprint()
    differ = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
    if differ:
        details = "; ".join(f"{k}: stored {stored.get(k)!r}, now {wanted.get(k)!r}" for k in differ)
        raise StateMismatch(
            f"{rundir} was started with other settings ({details}); rerun with the stored settings to "
            f"resume, or pass a new --out for a new experiment"
        )


def save_state(rundir: Path, state: Mapping[str, Any]) -> None:
    atomic_write_json(rundir / STATE_FILE, state)


def all_rows(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [row for run in state["runs"].values() for row in run["candidates"]]
