"""Evaluation data for autoresearch: trajectories of one domain, three disjoint splits, and the
world-model conversations built from them exactly as AgentWorldBench's eval.py builds its own.

`--data` is worldline trajectory shards (a dataset folder, a folder of parts or one `.parquet` file)
or AgentWorldBench JSONL (`*_test.jsonl`, a file or a folder). Trajectories are split by a hash of
their id, so the split of a trajectory never depends on file order or on the other trajectories:

- `optimizer`: shown to the optimizer as examples of the environment;
- `eval`: the held-out turns every candidate of a run is scored on (the same turns for the whole run,
  so candidate and incumbent are compared on paired samples);
- `recheck`: a disjoint split on which a run's winner is scored again before it is accepted.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.agentworldbench import (
    AgentWorldBenchSample,
    read_samples,
    sample_to_trajectory,
    trajectory_to_samples,
)
from schemas.domains import registered_domains
from schemas.shards import iter_trajectories, shard_files
from schemas.templates import Template, system_values
from schemas.trajectory import Domain, Trajectory
from worldline.judge import JudgeSample, from_agentworldbench

SPLITS = ("optimizer", "eval", "recheck")
WORLD_MODEL_TEMPERATURE = 0.6
WORLD_MODEL_MAX_TOKENS = 32768


class DataError(ValueError):
    """The evaluation data cannot be read or is too small; the message names the path and the fix."""


@dataclass(frozen=True, slots=True)
class EvalItem:
    """One held-out turn: trajectory `trajectory.id`, turn `turn` (1-based)."""

    trajectory: Trajectory
    turn: int

    @property
    def key(self) -> str:
        return f"{self.trajectory.id}#{self.turn}"

    def sample(self, template: Template) -> AgentWorldBenchSample:
        """The AgentWorldBench sample of this turn with `template` rendered as its `system_str`."""
        base = trajectory_to_samples(self.trajectory, [self.turn])[0]
        base.system_str = template.render(system_values(self.trajectory))
        return base

    def messages(self, template: Template) -> list[dict[str, str]]:
        """The world model's conversation, as eval.py builds it: the system prompt, then every earlier
        turn as user (action prompt) / assistant (ground-truth observation), then the turn's prompt."""
        return world_model_messages(self.sample(template))

    def judge_sample(self, template: Template, output: str) -> JudgeSample:
        return from_agentworldbench(self.sample(template), output)


def world_model_messages(sample: AgentWorldBenchSample) -> list[dict[str, str]]:
    """AgentWorldBench eval.py's inference messages for one sample (turn_idx is 1-based)."""
    t = sample.turn_idx - 1
    messages: list[dict[str, str]] = []
    if sample.system_str:
        messages.append({"role": "system", "content": sample.system_str})
    for prompt, response in zip(sample.prompt[:t], sample.response[:t], strict=False):
        messages.append({"role": "user", "content": prompt})
        messages.append({"role": "assistant", "content": response})
    messages.append({"role": "user", "content": sample.prompt[t]})
    return messages


def _awb_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.suffix == ".jsonl" else []
    return sorted(path.rglob("*.jsonl")) if path.is_dir() else []


def read_trajectories(paths: list[Path]) -> Iterator[Trajectory]:
    """Trajectories from shards and/or AgentWorldBench JSONL; AgentWorldBench samples of one id are
    turn variants of one trajectory, so the variant with the most turns stands for it."""
    for path in paths:
        if not path.exists():
            raise DataError(f"--data {path}: no such file or folder; pass trajectory shards or *_test.jsonl")
        jsonl = _awb_files(path)
        parquet = [] if path.suffix == ".jsonl" else shard_files(path)
        if not jsonl and not parquet:
            raise DataError(
                f"--data {path}: no .parquet trajectory shards and no AgentWorldBench .jsonl files found"
            )
        if parquet:
            yield from iter_trajectories(path)
        longest: dict[tuple[str, str], AgentWorldBenchSample] = {}
        for file in jsonl:
            for sample in read_samples(file):
                key = (sample.domain_name, repr(sample.id))
                have = longest.get(key)
                if have is None or len(sample.prompt) > len(have.prompt):
                    longest[key] = sample
        for sample in longest.values():
            yield sample_to_trajectory(sample, source_uri=str(path))


def split_of(trajectory_id: str, seed: int) -> str:
    """The split a trajectory belongs to: 40% optimizer, 30% eval, 30% recheck, by a seeded hash."""
    digest = hashlib.sha256(f"autoresearch-split\x1f{seed}\x1f{trajectory_id}".encode()).digest()
    bucket = int.from_bytes(digest[:8], "big") % 10
    return "optimizer" if bucket < 4 else ("eval" if bucket < 7 else "recheck")


def _neg_rank(trajectory_id: str, seed: int) -> str:
    """Orders trajectories inside a split (the heap keeps the largest of these: the lowest ranks)."""
    digest = hashlib.sha256(f"autoresearch-rank\x1f{seed}\x1f{trajectory_id}".encode()).digest()
    return bytes(255 - b for b in digest[:8]).hex()


@dataclass
class EvalData:
    """The trajectories of one domain, split three ways."""

    domain: str
    splits: dict[str, list[Trajectory]]

    @classmethod
    def load(cls, paths: list[Path], domain: str, seed: int, keep_per_split: int = 5000) -> EvalData:
        try:
            wanted = Domain(domain)
        except ValueError:
            raise DataError(
                f"--domain {domain!r} is not a worldline domain; use one of {', '.join(s.value for s in registered_domains())}"
            ) from None
        # Memory stays bounded on large inputs: each split keeps the `keep_per_split` trajectories of
        # lowest seeded rank, a choice that does not depend on file order.
        kept: dict[str, list[tuple[str, str, Trajectory]]] = {name: [] for name in SPLITS}
        seen: set[str] = set()
        for traj in read_trajectories(paths):
            if traj.domain is not wanted or not traj.turns or traj.id in seen:
                continue
            seen.add(traj.id)
            heap = kept[split_of(traj.id, seed)]
            entry = (_neg_rank(traj.id, seed), traj.id, traj)
            if len(heap) < keep_per_split:
                heapq.heappush(heap, entry)
            elif entry[:2] > heap[0][:2]:
                heapq.heapreplace(heap, entry)
        total = sum(len(heap) for heap in kept.values())
        if total < 3:
            raise DataError(
                f"--data holds {total} {domain} trajectory(ies) with turns; autoresearch needs at "
                f"least 3 (one per split: optimizer examples, eval, recheck)"
            )
        splits: dict[str, list[Trajectory]] = {
            name: [t for _, _, t in sorted(heap, key=lambda e: e[1])] for name, heap in kept.items()
        }
        # Tiny data sets: move trajectories so that every split has one (deterministic, by id order).
        for name in SPLITS:
            if not splits[name]:
                donor = max(SPLITS, key=lambda s: len(splits[s]))
                splits[name].append(splits[donor].pop())
        return cls(domain=wanted.value, splits=splits)

    def eval_items(self, split: str, size: int, seed: int, run: int) -> list[EvalItem]:
        """`size` held-out turns of `split` for run `run`: distinct trajectories first (a seeded draw),
        one seeded turn each, then further turns when the split has fewer trajectories than `size`."""
        rng = random.Random(f"autoresearch-items\x1f{seed}\x1f{run}\x1f{split}")
        pool = list(self.splits[split])
        rng.shuffle(pool)
        candidates: list[EvalItem] = []
        for traj in pool:
            turns = list(range(1, len(traj.turns) + 1))
            rng.shuffle(turns)
            candidates.extend(EvalItem(traj, t) for t in turns)
        # Round-robin over trajectories so small sizes get distinct trajectories.
        by_traj: dict[str, list[EvalItem]] = {}
        for item in candidates:
            by_traj.setdefault(item.trajectory.id, []).append(item)
        ordered: list[EvalItem] = []
        while len(ordered) < len(candidates):
            for traj in pool:
                bucket = by_traj[traj.id]
                if bucket:
                    ordered.append(bucket.pop(0))
        return ordered[:size]

    def optimizer_examples(self, count: int, seed: int, run: int, iteration: int) -> list[Trajectory]:
        rng = random.Random(f"autoresearch-examples\x1f{seed}\x1f{run}\x1f{iteration}")
        pool = list(self.splits["optimizer"])
        return rng.sample(pool, min(count, len(pool)))

    def summary(self) -> dict[str, Any]:
        return {name: len(items) for name, items in self.splits.items()}
