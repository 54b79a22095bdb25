"""LLM-backed align and score, through the shared client (role `cleaner`).

They run only where the deterministic path is unsure: an unknown domain after alignment, or a quality
score within `unsure_band` of the threshold. Any LLM failure falls back to the deterministic answer and
is recorded in the trajectory's metadata, so an outage never stops a clean.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from typing import Any

from schemas import Domain, Trajectory
from schemas.domains import is_registered, registered_domains
from schemas.worldmodel import turn_heading
from worldline.llm import LLMConfig, LLMError, Role, SyncLLMClient, endpoint_configured, parse_json_object

_SAMPLE_TURNS = 8  # turns shown to the LLM, spread over the whole trajectory
_PREVIEW_CHARS = 600


def domain_prompt() -> str:
    """The domain classifier's system prompt: every registered domain with its `classifier_hint`."""
    domains = ", ".join(
        f"{s.value} ({s.classifier_hint})" if s.classifier_hint else s.value for s in registered_domains()
    )
    return (
        f"You classify agent interaction logs into one environment domain. Domains: {domains}. "
        'Answer with JSON only: {"domain": "<one of the names>", "why": "<one sentence>"}.'
    )


QUALITY_PROMPT = (
    "You rate whether an agent trajectory is good training data for a model that predicts the environment's "
    "next observation from the history and the action. Good data: real actions with real, complete, "
    "informative environment responses. Bad data: garbage or repeated actions, empty or truncated "
    "observations, binary noise, harness errors. The turns shown are a sample spread over the whole "
    "trajectory. Answer with JSON only: "
    '{"score": <0.0..1.0>, "reasons": ["<short reason>", ...]}.'
)


def llm_available() -> bool:
    return endpoint_configured()


def sample_turn_indices(n: int, k: int = _SAMPLE_TURNS) -> list[int]:
    """At most k turn indices spread over 0..n-1: the first, the last, and evenly spaced ones between."""
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def _clip(text: str, limit: int = _PREVIEW_CHARS) -> str:
    """Head and tail of a long text: the end of an observation (an error, a prompt) matters as much."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} [... {len(text) - limit} chars ...] {text[-half:]}"


def _preview(traj: Trajectory) -> str:
    lines = [
        f"Task: {_clip(traj.task)}",
        f"Tools: {', '.join(sorted(traj.action_space.tool_names()))[:_PREVIEW_CHARS]}",
        f"Turns: {len(traj.turns)} in total; a sample follows.",
    ]
    previous = -1
    for index in sample_turn_indices(len(traj.turns)):
        if index > previous + 1:
            lines.append(f"... {index - previous - 1} turn(s) not shown ...")
        turn = traj.turns[index]
        lines.append(f"{turn_heading(index + 1)}Action ({turn.action.kind.value}): {_clip(turn.action.text)}")
        lines.append(f"Observation: {_clip(turn.observation.text)}")
        previous = index
    return "\n".join(lines)


class SharedBudget:
    """One LLM budget (calls and tokens) for every worker of a run.

    The counters live in shared memory (multiprocessing values), so N workers together spend at most the
    budget, not N times it. Built by the parent; pickled into spawned workers with the run's arguments.
    """

    def __init__(self, max_calls: int | None, max_tokens: int | None, ctx: Any = None) -> None:
        import multiprocessing as mp

        ctx = ctx or mp.get_context("spawn")
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self._calls = ctx.Value("q", 0)
        self._tokens = ctx.Value("q", 0)

    def try_reserve(self) -> str | None:
        """None when a call may go ahead (and is counted), else why not."""
        with self._calls.get_lock():
            if self.max_tokens is not None and self._tokens.value >= self.max_tokens:
                return "budget_tokens_exhausted"
            if self.max_calls is not None and self._calls.value >= self.max_calls:
                return "budget_calls_exhausted"
            self._calls.value += 1
        return None

    def add_tokens(self, tokens: int) -> None:
        with self._calls.get_lock():
            self._tokens.value += max(0, tokens)

    @property
    def used(self) -> dict[str, int | None]:
        return {
            "calls": int(self._calls.value),
            "tokens": int(self._tokens.value),
            "max_calls": self.max_calls,
            "max_tokens": self.max_tokens,
        }


class LLMCurator:
    """The LLM-backed align (domain) and score (quality) decisions for the cleaner.

    Counts what it does for the run summary: calls, tokens and cost (from the shared client's ledger),
    and every fallback to the deterministic answer with its reason.
    """

    def __init__(self, client: SyncLLMClient | None = None, budget: SharedBudget | None = None) -> None:
        if client is None:
            config = LLMConfig.from_env()
            if budget is not None:
                # The shared budget is the one that counts; a per-process one would allow N times as much.
                config = dataclasses.replace(config, max_calls=None, max_total_tokens=None)
            client = SyncLLMClient(config)
        self.client = client
        self.budget = budget
        self.fallbacks: Counter[str] = Counter()
        self.decisions: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _fallback(self, reason: str) -> None:
        with self._lock:
            self.fallbacks[reason] += 1

    def _ask(self, system: str, traj: Trajectory) -> dict[str, Any] | None:
        if self.budget is not None:
            refused = self.budget.try_reserve()
            if refused is not None:
                raise _BudgetRefused(refused)
        result = self.client.chat(
            Role.CLEANER,
            [{"role": "system", "content": system}, {"role": "user", "content": _preview(traj)}],
            temperature=0.0,
            max_tokens=300,
        )
        if self.budget is not None:
            self.budget.add_tokens(result.total_tokens)
        return parse_json_object(result.text)

    def classify_domain(self, traj: Trajectory) -> tuple[Domain | None, str]:
        """(domain, note): None with the reason when the answer is missing or not a known domain."""
        try:
            answer = self._ask(domain_prompt(), traj)
        except _BudgetRefused as refused:
            self._fallback(f"align: {refused.reason}")
            return None, f"llm_align_skipped: {refused.reason}"
        except LLMError as exc:
            self._fallback(f"align: {type(exc).__name__}")
            return None, f"llm_align_failed: {type(exc).__name__}"
        value = str((answer or {}).get("domain", "")).strip().lower()
        if not is_registered(value):
            self._fallback("align: unparsed answer")
            return None, f"llm_align_unparsed: {value[:40]!r}"
        self.decisions["align"] += 1
        return Domain(value), str((answer or {}).get("why", ""))[:300]

    def judge_quality(self, traj: Trajectory) -> tuple[float | None, list[str]]:
        """(score in 0..1, reasons); None when the judge failed or answered out of range."""
        try:
            answer = self._ask(QUALITY_PROMPT, traj)
        except _BudgetRefused as refused:
            self._fallback(f"score: {refused.reason}")
            return None, [f"llm_score_skipped: {refused.reason}"]
        except LLMError as exc:
            self._fallback(f"score: {type(exc).__name__}")
            return None, [f"llm_score_failed: {type(exc).__name__}"]
        score = (answer or {}).get("score")
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0.0 <= float(score) <= 1.0:
            self._fallback("score: unparsed answer")
            return None, [f"llm_score_unparsed: {str(score)[:40]!r}"]
        self.decisions["score"] += 1
        reasons = (answer or {}).get("reasons")
        return float(score), [str(r)[:200] for r in reasons] if isinstance(reasons, list) else []

    def report(self) -> dict[str, Any]:
        """This process's LLM use, for the run summary (clean_run.merge_llm_reports adds workers up)."""
        totals = self.client.usage.get("totals", {})
        return {
            "calls": int(totals.get("calls", 0)),
            "cache_hits": int(totals.get("cache_hits", 0)),
            "failures": int(totals.get("failures", 0)),
            "prompt_tokens": int(totals.get("prompt_tokens", 0)),
            "completion_tokens": int(totals.get("completion_tokens", 0)),
            "cost_usd": float(totals.get("cost_usd", 0.0)),
            "decisions": dict(self.decisions),
            "fallbacks": dict(self.fallbacks),
        }


class _BudgetRefused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def merge_llm_reports(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The sum of per-process LLM reports."""
    merged: dict[str, Any] = {
        "calls": 0,
        "cache_hits": 0,
        "failures": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost_usd": 0.0,
        "decisions": Counter(),
        "fallbacks": Counter(),
    }
    for report in reports:
        for key in ("calls", "cache_hits", "failures", "prompt_tokens", "completion_tokens", "cost_usd"):
            merged[key] += report.get(key, 0)
        merged["decisions"].update(report.get("decisions", {}))
        merged["fallbacks"].update(report.get("fallbacks", {}))
    merged["cost_usd"] = round(merged["cost_usd"], 6)
    merged["total_tokens"] = merged["prompt_tokens"] + merged["completion_tokens"]
    merged["decisions"] = dict(sorted(merged["decisions"].items()))
    merged["fallbacks"] = dict(sorted(merged["fallbacks"].items()))
    return merged
