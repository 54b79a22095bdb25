"""Scoring a template: the judge on the world model's predictions, per-candidate cost, noise floor.

A candidate's score is the mean normalised judge score (0..100) over its judged turns; a turn whose
prediction has no `<predicted_observation>` block scores 0 (the template failed to get the format
across); a turn the judge never answered parseably is excluded and counted. The noise floor is how far
two independent scorings of one template differ.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, cast

from prompt_autoresearch.data import EvalItem
from schemas.templates import Template
from schemas.worldmodel import SCORING_DIMENSIONS
from worldline.judge import JudgeResult, judge_messages
from worldline.llm import ChatRequest, ChatResult, LLMClient


@dataclass
class Meter:
    """Calls, tokens and cost one candidate needed, counted the same whether a call was sent or
    answered from the cache, so a resumed candidate's ledger row equals an uninterrupted one's."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, result: ChatResult, client: LLMClient) -> None:
        self.calls += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.cost_usd += client.config.price_for(result.model).cost(
            result.prompt_tokens, result.completion_tokens
        )


class MeteredClient:
    """What the shared Judge needs of a client (`run`, `config`), recording every result in a Meter."""

    def __init__(self, client: LLMClient, meter: Meter, replica: int, attempts: int) -> None:
        self.client, self.meter, self.replica, self.attempts = client, meter, replica, attempts
        self.config = client.config

    async def run(self, request: ChatRequest) -> ChatResult:
        # A second scoring of the same prediction is an independent judge sample: its attempts get
        # their own sample indices (and cache entries) after the first scoring's.
        request = replace(request, sample_index=request.sample_index + self.replica * self.attempts)
        result = await self.client.run(request)
        self.meter.add(result, self.client)
        return result


@dataclass
class Evaluation:
    """A template's scores on a list of eval turns."""

    score: float | None
    dimensions: dict[str, float | None]
    valid: int
    failed: int
    parse_failures: int
    samples: int
    item_scores: list[float | None]
    worst: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


CHARS_PER_TOKEN = 4


def judge_messages_for(item: EvalItem, template: Template) -> list[dict[str, str]]:
    """The judge's messages for `item` with the ground truth standing in for the prediction."""
    sample = item.judge_sample(template, "")
    return judge_messages(
        sample.domain, list(sample.history), sample.current_prompt, sample.ground_truth, sample.ground_truth
    )


def template_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _item_score(result: JudgeResult) -> float | None:
    """0..100 for a judged turn, 0 when the world model gave no prediction block, None when the judge
    failed (not the template's fault: excluded from the mean and counted)."""
    if result.normalised is not None:
        return float(result.normalised)
    if result.failure.startswith("no_prediction"):
        return 0.0
    return None


def summarise(items: Sequence[EvalItem], results: Sequence[JudgeResult], worst_k: int) -> Evaluation:
    scores = [_item_score(r) for r in results]
    judged = [s for s in scores if s is not None]
    valid = [r for r in results if r.scores is not None]
    dims: dict[str, float | None] = {
        d: (statistics.fmean(r.scores[d] for r in valid if r.scores) if valid else None)
        for d in SCORING_DIMENSIONS
    }
    order = sorted(
        (i for i, s in enumerate(scores) if s is not None), key=lambda i: (cast(float, scores[i]), i)
    )
    worst = []
    for i in order[:worst_k]:
        item, result = items[i], results[i]
        turn = item.trajectory.turns[item.turn - 1]
        worst.append(
            {
                "item": item.key,
                "score": scores[i],
                "action": turn.action.text,
                "truth": turn.observation.text,
                "prediction": result.prediction or "",
                "weaknesses": list(result.weaknesses),
                "failure": result.failure,
            }
        )
    return Evaluation(
        score=statistics.fmean(judged) if judged else None,
        dimensions=dims,
        valid=len(valid),
        failed=len(results) - len(valid),
        parse_failures=sum(1 for r in results if r.parse_failed),
        samples=len(results),
        item_scores=scores,
        worst=worst,
    )


def noise_floor(first: Evaluation, second: Evaluation) -> float:
    """How far two scorings of the same template can differ by chance: the larger of the observed
    difference of the two means and the standard error of the paired per-turn differences."""
    if first.score is None or second.score is None:
        return 0.0
    observed = abs(first.score - second.score)
    diffs = [
        a - b
        for a, b in zip(first.item_scores, second.item_scores, strict=True)
        if a is not None and b is not None
    ]
    spread = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) >= 2 else 0.0
    return max(observed, spread)
