"""Stage decontaminate: find training records whose turns near-duplicate an evaluation turn.

Reads: a kept trajectory (or knowledge document) and the evaluation sets' per-turn signatures.
Writes: (record id, evaluation sample id) for each contaminated record; the render stage removes
them (stage `decontamination`, reason `eval_overlap`).
"""

from __future__ import annotations

from pipelines.config import PoolsConfig
from pipelines.minhash import NearDuplicateIndex, normalise, signatures
from pipelines.stages import Stage
from schemas.trajectory import Trajectory

STAGE = Stage(
    name="decontaminate",
    reads=("kept Trajectory", "knowledge document", "evaluation turn signatures"),
    writes=("contaminated (id, evaluation sample id)",),
    counters=("dropped.eval_overlap",),
)


def turn_texts(traj: Trajectory) -> list[str]:
    return [normalise(f"{t.action.text}\n{t.observation.text}") for t in traj.turns]


class EvalTurnMatcher:
    """Finds the evaluation sample (if any) whose turn a training turn near-duplicates."""

    def __init__(
        self,
        cfg: PoolsConfig,
        eval_turns: list[tuple[str, int, list[int]]],
        bands_rows: tuple[int, int] | None = None,
    ) -> None:
        self.cfg = cfg
        self.index = NearDuplicateIndex(cfg.decontamination.threshold, cfg.dedup.num_perm, bands_rows)
        for eval_id, turn_index, sig in eval_turns:
            self.index.add(f"{eval_id}#{turn_index}", sig)

    def match(self, texts: list[str]) -> str:
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

    def match_trajectory(self, traj: Trajectory) -> str:
        # Without evaluation turns there is nothing to match: skip normalising every turn.
        return self.match(turn_texts(traj)) if len(self.index) else ""
