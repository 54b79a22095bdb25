"""LLM task synthesis (`worldline tasks synthesize`): new tasks of a domain proposed by a model.

A round shows the model (role `task_generator`) a few seed tasks of the domain, its action space and
what a task may set (initial state, instruction, limits), and asks for a batch of new tasks as a JSON
array. Every proposal is then checked the way `worldline collect` would read it (`Task.from_json` and
the domain's `validate_task`) and compared with the seeds and every task kept so far with the pools'
MinHash (`pipelines.minhash`, the dedup settings' shingles and threshold): an invalid proposal or a
near-duplicate is dropped and counted with its reason, never written.

Each round's prompt differs (its number and the seeds it shows), so with the client's response cache
the same seeds, N and seed give the same file again without new calls. Every kept task records its
provenance in `metadata`: the synthesizer, the model that answered, the sha256 of the prompt, the
round and the ids of the seeds it was shown.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from collectors.environment import Task, TaskError, environment_class
from pipelines.config import DedupConfig
from pipelines.minhash import NearDuplicateIndex, normalise, signatures
from worldline.llm import Role, SyncLLMClient, parse_json_lenient

SYNTHESIZER = "collectors.synthesize"
SYNTHESIZER_VERSION = 1
ROLE = Role.TASK_GENERATOR
SEEDS_SHOWN = 3
"""Seed tasks shown in one round's prompt (a rotating, seeded choice)."""
DETAILS_KEPT = 20
"""Drop messages kept for the summary (the counts cover every drop)."""
NOT_STATE = ("id", "metadata", "actions")
"""Task fields that are not the task itself: compared for near-duplicates without them."""


class SynthesisError(ValueError):
    """Synthesis cannot start (no seeds, unknown domain, a seed that is not a task of the domain)."""


@dataclass
class SynthesisResult:
    """The kept tasks (task-file objects), the drops by reason, and what the model was asked."""

    tasks: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)
    details: list[str] = field(default_factory=list)
    rounds: int = 0
    proposed: int = 0

    def drop(self, reason: str, detail: str) -> None:
        self.dropped[reason] += 1
        if len(self.details) < DETAILS_KEPT:
            self.details.append(f"{reason}: {detail}")


def task_text(task: dict[str, Any]) -> str:
    """What two tasks are compared on: everything but id, metadata and scripted actions."""
    body = {k: v for k, v in task.items() if k not in NOT_STATE}
    return json.dumps(body, sort_keys=True, ensure_ascii=False)


def _example(task: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in task.items() if k not in ("id", "metadata")}


def prompt_messages(
    domain: str, seeds: list[dict[str, Any]], batch: int, round_index: int, action_space: str
) -> list[dict[str, str]]:
    """The chat messages of one round: the domain, its action space, example tasks, the answer shape."""
    examples = "\n\n".join(json.dumps(_example(t), indent=1, ensure_ascii=False) for t in seeds)
    system = (
        "You design tasks for agents that act in real, sandboxed environments. A task is one JSON object: "
        "an `instruction` the agent is given, the environment's initial state in the same fields the "
        "examples use (files, repositories, server state, start pages, limits), and optionally `actions`, "
        "a plan of actions in the domain's action space that would solve it. Vary the initial state and "
        "the goal, not only the wording; never copy an example."
    )
    user = (
        f"Domain: {domain}\nAction space: {action_space}\n\nExample tasks of this domain:\n{examples}\n\n"
        f"Proposal round {round_index}: answer with a JSON array of {batch} new task objects of the "
        "same shape (no ids, no metadata), and nothing else."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _proposals(text: str) -> list[Any] | None:
    parsed = parse_json_lenient(text)
    if isinstance(parsed, dict):
        inner = parsed.get("tasks")
        return inner if isinstance(inner, list) else [parsed]
    return parsed if isinstance(parsed, list) else None


def _action_space(domain: str, seeds: list[dict[str, Any]]) -> str:
    cls = environment_class(domain)
    try:
        space = cls.declared_action_space(Task.from_json(seeds[0], "seed task"))
    except TaskError:
        space = None
    if space is None:
        return "as the environment declares it when it starts (see the examples' actions)"
    tools = ", ".join(sorted(space.tool_names())) or "none"
    return f"{space.description or 'tool calls'} (tools: {tools})"


def check_seeds(domain: str, seeds: list[dict[str, Any]]) -> None:
    """Every seed is a valid task of DOMAIN (a SynthesisError names the first that is not)."""
    try:
        cls = environment_class(domain)
    except (KeyError, ValueError) as exc:
        raise SynthesisError(f"unknown domain {domain!r}: {exc}") from exc
    if not seeds:
        raise SynthesisError("no seed tasks: the seeds file holds no task (one JSON object per line)")
    for index, seed in enumerate(seeds, 1):
        try:
            cls.validate_task(Task.from_json(seed, f"seed task {index}"), f"seed task {index}")
        except TaskError as exc:
            raise SynthesisError(f"seeds file: {exc}") from exc


def synthesize(
    domain: str,
    seeds: list[dict[str, Any]],
    n: int,
    client: SyncLLMClient,
    *,
    seed: int = 0,
    batch: int = 5,
    max_rounds: int | None = None,
    temperature: float = 0.8,
    dedup: DedupConfig | None = None,
) -> SynthesisResult:
    """Up to N new valid, mutually distinct tasks of DOMAIN proposed from SEEDS (at most `max_rounds`
    rounds of BATCH proposals; default: three rounds per batch needed)."""
    check_seeds(domain, seeds)
    cfg = dedup or DedupConfig()
    cls = environment_class(domain)
    space = _action_space(domain, seeds)
    index = NearDuplicateIndex(cfg.threshold, cfg.num_perm)

    def signature(task: dict[str, Any]) -> list[int]:
        text = normalise(task_text(task), fold_digits=False)
        (sig,) = signatures([text], num_perm=cfg.num_perm, seed=cfg.seed, width=cfg.shingle_words)
        return sig

    for k, s in enumerate(seeds):
        index.add(f"seed:{k}", signature(s))
    result = SynthesisResult()
    rng = random.Random(f"{SYNTHESIZER}/{domain}/{seed}")
    rounds = max_rounds if max_rounds is not None else 3 * max(1, -(-n // max(1, batch)))
    while len(result.tasks) < n and result.rounds < rounds:
        result.rounds += 1
        shown = rng.sample(range(len(seeds)), min(SEEDS_SHOWN, len(seeds)))
        messages = prompt_messages(domain, [seeds[i] for i in shown], batch, result.rounds, space)
        prompt_sha = hashlib.sha256(json.dumps(messages, sort_keys=True).encode("utf-8")).hexdigest()
        answer = client.chat(ROLE, messages, temperature=temperature)
        proposals = _proposals(answer.text)
        if proposals is None:
            result.drop("unparseable_answer", f"round {result.rounds}: no JSON array of tasks in the answer")
            continue
        for k, proposal in enumerate(proposals):
            if len(result.tasks) >= n:
                break
            result.proposed += 1
            where = f"round {result.rounds} proposal {k + 1}"
            if not isinstance(proposal, dict):
                result.drop("not_an_object", f"{where}: a JSON {type(proposal).__name__}, not an object")
                continue
            task = {
                "id": f"syn-{domain}-{seed}-{len(result.tasks):05d}",
                **{k2: v for k2, v in proposal.items() if k2 not in ("id", "metadata")},
            }
            try:
                cls.validate_task(Task.from_json(task, where), where)
            except TaskError as exc:
                result.drop("invalid_task", str(exc))
                continue
            sig = signature(task)
            twins = index.query(sig)
            if twins:
                result.drop("near_duplicate", f"{where}: near-duplicate of {twins[0]}")
                continue
            index.add(task["id"], sig)
            task["metadata"] = {
                "synthesizer": f"{SYNTHESIZER}/v{SYNTHESIZER_VERSION}",
                "model": answer.model,
                "prompt_sha256": prompt_sha,
                "round": result.rounds,
                "seed_ids": [seeds[i].get("id") for i in shown],
                "synthesis_seed": seed,
            }
            result.tasks.append(task)
    return result
