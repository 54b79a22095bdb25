"""The judge's content tiers checked by rule: does a prediction reproduce the deterministic content?

The judge's rubric grades three tiers (deterministic content exactly, pre-existing environment
content and runtime metadata by format and plausibility). `content_tiers` checks the first tier
without a model call. With the turn's replay span labels (schemas/span_labels.py) the labels decide:
exact text on deterministic spans, the format of the real value on runtime and variable spans. Without
labels the rule verifier's metadata patterns (UUIDs, dates, times, addresses) mark what may differ.
The Judge records the outcome in `JudgeResult.meta["content_tiers"]` for samples that have labels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from schemas.span_labels import TurnLabels
from worldline.rewards.rules import _masked_pattern
from worldline.rewards.spans import match_with_labels, normalise_text

TierSource = Literal["labels", "patterns"]


@dataclass(frozen=True)
class TierMatch:
    """`exact`: the deterministic content matches and every other span has its format; `source`
    says whether replay labels or the metadata patterns decided what is deterministic."""

    exact: bool
    source: TierSource
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def content_tiers(prediction: str, reference: str, labels: TurnLabels | None = None) -> TierMatch:
    """Check PREDICTION against the real observation REFERENCE (see the module docstring). Labels that
    do not cover REFERENCE, or whose replay diverged, are not used."""
    if labels is not None and not labels.diverged:
        check = match_with_labels(prediction, reference, labels)
        if check is not None:
            return TierMatch(check.passed, "labels", check.reason)
    pattern = _masked_pattern(normalise_text(reference))
    ok = re.fullmatch(pattern, normalise_text(prediction), re.DOTALL) is not None
    return TierMatch(ok, "patterns", "matches" if ok else "deterministic text or metadata format differs")


def sample_labels(
    meta: Mapping[str, Any], span_labels: Mapping[tuple[str, int], TurnLabels] | None
) -> TurnLabels | None:
    """The labels of a sample, found by its meta's `trajectory_id` and 0-based `turn`; else, for a
    sample of an AgentWorldBench export (whose `id` is the trajectory's id), by `id` and the 1-based
    `turn_idx`."""
    if not span_labels:
        return None
    tid, turn = meta.get("trajectory_id"), meta.get("turn")
    if tid is None or turn is None:
        tid, index = meta.get("id"), meta.get("turn_idx")
        if tid is None or not isinstance(index, int) or isinstance(index, bool):
            return None
        turn = index - 1
    return span_labels.get((str(tid), int(turn)))
