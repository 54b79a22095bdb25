"""Token, cost and request accounting with a hard budget checked before every request is sent.

A call is one chat completion asked for; a request is one HTTP request sent for it (a transport retry
is one more request of the same call). The budget (`max_calls`) caps requests: what the endpoint
receives. Each request is counted when it is reserved, before it is sent (so N tasks racing for the
last slot cannot all pass the check, and a request the process was killed waiting for is still
counted); its token estimate is replaced by the real usage once it finishes. With a `RequestJournal`
each request is also appended to a file before it leaves, so the totals survive a kill and the next
session's budget starts from them.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from worldline.llm.config import ModelPrice
from worldline.llm.errors import BudgetExceeded


@dataclass
class UsageTotals:
    """Counters for one slice (all calls, one role, or one model)."""

    calls: int = 0
    requests: int = 0  # HTTP requests sent: calls plus their retries (what the budget caps)
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
    """A request's claim on the budget, returned by UsageLedger.reserve and settled exactly once."""

    estimated_tokens: int


class RequestJournal:
    """An append-only JSONL of requests: a `sent` line is written before a request leaves, a `done`
    line with its usage when it finishes. Each line is one `os.write` to an O_APPEND descriptor, so a
    kill -9 loses nothing the kernel accepted and a torn last line is skipped on reading."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: dict[str, Any]) -> None:
        os.write(self._fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())

    def read(self) -> list[dict[str, Any]]:
        records = []
        with open(self.path, "rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    break  # torn by a kill mid-write
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    records.append(record)
        return records

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@dataclass
class UsageLedger:
    """Thread-safe totals per role and per model, plus the budget (None = unlimited)."""

    max_calls: int | None = None
    max_total_tokens: int | None = None
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    totals: UsageTotals = field(default_factory=UsageTotals)
    by_role: dict[str, UsageTotals] = field(default_factory=dict)
    by_model: dict[str, UsageTotals] = field(default_factory=dict)
    journal: RequestJournal | None = None
    _calls_reserved: int = field(default=0, init=False, repr=False)
    _tokens_reserved: int = field(default=0, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def attach_journal(self, journal: RequestJournal) -> None:
        """Load the requests an earlier session recorded in `journal` into the totals and record this
        session's there too: limits then cover every session."""
        with self._lock:
            for record in journal.read():
                role, model = str(record.get("role", "")), str(record.get("model", ""))
                slices = self._slices(role, model)
                if "sent" in record:
                    retry = int(record.get("retry", 0))
                    for totals in slices:
                        totals.requests += 1
                        totals.calls += 1 - retry
                        totals.retries += retry
                elif "failed" in record:
                    for totals in slices:
                        totals.failures += 1
                elif "done" in record:
                    for totals in slices:
                        totals.prompt_tokens += int(record.get("prompt_tokens", 0))
                        totals.completion_tokens += int(record.get("completion_tokens", 0))
                        totals.cost_usd += float(record.get("cost_usd", 0.0))
            self.journal = journal

    def reserve(
        self, *, estimated_tokens: int, role: str = "", model: str = "", retry: bool = False
    ) -> BudgetReservation:
        """Count one request (a retry is one more) and claim `estimated_tokens`, before it is sent, or
        raise BudgetExceeded without changing any state."""
        with self._lock:
            calls_committed = self.totals.requests
            if self.max_calls is not None and calls_committed + 1 > self.max_calls:
                raise BudgetExceeded(
                    f"LLM call budget exhausted: {calls_committed} of max_calls={self.max_calls} requests "
                    f"sent (retries included); raise WORLDLINE_LLM_MAX_CALLS / LLMConfig.max_calls to continue",
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
            if self.journal is not None:
                self.journal.write({"sent": 1, "role": role, "model": model, "retry": int(retry)})
            for totals in self._slices(role, model):
                totals.requests += 1
                totals.calls += int(not retry)
                totals.retries += int(retry)
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
    ) -> float:
        """Record a finished request's usage (answered or not) in place of its reservation's estimate;
        returns its cost. The request itself was counted by `reserve`."""
        cost = self.prices.get(model, ModelPrice()).cost(prompt_tokens, completion_tokens)
        with self._lock:
            self._calls_reserved -= 1
            self._tokens_reserved -= reservation.estimated_tokens
            if self.journal is not None:
                self.journal.write(
                    {
                        "done": 1,
                        "role": role,
                        "model": model,
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "cost_usd": cost,
                    }
                )
            for totals in self._slices(role, model):
                totals.prompt_tokens += prompt_tokens
                totals.completion_tokens += completion_tokens
                totals.cost_usd += cost
        return cost

    def record_failure(self, *, role: str, model: str) -> None:
        """A call that ended without an answer (retries exhausted, or rejected)."""
        with self._lock:
            if self.journal is not None:
                self.journal.write({"failed": 1, "role": role, "model": model})
            for totals in self._slices(role, model):
                totals.failures += 1

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
            return max(self.max_calls - self.totals.calls, 0)

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
                f"{label:<28} calls={totals['calls']:<6} requests={totals['requests']:<6} cache_hits={totals['cache_hits']:<6} "
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
