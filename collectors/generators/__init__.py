"""Seeded task generators: thousands of tasks per local domain, no LLM, each one a different initial
state and goal (not only different words).

A domain's generator is a module of this package exposing `FAMILIES`, a mapping of family name to a
function `(rng) -> dict` that returns the task body (instruction, the domain's state fields, a scripted
plan in `actions`, and `goal` facts such as the expected answer). `generate(domain, n, seed)` draws
task i from family i mod len(FAMILIES) with a `random.Random` seeded by (domain, seed, i), so task i
depends only on those three (a run of 100 tasks starts with the run of 10), and the same seed gives
the same file byte for byte. A draw whose initial state (`state_hash`) repeats an earlier task's is
drawn again, so one file holds distinct initial states wherever the domain's state space allows it.

Every task records its provenance in `metadata` (generator, version, seed, index, family, state
hash), which the collection job copies into each trajectory's metadata as `task.<key>`.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from collectors.environment import Task, TaskError, environment_class
from schemas.domains import domain_spec, is_registered, registered_domains

GENERATOR_VERSION = 2
# The task fields that make up what an environment holds before the first action.
STATE_FIELDS = ("image", "files", "setup", "repo", "network", "limits")
# How often a task whose initial state repeats an earlier one is drawn again before it is kept.
REDRAWS = 24

Family = Callable[[random.Random], dict[str, Any]]


class GeneratorError(ValueError):
    """A generator cannot run (unknown domain, missing backend such as the search index)."""


def generator_domains() -> list[str]:
    """The registered domains with a task generator (`DomainSpec.generator`)."""
    return sorted(spec.value for spec in registered_domains() if spec.generator)


def families(domain: str) -> dict[str, Family]:
    module_name = domain_spec(domain).generator if is_registered(domain) else ""
    if not module_name:
        raise GeneratorError(
            f"no task generator for domain {domain!r}; generators exist for: {', '.join(generator_domains())}"
        )
    module = importlib.import_module(module_name)
    found: dict[str, Family] = module.FAMILIES
    return found


def state_hash(task: dict[str, Any]) -> str:
    """sha256 of the task's initial state: its sandbox fields and its domain configuration objects
    (everything but id, instruction, actions, limits of turns and metadata)."""
    config_keys = {spec.value for spec in registered_domains()}
    state = {k: task[k] for k in STATE_FIELDS if k in task}
    state.update({k: task[k] for k in sorted(config_keys & set(task))})
    blob = json.dumps(state, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _rng(domain: str, seed: int, index: int, draw: int) -> random.Random:
    key = f"worldline-tasks/{GENERATOR_VERSION}/{domain}/{seed}/{index}/{draw}"
    return random.Random(int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big"))


def iter_generated(domain: str, n: int, seed: int) -> Iterator[dict[str, Any]]:
    """The first `n` tasks of `domain`'s generator under `seed`, as task-file objects."""
    table = families(domain)
    names = sorted(table)
    seen: set[str] = set()
    for index in range(n):
        family = names[index % len(names)]
        body: dict[str, Any] = {}
        digest = ""
        for draw in range(REDRAWS):
            body = table[family](_rng(domain, seed, index, draw))
            digest = state_hash(body)
            if digest not in seen:
                break
        seen.add(digest)
        goal = body.pop("goal", {})
        task = {
            "id": f"gen-{domain}-{seed}-{index:05d}-{family}",
            "instruction": body.pop("instruction"),
            **body,
            "metadata": {
                "generator": f"collectors.generators.{domain}/{family}",
                "generator_version": GENERATOR_VERSION,
                "generator_seed": seed,
                "generator_index": index,
                "state_hash": digest,
                "goal": goal,
            },
        }
        yield task


def validated(domain: str, task: dict[str, Any]) -> Task:
    """The task as the collector reads it, after its domain's `validate_task` (a TaskError names it)."""
    parsed = Task.from_json(task, f"generated task {task.get('id')}")
    environment_class(domain).validate_task(parsed, "generated task")
    return parsed


def generate(domain: str, n: int, seed: int) -> list[dict[str, Any]]:
    """`n` validated tasks of `domain` under `seed`."""
    if n < 0:
        raise GeneratorError(f"--n must be >= 0, got {n}")
    out = []
    for task in iter_generated(domain, n, seed):
        try:
            validated(domain, task)
        except TaskError as exc:  # a generator bug, never the user's: say which task and why
            raise GeneratorError(
                f"generator {task['metadata']['generator']} made an invalid task: {exc}"
            ) from exc
        out.append(task)
    return out


def task_line(task: dict[str, Any]) -> str:
    return json.dumps(task, ensure_ascii=False, separators=(", ", ": ")) + "\n"


def write_tasks(path: Path, tasks: list[dict[str, Any]]) -> None:
    """The task file (JSONL), written whole or not at all."""
    from schemas.atomic import atomic_write_text

    atomic_write_text(path, "".join(task_line(t) for t in tasks))
