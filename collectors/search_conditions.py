"""Controllable simulation conditions of the search domain, applied to real backend results.

The reference paper's perturbations: the answer hidden from snippets, partial results, pagination,
intermittent API errors (HTTP 429 / 500 / timeouts) and truncated pages. Each is a field of the task's
`search.conditions`; `describe()` states the active ones in words, and that text becomes part of the
trajectory's simulation instruction so a world model learns to reproduce them.

Determinism: every random choice draws from `random.Random(f"{seed}|{call number}|{tool}|{arguments}")`,
so the same seed and the same sequence of actions give identical observations, while a repeated call
(a retry) can fare differently from the first, as a flaky API does.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from collectors.search_index import Hit

ERROR_KINDS = ("429", "500", "timeout")
ERROR_TEXT = {
    "429": "Error: HTTP 429 Too Many Requests: the search service is rate limiting requests; retry later.",
    "500": "Error: HTTP 500 Internal Server Error: the search service failed to handle the request.",
    "timeout": "Error: the request timed out after {timeout} s without a response.",
}
HIDDEN = "[...]"


class ConditionError(ValueError):
    """A `search.conditions` field has the wrong type or range; the message names the field."""


def _number(cfg: dict[str, Any], key: str, lo: float, hi: float, *, lo_open: bool = False) -> float | None:
    if key not in cfg:
        return None
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConditionError(f"'conditions.{key}' must be a number, got {value!r}")
    if value > hi or value < lo or (lo_open and value == lo):
        bracket = "(" if lo_open else "["
        raise ConditionError(f"'conditions.{key}' must be in {bracket}{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def _positive_int(cfg: dict[str, Any], key: str) -> int | None:
    if key not in cfg:
        return None
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConditionError(f"'conditions.{key}' must be a positive integer, got {value!r}")
    return value


@dataclass(frozen=True)
class Conditions:
    """The active perturbations (None / empty: off) and the seed that drives them."""

    seed: int = 0
    hide_answer: tuple[str, ...] = ()
    partial: float | None = None  # fraction of the matching results that is returned
    page_size: int | None = None  # results per page; web_search takes "page"
    error_rate: float | None = None  # probability that a web_search / web_extractor call fails
    errors: tuple[str, ...] = ERROR_KINDS
    truncate_chars: int | None = None  # web_extractor returns at most this many characters
    timeout_s: int = 10  # the timeout the injected timeout errors report

    KEYS = ("hide_answer", "partial", "page_size", "error_rate", "errors", "truncate_chars")

    @classmethod
    def from_config(cls, cfg: dict[str, Any] | None, seed: int = 0) -> Conditions:
        cfg = cfg or {}
        if not isinstance(cfg, dict):
            raise ConditionError(f"'conditions' must be a JSON object, got {type(cfg).__name__}")
        unknown = sorted(set(cfg) - set(cls.KEYS))
        if unknown:
            fields = ", ".join(f"conditions.{k}" for k in unknown)
            raise ConditionError(f"unknown field(s) {fields}; known conditions: {', '.join(cls.KEYS)}")
        hide = cfg.get("hide_answer", ())
        if isinstance(hide, str):
            hide = (hide,)
        if not isinstance(hide, list | tuple) or not all(isinstance(h, str) and h.strip() for h in hide):
            raise ConditionError("'conditions.hide_answer' must be a non-empty string or a list of them")
        errors = cfg.get("errors", list(ERROR_KINDS))
        if not isinstance(errors, list) or not errors or not set(map(str, errors)) <= set(ERROR_KINDS):
            raise ConditionError(
                f"'conditions.errors' must be a non-empty list drawn from {list(ERROR_KINDS)}"
            )
        return cls(
            seed=seed,
            hide_answer=tuple(hide),
            partial=_number(cfg, "partial", 0.0, 1.0, lo_open=True),
            page_size=_positive_int(cfg, "page_size"),
            error_rate=_number(cfg, "error_rate", 0.0, 1.0),
            errors=tuple(str(e) for e in errors),
            truncate_chars=_positive_int(cfg, "truncate_chars"),
        )

    def active(self) -> bool:
        return bool(
            self.hide_answer or self.partial or self.page_size or self.error_rate or self.truncate_chars
        )

    def rng(self, call_no: int, tool: str, arguments: dict[str, Any]) -> random.Random:
        key = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
        return random.Random(f"{self.seed}|{call_no}|{tool}|{key}")

    # -- the perturbations -----------------------------------------------------------------------
    def injected_error(self, rng: random.Random) -> str | None:
        """The error kind this call fails with, or None (drawn first, so it never shifts other draws)."""
        draw = rng.random()
        kind = rng.choice(self.errors)
        if self.error_rate and draw < self.error_rate:
            return kind
        return None

    def error_text(self, kind: str) -> str:
        return ERROR_TEXT[kind].format(timeout=self.timeout_s)

    def keep_partial(self, hits: list[Hit], rng: random.Random) -> list[Hit]:
        """A seeded subset (the given fraction, at least one) of the hits, in their ranked order."""
        if not self.partial or self.partial >= 1.0 or not hits:
            return hits
        keep = max(1, round(len(hits) * self.partial))
        chosen = sorted(rng.sample(range(len(hits)), keep))
        return [hits[i] for i in chosen]

    def hide(self, text: str) -> str:
        for answer in self.hide_answer:
            text = re.sub(re.escape(answer), HIDDEN, text, flags=re.IGNORECASE)
        return text

    def hide_in_hits(self, hits: list[Hit]) -> list[Hit]:
        if not self.hide_answer:
            return hits
        return [Hit(h.url, self.hide(h.title), self.hide(h.snippet), h.date) for h in hits]

    def truncate(self, text: str) -> tuple[str, int]:
        """The page cut at `truncate_chars` with a marker saying how much was cut, and that amount."""
        if not self.truncate_chars or len(text) <= self.truncate_chars:
            return text, 0
        omitted = len(text) - self.truncate_chars
        return text[: self.truncate_chars] + f"\n\n[... truncated: {omitted} more characters]", omitted

    # -- in words --------------------------------------------------------------------------------
    def describe(self) -> str:
        """The active conditions as the simulation instruction states them ('' when none is active)."""
        parts: list[str] = []
        if self.hide_answer:
            answers = ", ".join(json.dumps(a, ensure_ascii=False) for a in self.hide_answer)
            parts.append(
                f"web_search never shows the answer ({answers}) in result titles or snippets: each occurrence "
                f"is replaced by {HIDDEN}; the pages themselves (web_extractor) are unchanged"
            )
        if self.partial:
            parts.append(
                f"web_search returns partial results: about {self.partial:.0%} of the matching results, "
                "chosen at random, in ranked order"
            )
        if self.page_size:
            parts.append(
                f"web_search results come in pages of {self.page_size}; each page ends with a line saying "
                'which results it shows and how to request the next one with the "page" argument'
            )
        if self.error_rate:
            kinds = ", ".join(
                {"429": "HTTP 429", "500": "HTTP 500", "timeout": "timeouts"}[k] for k in self.errors
            )
            parts.append(
                f"about {self.error_rate:.0%} of web_search and web_extractor calls fail with an error "
                f"({kinds}) instead of a result; retrying may succeed"
            )
        if self.truncate_chars:
            parts.append(
                f"web_extractor returns at most {self.truncate_chars} characters of a page, followed by a "
                "line saying how many characters were cut"
            )
        if not parts:
            return ""
        return "Simulation conditions of this search environment: " + "; ".join(parts) + "."
