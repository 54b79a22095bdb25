"""Loss-mask categories for CPT (paper Table 3) and the token spans a partial share keeps.

Decisions the paper leaves open, all configurable in `LossMaskConfig`:
- precedence: categories are tried in `precedence` order and the first matching signature wins.
  The default tries the most specific, lowest-share signatures first (echo, then boilerplate, then
  transform): echo is nested inside boilerplate, and a turn that matches several signatures is
  treated as the least informative of them. With the default shares this makes the assigned share
  the smallest share among all matching signatures.
- short: an observation of at most `short_observation_chars` characters is "short".
- which tokens: a partial share keeps a contiguous run of ceil(share * n) tokens of the turn (at
  least one when the share is positive), at the end ("tail", default) or start ("head").
- runtime spans: where replay span labels exist for a turn, the characters they mark `runtime`
  inside a kept span get `runtime_span_weight` instead of weight 1 (`runtime_weighted_spans`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipelines.config import FilterConfig, LossMaskConfig
from schemas.span_labels import SpanLabel, TurnLabels
from schemas.turn_facts import facts

_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class TurnOverlap:
    """The four statistics Table 3's signatures are written in."""

    overlap: float  # OL = |A ∩ O| / |A|
    novelty: float  # Nov = |O \ A| / |O|
    jaccard: float  # Jac = |A ∩ O| / |A ∪ O|
    ratio: float  # R = len(obs) / len(act), in characters
    obs_chars: int


def word_set(text: str) -> set[str]:
    """Lowercased, de-duplicated words."""
    return set(_WORD.findall(text.lower()))


def turn_overlap(action: str, observation: str) -> TurnOverlap:
    a, o = word_set(action), word_set(observation)
    inter = len(a & o)
    union = len(a | o)
    return TurnOverlap(
        overlap=inter / len(a) if a else 0.0,
        novelty=len(o - a) / len(o) if o else 0.0,
        jaccard=inter / union if union else 0.0,
        # An empty action with a non-empty observation is unboundedly expansive.
        ratio=len(observation) / len(action) if action else (math.inf if observation else 0.0),
        obs_chars=len(observation),
    )


def signatures(cfg: LossMaskConfig) -> dict[str, Callable[[TurnOverlap], bool]]:
    """Table 3's signatures as predicates (thresholds exactly as published)."""
    return {
        "retrieval": lambda s: s.novelty >= 0.6 and s.ratio > 1,
        "expansion": lambda s: s.overlap >= 0.5 and s.novelty >= 0.5 and s.ratio > 1.5,
        "action": lambda s: s.novelty >= 0.5 and (s.ratio <= 1 or s.obs_chars <= cfg.short_observation_chars),
        "transform": lambda s: s.novelty < 0.5 and s.ratio < 1,
        "boilerplate": lambda s: s.overlap >= 0.5 and s.novelty < 0.5,
        "echo": lambda s: s.overlap >= 0.7 and s.novelty < 0.3,
    }


def matching_categories(action: str, observation: str, cfg: LossMaskConfig) -> list[str]:
    """Every category whose signature the turn satisfies (precedence order)."""
    stats = turn_overlap(action, observation)
    sigs = signatures(cfg)
    return [name for name in cfg.precedence if sigs[name](stats)]


def loss_mask_category(action: str, observation: str, cfg: LossMaskConfig) -> tuple[str, float]:
    """The turn's category and its share of turn tokens in the loss."""
    matches = matching_categories(action, observation, cfg)
    category = matches[0] if matches else "other"
    return category, cfg.shares[category]


def kept_token_count(n_tokens: int, share: float) -> int:
    """How many of a turn's n tokens stay in the loss: ceil(share * n), at least one if share > 0."""
    if n_tokens <= 0 or share <= 0:
        return 0
    return min(n_tokens, max(1, math.ceil(share * n_tokens - 1e-9)))


def kept_token_range(n_tokens: int, share: float, keep: str) -> tuple[int, int]:
    """Token index range [start, end) of the turn that stays in the loss."""
    k = kept_token_count(n_tokens, share)
    return (n_tokens - k, n_tokens) if keep == "tail" else (0, k)


MASKED = "harness"
"""The loss-mask category of a turn masked for a harness fact (share 0: context, never a target)."""


def harness_mask(metadata: dict[str, Any], cfg: FilterConfig) -> str | None:
    """The harness fact for which a turn is masked (filters.harness_facts says "mask"), else None.
    One rule for the filter stage's counts and the renderers (CPT span, SFT target, RL turn)."""
    for fact in facts(metadata):
        if cfg.harness_action(fact) == "mask":
            return fact
    return None


def runtime_weighted_spans(
    span: dict[str, Any], observation_start: int, labels: TurnLabels | None, weight: float
) -> list[dict[str, Any]]:
    """SPAN (a CPT loss span: start, end, weight, ...) split where it crosses the runtime spans of
    LABELS, which hold offsets into the turn's observation text, found at OBSERVATION_START of the
    row's text. Runtime pieces get WEIGHT (times the span's own weight), the rest keep the span's
    weight; the pieces are in order, cover SPAN exactly and keep its other fields. Without labels,
    or with weight 1, SPAN is returned unchanged."""
    if labels is None or weight == 1.0:
        return [span]
    start, end, base = int(span["start"]), int(span["end"]), float(span["weight"])
    cuts: list[tuple[int, int]] = []
    for s in labels.spans:
        if s.label != SpanLabel.RUNTIME:
            continue
        lo, hi = max(start, observation_start + s.start), min(end, observation_start + s.end)
        if hi > lo:
            cuts.append((lo, hi))
    if not cuts:
        return [span]
    pieces: list[dict[str, Any]] = []
    pos = start
    for lo, hi in cuts:
        if lo > pos:
            pieces.append({**span, "start": pos, "end": lo, "weight": base})
        if pieces and pieces[-1]["end"] == lo and pieces[-1]["weight"] == base * weight:
            pieces[-1] = {**pieces[-1], "end": hi}
        else:
            pieces.append({**span, "start": lo, "end": hi, "weight": base * weight})
        pos = hi
    if end > pos:
        pieces.append({**span, "start": pos, "end": end, "weight": base})
    return pieces
