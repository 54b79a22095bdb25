"""The reference-grounded judge on the shared LLM client: one sample -> five scores, concurrently.

Each sample gets up to `attempts` judge calls until one parses (AgentWorldBench retries three
times); attempt k is sent with `sample_index=k`, so every attempt is its own cache entry and a rerun
replays the same sequence from the cache with zero calls. A sample that never parses, or whose
prediction has no `<predicted_observation>` block, is a failure: it is kept, counted and reported,
and its rubric reward is 0. BudgetExceeded is not a sample failure: it stops the batch, and every
sample finished before it keeps its result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from schemas.span_labels import TurnLabels
from schemas.worldmodel import SCORING_DIMENSIONS, parse_observation
from worldline.judge.parsing import (
    JudgeAnswer,
    OutOfRangePolicy,
    normalise,
    parse_judge_answer,
    parse_pairwise_answer,
)
from worldline.judge.prompts import has_judge_prompt, judge_messages, pairwise_messages
from worldline.judge.samples import JudgeSample
from worldline.judge.tiers import content_tiers, sample_labels
from worldline.llm import (
    BudgetExceeded,
    ChatRequest,
    ChatResult,
    LLMCallFailed,
    LLMClient,
    LLMConfig,
    RequestRejected,
    Role,
)

RUBRIC_MIN, RUBRIC_MAX = 5.0, 25.0


@dataclass(frozen=True)
class JudgeConfig:
    """How the judge calls and reads the judge model.

    `attempts`: calls per sample until one parses. `out_of_range`: "fail" (default) or "clamp" scores
    outside 1..5. `require_block`: a prediction without a `<predicted_observation>` block fails
    (True) or is judged as the answer minus reasoning, as AgentWorldBench's evaluator does (False).
    `concurrency`: samples judged at once (None: the client's bound). `model`: overrides the judge
    role's model.
    """

    attempts: int = 3
    temperature: float = 0.6
    max_tokens: int | None = 16384
    out_of_range: OutOfRangePolicy = "fail"
    require_block: bool = True
    concurrency: int | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"JudgeConfig.attempts must be >= 1, got {self.attempts}")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"JudgeConfig.concurrency must be >= 1, got {self.concurrency}")


@dataclass
class CallCost:
    """Calls, cache hits, tokens and cost spent on one sample."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def merge(self, other: CallCost) -> None:
        self.calls += other.calls
        self.cache_hits += other.cache_hits
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd

    def add(self, result: ChatResult, client: LLMClient) -> None:
        if result.cached:
            self.cache_hits += 1
            return
        self.calls += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.cost_usd += client.config.price_for(result.model).cost(
            result.prompt_tokens, result.completion_tokens
        )


@dataclass
class JudgeResult:
    """The judgement of one sample. `failure` is "" on success, else a code: `no_prediction:<why>`,
    `parse:<why>` (no attempt parsed), `call_failed` (the endpoint never answered), `call_rejected`
    (it refused the request, e.g. too long) or `unknown_domain:<name>` (no judge prompt)."""

    sample_id: str
    domain: str
    scores: dict[str, float] | None
    raw_mean: float | None
    normalised: float | None
    failure: str
    prediction: str | None
    attempts: int = 0
    strengths: list[str] = field(default_factory=list)
    weaknesses: list[str] = field(default_factory=list)
    clamped: list[str] = field(default_factory=list)
    judge_output: str = ""
    cost: CallCost = field(default_factory=CallCost)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return bool(self.failure)

    @property
    def parse_failed(self) -> bool:
        return self.failure.startswith("parse:")

    @property
    def rubric_reward(self) -> float:
        """The RL rubric reward: mean score x 5 (5..25), 0 when the judgement failed."""
        return 0.0 if self.raw_mean is None else self.raw_mean * 5.0

    def to_json(self) -> dict[str, Any]:
        record = asdict(self)
        record["failed"] = self.failed
        record["parse_failed"] = self.parse_failed
        record["rubric_reward"] = self.rubric_reward
        return record

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> JudgeResult:
        known = {name for name in cls.__dataclass_fields__}
        values = {key: value for key, value in record.items() if key in known}
        values["cost"] = CallCost(**(record.get("cost") or {}))
        values.setdefault("prediction", None)  # projected out of in-memory copies of large runs
        return cls(**values)


@dataclass
class JudgeBatch:
    """Results in input order (None where the batch stopped before the sample), the budget message
    when the budget stopped it, and the client's usage."""

    results: list[JudgeResult | None]
    stopped: str | None
    usage: dict[str, Any]
    error: BudgetExceeded | None = None

    @property
    def finished(self) -> list[JudgeResult]:
        return [result for result in self.results if result is not None]


class Judge:
    """Judges samples with one LLMClient (shared: its cache, budget and concurrency bound apply).

    `span_labels` (replay span labels by (trajectory id, turn)): a sample whose meta names a labelled
    turn gets `meta["content_tiers"]`, the rule check of its deterministic content (judge/tiers.py)."""

    def __init__(
        self,
        client: LLMClient,
        config: JudgeConfig | None = None,
        span_labels: Mapping[tuple[str, int], TurnLabels] | None = None,
    ) -> None:
        self.client = client
        self.config = config or JudgeConfig()
        self.span_labels = span_labels

    def _request(self, messages: list[dict[str, str]], attempt: int) -> ChatRequest:
        return ChatRequest(
            role=Role.JUDGE,
            messages=messages,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            sample_index=attempt,
            model=self.config.model,
        )

    async def judge(self, sample: JudgeSample) -> JudgeResult:
        """Judge one sample. Raises BudgetExceeded (nothing recorded for this sample) when the budget
        runs out before its first call; a budget hit on a later attempt also stops it."""
        prediction = sample.prediction(require_block=self.config.require_block)
        base = JudgeResult(
            sample_id=sample.sample_id,
            domain=sample.domain,
            scores=None,
            raw_mean=None,
            normalised=None,
            failure="",
            prediction=prediction.observation,
            meta=dict(sample.meta),
        )
        if prediction.observation is None:
            base.failure = f"no_prediction:{prediction.reason}"
            return base
        labels = sample_labels(sample.meta, self.span_labels)
        if labels is not None:
            # The labels are of the observation; a ground truth in the evaluator's form carries the
            # observation marker line before it.
            truth = parse_observation(sample.ground_truth)
            tiers = content_tiers(
                prediction.observation, sample.ground_truth if truth is None else truth, labels
            )
            base.meta["content_tiers"] = tiers.to_json()
        if not has_judge_prompt(sample.domain):
            base.failure = f"unknown_domain:{sample.domain}"
            return base
        messages = judge_messages(
            sample.domain,
            list(sample.history),
            sample.current_prompt,
            prediction.observation,
            sample.ground_truth,
        )
        answer: JudgeAnswer | None = None
        for attempt in range(self.config.attempts):
            try:
                result = await self.client.run(self._request(messages, attempt))
            except LLMCallFailed as error:
                base.attempts = attempt + 1
                # A rejected request (4xx: too long, bad model) fails the same way again; a transport
                # failure is worth a retry by the next run.
                base.failure = "call_rejected" if isinstance(error, RequestRejected) else "call_failed"
                base.judge_output = f"{type(error).__name__}: {error}"[:2000]
                return base
            base.cost.add(result, self.client)
            base.attempts = attempt + 1
            base.judge_output = result.text
            answer = parse_judge_answer(result.text, out_of_range=self.config.out_of_range)
            if answer.ok:
                break
        assert answer is not None
        base.strengths, base.weaknesses, base.clamped = (
            answer.strengths,
            answer.weaknesses,
            list(answer.clamped),
        )
        if answer.scores is None:
            base.failure = f"parse:{answer.reason}"
            return base
        base.scores = {d: answer.scores[d] for d in SCORING_DIMENSIONS}
        base.raw_mean = answer.mean
        base.normalised = normalise(answer.mean) if answer.mean is not None else None
        return base

    async def compare(self, sample: JudgeSample, first: str, second: str) -> tuple[str | None, CallCost]:
        """Which of two predictions is closer to the ground truth: 'A' (first), 'B' or None (unparsed)."""
        messages = pairwise_messages(
            sample.domain, list(sample.history), sample.current_prompt, first, second, sample.ground_truth
        )
        cost = CallCost()
        for attempt in range(self.config.attempts):
            result = await self.client.run(self._request(messages, attempt))
            cost.add(result, self.client)
            winner = parse_pairwise_answer(result.text)
            if winner is not None:
                return winner, cost
        return None, cost

    async def judge_many(
        self,
        samples: Iterable[JudgeSample],
        *,
        on_result: Callable[[JudgeResult], None] | None = None,
    ) -> JudgeBatch:
        """Judge samples concurrently (`config.concurrency` workers, default the client's bound).

        `on_result` is called as each sample finishes (write it out there: that is what makes a run
        resumable). A BudgetExceeded stops new samples; samples in flight finish and are reported.
        """
        items = list(samples)
        results: list[JudgeResult | None] = [None] * len(items)
        workers = min(self.config.concurrency or self.client.config.concurrency, max(len(items), 1))
        queue = iter(enumerate(items))
        stopped: list[BudgetExceeded] = []

        async def worker() -> None:
            for index, sample in queue:
                if stopped:
                    return
                try:
                    result = await self.judge(sample)
                except BudgetExceeded as error:
                    stopped.append(error)
                    return
                results[index] = result
                if on_result is not None:
                    on_result(result)

        await asyncio.gather(*(worker() for _ in range(workers)))
        error = stopped[0] if stopped else None
        return JudgeBatch(results, str(error) if error else None, self.client.usage, error)


async def judge_batch(
    samples: Sequence[JudgeSample],
    llm_config: LLMConfig | None = None,
    judge_config: JudgeConfig | None = None,
    *,
    client: LLMClient | None = None,
    on_result: Callable[[JudgeResult], None] | None = None,
) -> JudgeBatch:
    """Judge `samples` (all of one or several domains) and return per-sample results plus usage.

    The Python API for callers such as autoresearch. Pass `client` to share a cache/budget across
    calls; otherwise a client is built from `llm_config` (default: the WORLDLINE_LLM_* environment)
    and closed afterwards.
    """
    own = client is None
    active = client if client is not None else LLMClient(llm_config)
    try:
        return await Judge(active, judge_config).judge_many(samples, on_result=on_result)
    finally:
        if own:
            await active.aclose()


def judge_batch_sync(
    samples: Sequence[JudgeSample],
    llm_config: LLMConfig | None = None,
    judge_config: JudgeConfig | None = None,
    *,
    on_result: Callable[[JudgeResult], None] | None = None,
) -> JudgeBatch:
    """Blocking `judge_batch` for scripts and notebooks (runs its own event loop)."""
    return asyncio.run(judge_batch(samples, llm_config, judge_config, on_result=on_result))


def with_concurrency(config: JudgeConfig, concurrency: int | None) -> JudgeConfig:
    return config if concurrency is None else replace(config, concurrency=concurrency)
