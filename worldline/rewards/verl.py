"""The RL reward as verl calls it: `compute_score(data_source, solution_str, ground_truth, extra_info)`.

reward = rubric_weight * rubric + rule_weight * 25 * rule, where rubric is the judge's mean score x 5
(5..25) and rule the 0/1 verdict of the turn's rule verifiers; the weights come from the row's
`reward_spec` (9:1 when the turn has rules, 1:0 without). The reward is 0 when the rollout has no
`<predicted_observation>` block or the judge's answer cannot be parsed. Only the prediction reaches
the judge (reasoning stripped, last block taken).

verl configuration (see docs/judging.md):
    custom_reward_function.path=<site-packages>/worldline/rewards/verl.py
    custom_reward_function.name=compute_score          # or compute_score_batch with reward_manager=batch,
                                                       # or compute_score_async for verl's reward loop

The judge endpoint comes from the WORLDLINE_LLM_* environment of the reward worker; the judge sees
the history and current action when the row's `extra_info` carries them (`prompt` / `messages` as chat
messages, or `judge_context` as the user prompt text).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from worldline.judge.judge import Judge, JudgeConfig, JudgeResult
from worldline.judge.samples import JudgeSample, from_chat
from worldline.llm import LLMClient, LLMConfig, SyncLLMClient
from worldline.llm.parsing import parse_predicted_observation
from worldline.rewards.rules import RuleOutcome, verify

RULE_SCALE = 25.0
DEFAULT_RUBRIC_WEIGHT = 0.9
DEFAULT_RULE_WEIGHT = 0.1

_lock = threading.Lock()
_shared: dict[str, Any] = {}


def configure(llm_config: LLMConfig | None = None, judge_config: JudgeConfig | None = None) -> None:
    """Replace the process-wide judge client (tests, or callers that configure in code)."""
    with _lock:
        old = _shared.pop("client", None)
        if old is not None:
            old.close()
        old_async = _shared.pop("async_client", None)
        if old_async is not None and old_async.cache is not None:
            old_async.cache.close()  # its HTTP clients belong to event loops that are gone
        _shared["llm_config"] = llm_config
        _shared["judge_config"] = judge_config


def _async_judge() -> Judge:
    """The judge for coroutine callers: one LLMClient (it keeps per-event-loop HTTP resources)."""
    with _lock:
        client = _shared.get("async_client")
        if client is None:
            config = _shared.get("llm_config") or LLMConfig.from_env()
            client = LLMClient(config)  # raises LLMNotConfigured naming WORLDLINE_LLM_BASE_URL
            _shared["async_client"] = client
        return Judge(client, _shared.get("judge_config"))


def _judge() -> tuple[SyncLLMClient, Judge]:
    with _lock:
        client = _shared.get("client")
        if client is None:
            config = _shared.get("llm_config") or LLMConfig.from_env()
            config.require_endpoint()  # LLMNotConfigured names WORLDLINE_LLM_BASE_URL
            client = SyncLLMClient(config)
            _shared["client"] = client
        return client, Judge(client.client, _shared.get("judge_config"))


def _spec(extra_info: Mapping[str, Any]) -> dict[str, Any]:
    raw = extra_info.get("reward_spec")
    if isinstance(raw, str) and raw.strip():
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return dict(raw) if isinstance(raw, Mapping) else {}


def rules_of(
    spec: Mapping[str, Any], extra_info: Mapping[str, Any], ground_truth: str
) -> list[dict[str, Any]]:
    """The row's rule checks: `reward_spec.rule.checks`, else an exact match for `verifier=exact_match`."""
    rule = spec.get("rule") if isinstance(spec.get("rule"), Mapping) else {}
    checks = rule.get("checks") if isinstance(rule, Mapping) else None
    if isinstance(checks, list) and checks:
        return [dict(c) for c in checks if isinstance(c, Mapping)]
    verifier = (rule.get("verifier") if isinstance(rule, Mapping) else None) or extra_info.get("verifier")
    if verifier == "exact_match":
        return [{"kind": "exact_match", "expected": ground_truth, "reason": "deterministic content"}]
    return []


def weights_of(spec: Mapping[str, Any], has_rule: bool) -> tuple[float, float]:
    if not has_rule:
        return 1.0, 0.0
    weights = spec.get("weights") if isinstance(spec.get("weights"), Mapping) else {}
    rubric = float(weights.get("rubric", DEFAULT_RUBRIC_WEIGHT)) if isinstance(weights, Mapping) else 0.9
    rule = float(weights.get("rule", DEFAULT_RULE_WEIGHT)) if isinstance(weights, Mapping) else 0.1
    return rubric, rule


def _context_messages(extra_info: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    for key in ("prompt", "messages"):
        value = extra_info.get(key)
        # Parquet lists arrive as lists, tuples or numpy object arrays depending on the loader.
        if value is not None and not isinstance(value, str | bytes | Mapping) and hasattr(value, "__iter__"):
            messages = [m for m in value if isinstance(m, Mapping)]
            if messages:
                return messages
    context = extra_info.get("judge_context")
    return [{"role": "user", "content": context}] if isinstance(context, str) else []


def _domain(data_source: str, extra_info: Mapping[str, Any]) -> str:
    domain = extra_info.get("domain")
    return str(domain) if domain else str(data_source).rsplit("/", 1)[-1]


def _sample(
    data_source: str, solution_str: str, ground_truth: str, extra_info: Mapping[str, Any]
) -> JudgeSample:
    return from_chat(
        _context_messages(extra_info),
        ground_truth,
        solution_str,
        domain=_domain(data_source, extra_info),
        sample_id=str(extra_info.get("index", extra_info.get("trajectory_id", ""))),
    )


def combine(
    judged: JudgeResult | None, rule: RuleOutcome | None, spec: Mapping[str, Any], *, has_prediction: bool
) -> dict[str, Any]:
    """The reward dict verl logs: `score` plus its parts (all numbers, the same keys for every row)."""
    rubric_weight, rule_weight = weights_of(spec, rule is not None)
    rubric = judged.rubric_reward if judged is not None else 0.0
    rule_score = float(rule.score) if rule is not None else 0.0
    judge_failed = judged is None or judged.failed
    score = (
        0.0
        if (not has_prediction or judge_failed)
        else rubric_weight * rubric + rule_weight * RULE_SCALE * rule_score
    )
    return {
        "score": score,
        "rubric": rubric,
        "rule": rule_score,
        "has_rule": float(rule is not None),
        "rubric_weight": rubric_weight,
        "rule_weight": rule_weight,
        "judge_failed": float(has_prediction and judge_failed),
        "no_prediction": float(not has_prediction),
        "normalised": judged.normalised if judged is not None and judged.normalised is not None else 0.0,
    }


def _prepare(
    data_source: str, solution_str: str, ground_truth: str, extra_info: Mapping[str, Any] | None
) -> tuple[JudgeSample | None, RuleOutcome | None, dict[str, Any]]:
    info = dict(extra_info or {})
    spec = _spec(info)
    prediction = parse_predicted_observation(solution_str or "")
    rules = rules_of(spec, info, ground_truth)
    rule = verify(prediction.observation or "", rules) if rules else None
    sample = _sample(data_source, solution_str or "", ground_truth, info) if prediction.ok else None
    return sample, rule, spec


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's per-row reward function (NaiveRewardManager); returns {'score': ..., parts...}."""
    sample, rule, spec = _prepare(data_source, solution_str, ground_truth, extra_info)
    if sample is None:
        return combine(None, rule, spec, has_prediction=False)
    client, judge = _judge()
    judged = client.run_coroutine(judge.judge(sample))
    return combine(judged, rule, spec, has_prediction=True)


async def compute_score_async(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """`compute_score` as a coroutine, for verl's reward loop, which awaits async reward functions
    and so judges many rollouts at once (bounded by WORLDLINE_LLM_CONCURRENCY)."""
    sample, rule, spec = _prepare(data_source, solution_str, ground_truth, extra_info)
    if sample is None:
        return combine(None, rule, spec, has_prediction=False)
    judged = await _async_judge().judge(sample)
    return combine(judged, rule, spec, has_prediction=True)


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[str],
    extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's batch reward function (BatchRewardManager): every row's judge call runs concurrently."""
    infos: Sequence[Mapping[str, Any] | None] = (
        extra_infos if extra_infos is not None else [None] * len(data_sources)
    )
    prepared = [
        _prepare(source, solution, truth, info)
        for source, solution, truth, info in zip(
            data_sources, solution_strs, ground_truths, infos, strict=True
        )
    ]
    to_judge = [sample for sample, _, _ in prepared if sample is not None]
    judged: list[JudgeResult | None] = []
    if to_judge:
        client, judge = _judge()
        batch = client.run_coroutine(judge.judge_many(to_judge))
        if batch.error is not None:
            raise batch.error  # a training run must not silently learn from zero rewards
        judged = batch.results
    judged_iter = iter(judged)
    out = []
    for sample, rule, spec in prepared:
        if sample is None:
            out.append(combine(None, rule, spec, has_prediction=False))
        else:
            out.append(combine(next(judged_iter), rule, spec, has_prediction=True))
    return out
