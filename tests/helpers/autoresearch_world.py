"""A scripted world for autoresearch tests: the fake server plays optimizer, world model and judge.

Each role has its own model name on one fake server. Templates carry a `Quality level: N` line; the
world model reads N from its system prompt (4 without the line) and says `quality=N` in its
prediction; the judge gives 1 + N/5 on average over the five dimensions, i.e. a normalised score of
5N. The optimizer follows a plan per (style, iteration): raise the level, drop a placeholder, or
answer without a template. Answers depend only on the request body and on how often that exact body
was answered before (the judge's `noise` adds levels on repeats), never on arrival order, so two
experiments with the same settings get the same answers whatever the concurrency.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas.shards import write_trajectories
from schemas.trajectory import (
    Action,
    ActionKind,
    ActionSpace,
    Domain,
    Observation,
    ObservationFormat,
    Source,
    SourceKind,
    Trajectory,
    Turn,
)
from schemas.worldmodel import SCORING_DIMENSIONS as DIMENSIONS
from tests.helpers.fakellm import FakeReply, last_user_message

OPTIMIZER, WORLD_MODEL, JUDGE = "opt-model", "wm-model", "judge-model"
DEFAULT_LEVEL = 4
_LEVEL = re.compile(r"Quality level: (\d+)")
_CURRENT = re.compile(r"<current_template>\n(.*?)\n</current_template>", re.DOTALL)
_STYLE = re.compile(r"# Style of this run\n([^:\n]+):")


def terminal_trajectories(count: int = 12, turns: int = 3) -> list[Trajectory]:
    return [
        Trajectory(
            id=f"traj-{i:03d}",
            domain=Domain.TERMINAL,
            source=Source(kind=SourceKind.PUBLIC, name="test"),
            task=f"inspect repository {i}",
            action_space=ActionSpace(description="bash commands"),
            initial_state=f"files: notes{i}.txt",
            turns=[
                Turn(
                    Action(ActionKind.COMMAND, f"cat notes{i}_{n}.txt"),
                    Observation(f"line {i}.{n} of the notes", ObservationFormat.TERMINAL),
                )
                for n in range(turns)
            ],
        )
        for i in range(count)
    ]


def write_data(root: Path, count: int = 12) -> Path:
    folder = root / "shards"
    write_trajectories(folder, terminal_trajectories(count))
    return folder


def set_level(template: str, level: int) -> str:
    if _LEVEL.search(template):
        return _LEVEL.sub(f"Quality level: {level}", template)
    return template.rstrip("\n") + f"\nQuality level: {level}\n"


def drop_placeholder(template: str, name: str) -> str:
    template = re.sub(r"\{\{#" + name + r"\}\}.*?\{\{/" + name + r"\}\}\n?", "", template, flags=re.DOTALL)
    return template.replace("{{" + name + "}}", "")


@dataclass
class FakeWorld:
    """The scripted roles. `plan[(style, iteration)]` is "up:K" (default up:4), "drop:NAME" or "garbage";
    `noise[k]` extra judge levels for the k-th repeat of an identical judge request (0-based);
    `garbage_levels`: the judge answers without a verdict for predictions of these levels;
    `rejected_levels`: the world model rejects (HTTP 400) system prompts of these levels;
    `on_request`: called (under the lock) with the request number before answering; when it returns
    True the request is dropped unanswered and not counted (a crash test kills the client there)."""

    plan: dict[tuple[str, int], str] = field(default_factory=dict)
    noise: tuple[int, ...] = (0, 2)
    garbage_levels: frozenset[int] = frozenset()
    rejected_levels: frozenset[int] = frozenset()
    on_request: Callable[[int], bool] | None = None
    seen: Counter[str] = field(default_factory=Counter)
    answered: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: dict[str, Any]) -> FakeReply:
        body = json.dumps(request, sort_keys=True)
        digest = hashlib.sha256(body.encode()).hexdigest()
        with self._lock:
            if self.on_request is not None and self.on_request(self.answered + 1):
                return FakeReply.dropped_connection()
            repeat = self.seen[digest]
            self.seen[digest] += 1
            self.answered += 1
        model = request.get("model")
        if model == OPTIMIZER:
            return FakeReply(text=self.optimize(request))
        if model == WORLD_MODEL:
            if _level_of_system(request) in self.rejected_levels:
                return FakeReply.bad_request("prompt is longer than the context")
            return FakeReply(text=self.predict(request))
        if model == JUDGE:
            return FakeReply(text=self.judge(request, repeat))
        return FakeReply.bad_request(f"unknown model {model}")

    def optimize(self, request: dict[str, Any]) -> str:
        user = last_user_message(request)
        current_match, style_match = _CURRENT.search(user), _STYLE.search(user)
        assert current_match and style_match, "optimizer prompt lacks the current template or style"
        current, style = current_match.group(1) + "\n", style_match.group(1)
        iteration = user.count("\n- iteration ") + 1
        action = self.plan.get((style, iteration), "up:4")
        if action == "garbage":
            return "I would rather not."
        if action.startswith("drop:"):
            name = action.split(":", 1)[1]
            return f"<description>shorter: removed {name}</description>\n<template>\n{drop_placeholder(current, name)}</template>"
        match = _LEVEL.search(current)
        level = int(match.group(1)) if match else DEFAULT_LEVEL
        step = int(action.split(":", 1)[1])
        return (
            f"<description>raise quality by {step}</description>\n"
            f"<template>\n{set_level(current, level + step)}</template>"
        )

    def predict(self, request: dict[str, Any]) -> str:
        system = next((m["content"] for m in request["messages"] if m["role"] == "system"), "")
        level = _level_of_system(request)
        # Different templates give different predictions (as sampling would), same template same text.
        tag = hashlib.sha256(system.encode()).hexdigest()[:6]
        return (
            f"Thinking.\n<predicted_observation>\npredicted quality={level} ({tag})\n</predicted_observation>"
        )

    def judge(self, request: dict[str, Any], repeat: int) -> str:
        user = last_user_message(request)
        match = re.search(r"quality=(\d+)", user)
        level = int(match.group(1)) if match else 0
        if level in self.garbage_levels:
            return "no verdict today"
        level += self.noise[repeat] if repeat < len(self.noise) else 0
        return verdict_for_level(level)


def _level_of_system(request: dict[str, Any]) -> int:
    system = next((m["content"] for m in request["messages"] if m["role"] == "system"), "")
    match = _LEVEL.search(system)
    return int(match.group(1)) if match else DEFAULT_LEVEL


def verdict_for_level(level: int) -> str:
    """Five 1..5 scores summing to 5 + level (capped), so the normalised mean is 5 * level."""
    extra = max(min(level, 20), 0)
    scores = {d: 1 for d in DIMENSIONS}
    for i in range(extra):
        scores[DIMENSIONS[i % 5]] += 1
    body = json.dumps({"strengths": ["ok"], "weaknesses": [f"level {level}"], "scores": scores})
    return f"Compared.\n<final_evaluation>\n```json\n{body}\n```\n</final_evaluation>"


def env_for(base_url: str) -> dict[str, str]:
    """Environment for `autoresearch run` against the fake server (cache in RUNDIR)."""
    return {
        "WORLDLINE_LLM_BASE_URL": base_url,
        "WORLDLINE_LLM_API_KEY": "test-key",
        "WORLDLINE_LLM_MODEL_OPTIMIZER": OPTIMIZER,
        "WORLDLINE_LLM_MODEL_WORLD_MODEL": WORLD_MODEL,
        "WORLDLINE_LLM_MODEL_JUDGE": JUDGE,
        "WORLDLINE_LLM_MAX_RETRIES": "2",
        "WORLDLINE_LLM_TIMEOUT_S": "30",
    }
