# Beam's transforms carry no type annotations; calling them is the point of this module.
# mypy: disable-error-code="no-untyped-call"
"""Stage decontaminate: find training records that overlap an evaluation turn or task.

Two tests, both per training turn (and task, and knowledge document):
- near duplicate: Jaccard >= `decontamination.threshold` with one evaluation turn (MinHash LSH over
  3-word shingles), for rephrased copies of similar length;
- containment: >= `decontamination.containment` of an evaluation turn's or task's 13-grams lie inside
  the training text (`pipelines.ngrams`), for evaluation text pasted into longer training text.

Against `--eval` sets (matched in the fused read stage) and against the build's own eval pool
(`EvalPoolGrams` collects the eval pool's n-grams once groups are assigned; the render stage checks
training records against them).

Reads: a kept trajectory (or knowledge document), the evaluation sets' signatures and n-grams, the
eval pool's n-grams. Writes: (record id, "evaluation sample: how") for each contaminated record; the
render stage removes them (stage `decontamination`, reason `eval_overlap` / `eval_pool_overlap`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa

from pipelines.config import EVAL_POOL, PoolsConfig
from pipelines.minhash import NearDuplicateIndex, normalise, signatures
from pipelines.ngrams import ContainmentIndex, ngram_hashes, text_grams
from pipelines.stages.contract import Stage
from pipelines.stages.spill import read_ipc
from schemas.trajectory import Source, Trajectory

STAGE = Stage(
    name="decontaminate",
    reads=("kept Trajectory", "knowledge document", "evaluation turn signatures and n-grams", "eval pool"),
    writes=("contaminated (id, evaluation sample: how)", "eval pool n-grams"),
    counters=("dropped.eval_overlap", "dropped.eval_pool_overlap"),
)
EvalGrams = list[tuple[str, list[int]]]
"""(evaluation text key, its n-gram hashes)."""


def turn_texts(traj: Trajectory) -> list[str]:
    return [normalise(f"{t.action.text}\n{t.observation.text}") for t in traj.turns]


def training_grams(traj: Trajectory, cfg: PoolsConfig) -> list[np.ndarray]:
    """What each turn (and the task) of a training trajectory offers to contain."""
    n = cfg.decontamination.ngram_words
    return [text_grams(t, n, 0) for t in [*turn_texts(traj), normalise(traj.task)]]


def eval_pool_grams(traj: Trajectory, cfg: PoolsConfig) -> EvalGrams:
    """The n-grams of an eval-pool trajectory's turns and task, keyed like `--eval` entries."""
    dc = cfg.decontamination
    out: EvalGrams = []
    for i, text in enumerate([normalise(traj.task), *turn_texts(traj)]):
        grams = ngram_hashes(text, dc.ngram_words, dc.min_turn_words)
        if len(grams):
            out.append((f"{traj.id}#{i if i else 'task'}", grams.tolist()))
    return out


class EvalTurnMatcher:
    """Finds the evaluation sample (if any) a training record overlaps, and how."""

    def __init__(
        self,
        cfg: PoolsConfig,
        eval_turns: list[tuple[str, int, list[int]]],
        bands_rows: tuple[int, int] | None = None,
        eval_grams: EvalGrams | None = None,
    ) -> None:
        self.cfg = cfg
        self.index = NearDuplicateIndex(cfg.decontamination.threshold, cfg.dedup.num_perm, bands_rows)
        for eval_id, turn_index, sig in eval_turns:
            self.index.add(f"{eval_id}#{turn_index}", sig)
        self.contained = ContainmentIndex.of(cfg.decontamination.containment, eval_grams or [])

    def __bool__(self) -> bool:
        return bool(len(self.index) or len(self.contained))

    def match(self, texts: list[str]) -> str:
        """Near-duplicate test of normalised texts: the evaluation sample id, or ""."""
        if not len(self.index):
            return ""
        dc = self.cfg.decontamination
        texts = [t for t in texts if len(t.split()) >= dc.min_turn_words]
        if not texts:
            return ""
        for sig in signatures(
            texts, num_perm=self.cfg.dedup.num_perm, seed=self.cfg.dedup.seed, width=dc.shingle_words
        ):
            hits = self.index.query(sig)
            if hits:
                return hits[0].rsplit("#", 1)[0]
        return ""

    def contains(self, grams: Sequence[np.ndarray]) -> str:
        """Containment test: "<evaluation sample id>: contains turn N|task", or ""."""
        for g in grams:
            key = self.contained.contained_in(g)
            if key:
                eval_id, what = key.rsplit("#", 1)
                return f"{eval_id}: contains its {'task' if what == 'task' else 'turn ' + what}"
        return ""

    def match_text(self, normalised: str) -> str:
        """A knowledge document against the evaluation sets."""
        if not self:
            return ""
        near = self.match([normalised])
        if near:
            return f"{near}: near-duplicates a turn"
        return self.contains([text_grams(normalised, self.cfg.decontamination.ngram_words, 0)])

    def match_trajectory(self, traj: Trajectory) -> str:
        # Without evaluation data there is nothing to match: skip normalising every turn.
        if not self:
            return ""
        near = self.match(turn_texts(traj))
        if near:
            return f"{near}: near-duplicates a turn"
        return self.contains(training_grams(traj, self.cfg)) if len(self.contained) else ""


class EvalPoolGrams(beam.DoFn):
    """Reads: a spilled kept file + the group -> pool side input. Writes: the n-grams of every
    record assigned to the eval pool, so training records can be checked against them."""

    def __init__(self, cfg: PoolsConfig) -> None:
        self.cfg = cfg

    def process(
        self,
        element: Any,
        group_pool: dict[str, str],
        clusters: dict[str, tuple[str, bool]],
        contaminated_list: list[tuple[str, str]],
    ) -> Iterator[tuple[str, list[int]]]:
        from pipelines.stages.assign import record_group

        if not isinstance(element, str) or EVAL_POOL not in group_pool.values():
            return
        # Only records that will be pooled: a duplicate or contaminated one leaves nothing to protect.
        gone = {rid for rid, _ in contaminated_list}
        gone.update(rid for rid, (rep, _) in clusters.items() if rep != rid)
        table = read_ipc(element)
        group_by = self.cfg.assignment.group_by
        rows = [
            i
            for i, r in enumerate(table.select(["id", "source", "task"]).to_pylist())
            if r["id"] not in gone
            and group_pool.get(record_group(Source.from_record(r["source"]), r["task"], r["id"], group_by)[0])
            == EVAL_POOL
        ]
        if not rows:
            return
        chosen = table.take(pa.array(rows)).drop_columns(["_content", "_signature"])
        for record in chosen.to_pylist():
            yield from eval_pool_grams(Trajectory.from_record(record), self.cfg)
