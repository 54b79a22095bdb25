"""Token, cost and call accounting with a hard budget checked before every call is sent.

A call reserves its slot (and an estimate of its tokens) before it is sent; once it finishes the token
estimate is replaced by the real usage. Reservations make the check hold under concurrency: N tasks
racing for the last slot cannot all pass it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from worldline.llm.config import ModelPrice
from worldline.llm.errors import BudgetExceeded


@dataclass
class UsageTotals:
    """Counters for one slice (all calls, one role, or one model)."""

    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_tokens": self.total_tokens}


@dataclass(frozen=True)
class BudgetReservation:
    """A call's claim on the budget, returned by UsageLedger.reserve and settled exactly once."""

    estimated_tokens: int


@dataclass
class UsageLedger:
    """Thread-safe totals per role and per model, plus the budget (None = unlimited)."""

    max_calls: int | None = None
    max_total_tokens: int | None = None
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    totals: UsageTotals = field(default_factory=UsageTotals)
    by_role: dict[str, UsageTotals] = field(default_factory=dict)
    by_model: dict[str, UsageTotals] = field(default_factory=dict)
    _calls_reserved: int = field(default=0, init=False, repr=False)
    _tokens_reserved: int = field(default=0, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def reserve(self, *, estimated_tokens: int) -> BudgetReservation:
        """Claim one call and `estimated_tokens`, or raise BudgetExceeded without changing any state."""
        with self._lock:
            calls_committed = self.totals.calls + self._calls_reserved
            if self.max_calls is not None and calls_committed + 1 > self.max_calls:
                raise BudgetExceeded(
                    f"LLM call budget exhausted: {calls_committed} of max_calls={self.max_calls} calls "
                    f"used or in flight; raise WORLDLINE_LLM_MAX_CALLS / LLMConfig.max_calls to continue",
                    limit_name="max_calls",
                    limit=self.max_calls,
                    used=calls_committed,
                )
            tokens_committed = self.totals.total_tokens + self._tokens_reserved
            if self.max_total_tokens is not None and tokens_committed + estimated_tokens > max(
                self.max_total_tokens, 0
            ):
                raise BudgetExceeded(
                    f"LLM token budget exhausted: {tokens_committed} tokens used or in flight, the next call "
                    f"needs about {estimated_tokens} more, max_total_tokens={self.max_total_tokens}; raise "
                    f"WORLDLINE_LLM_MAX_TOKENS / LLMConfig.max_total_tokens (or lower max_tokens) to continue",
                    limit_name="max_total_tokens",
                    limit=self.max_total_tokens,
                    used=tokens_committed,
                )
            self._calls_reserved += 1
            self._tokens_reserved += estimated_tokens
            return BudgetReservation(estimated_tokens)

    def settle(
        self,
        reservation: BudgetReservation,
        *,
        role: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        retries: int,
        failed: bool,
    ) -> float:
        """Record a finished call (successful or failed) in place of its reservation; returns its cost."""
        cost = self.prices.get(model, ModelPrice()).cost(prompt_tokens, completion_tokens)
        with self._lock:
            self._calls_reserved -= 1
            self._tokens_reserved -= reservation.estimated_tokens
            for totals in self._slices(role, model):
                totals.calls += 1
                totals.failures += int(failed)
                totals.retries += retries
                totals.prompt_tokens += prompt_tokens
                totals.completion_tokens += completion_tokens
                totals.cost_usd += cost
        return cost

    def record_cache_hit(self, *, role: str, model: str) -> None:
        with self._lock:
            for totals in self._slices(role, model):
                totals.cache_hits += 1

    def _slices(self, role: str, model: str) -> tuple[UsageTotals, ...]:
        return (
            self.totals,
            self.by_role.setdefault(role, UsageTotals()),
            self.by_model.setdefault(model, UsageTotals()),
        )

    @property
    def calls_remaining(self) -> int | None:
        with self._lock:
            if self.max_calls is None:
                return None
            return max(self.max_calls - self.totals.calls - self._calls_reserved, 0)

    @property
    def tokens_remaining(self) -> int | None:
        with self._lock:
            if self.max_total_tokens is None:
                return None
            return max(self.max_total_tokens - self.totals.total_tokens - self._tokens_reserved, 0)

    def budget_warning(self, planned_calls: int, tokens_per_call: int | None = None) -> str | None:
        """A sentence saying why the remaining budget looks too small for `planned_calls`, else None."""
        problems: list[str] = []
        calls_left = self.calls_remaining
        if calls_left is not None and planned_calls > calls_left:
            problems.append(f"{planned_calls} calls planned but only {calls_left} left under max_calls")
        tokens_left = self.tokens_remaining
        if tokens_left is not None and tokens_per_call is not None:
            needed = planned_calls * tokens_per_call
            if needed > tokens_left:
                problems.append(
                    f"about {needed} tokens planned ({planned_calls} x {tokens_per_call}) but only "
                    f"{tokens_left} left under max_total_tokens"
                )
        if not problems:
            return None
        return "LLM budget looks too small: " + "; ".join(problems) + ". The run will stop early."

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready copy of every counter and the budget state."""
        with self._lock:
            return {
                "totals": self.totals.as_dict(),
                "by_role": {name: totals.as_dict() for name, totals in sorted(self.by_role.items())},
                "by_model": {name: totals.as_dict() for name, totals in sorted(self.by_model.items())},
                "budget": {
                    "max_calls": self.max_calls,
                    "max_total_tokens": self.max_total_tokens,
                    "calls_in_flight": self._calls_reserved,
                },
            }

    def format(self) -> str:
        """A short human-readable report: one line for the totals, one per role and per model."""
        snap = self.snapshot()

        def line(label: str, totals: Mapping[str, Any]) -> str:
            return (
                f"{label:<28} calls={totals['calls']:<6} cache_hits={totals['cache_hits']:<6} "
                f"failures={totals['failures']:<4} retries={totals['retries']:<4} "
                f"prompt_tokens={totals['prompt_tokens']:<9} completion_tokens={totals['completion_tokens']:<9} "
                f"cost_usd={totals['cost_usd']:.4f}"
            )

        lines = [line("total", snap["totals"])]
        lines += [line(f"role:{name}", totals) for name, totals in snap["by_role"].items()]
        lines += [line(f"model:{name}", totals) for name, totals in snap["by_model"].items()]
        budget = snap["budget"]
        lines.append(f"budget: max_calls={budget['max_calls']} max_total_tokens={budget['max_total_tokens']}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def to_json(self) -> str:
        return json.dumps(self.snapshot(), indent=2, sort_keys=True)
