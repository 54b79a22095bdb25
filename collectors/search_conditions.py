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
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from collectors.search_index import Hit

ERROR_KINDS = ("429", "500", "timeout")
ERROR_TEXT = {
    "429": "Error: HTTP 429 Too Many Requests: the search service is rate limiting requests; retry later.",
    "500": "Error: HTTP 500 Internal Server Error: the search service failed to handle the request.",
    "timeout": "Error: the request timed out after {timeout} s without a response.",
}
HIDDEN = "[...]"
HIDE_SCOPES = ("results", "pages")


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
    hide_in: tuple[str, ...] = ("results",)  # where hide_answer applies: results, and pages too
    partial: float | None = None  # fraction of the matching results that is returned
    page_size: int | None = None  # results per page; web_search takes "page"
    error_rate: float | None = None  # probability that a web_search / web_extractor call fails
    errors: tuple[str, ...] = ERROR_KINDS
    truncate_chars: int | None = None  # web_extractor returns at most this many characters
    timeout_s: int = 10  # the timeout the injected timeout errors report

    KEYS = ("hide_answer", "hide_in", "partial", "page_size", "error_rate", "errors", "truncate_chars")

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
        hide_in = cfg.get("hide_in", ["results"])
        if isinstance(hide_in, str):
            hide_in = [hide_in]
        if not isinstance(hide_in, list) or "results" not in hide_in or not set(hide_in) <= set(HIDE_SCOPES):
            raise ConditionError(
                "'conditions.hide_in' must be [\"results\"] (titles, snippets and URLs of web_search) or "
                '["results", "pages"] (web_extractor pages as well)'
            )
        errors = cfg.get("errors", list(ERROR_KINDS))
        if not isinstance(errors, list) or not errors or not set(map(str, errors)) <= set(ERROR_KINDS):
            raise ConditionError(
                f"'conditions.errors' must be a non-empty list drawn from {list(ERROR_KINDS)}"
            )
        return cls(
            seed=seed,
            hide_answer=tuple(hide),
            hide_in=tuple(h for h in HIDE_SCOPES if h in hide_in),
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

    def hider(self) -> AnswerHider:
        """The episode's answer hider (it remembers the URLs it masked, so web_extractor follows them)."""
        return AnswerHider(self.hide_answer, pages="pages" in self.hide_in)

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
            where = (
                "in web_search results or in the pages web_extractor returns"
                if "pages" in self.hide_in
                else "in web_search results (titles, snippets and URLs)"
            )
            pages = (
                "; links in pages are treated like result URLs"
                if "pages" in self.hide_in
                else "; the pages themselves (web_extractor) are unchanged"
            )
            parts.append(
                f"the answer ({answers}) never appears {where}: every word that contains it, in any case "
                "and with any spacing, hyphen, underscore or %20 between its words (plurals included), is "
                f"replaced by {HIDDEN}; a URL whose #fragment holds it is shown without the fragment, and a "
                f"URL whose path holds it shows {HIDDEN} there, which web_extractor accepts" + pages
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


# --------------------------------------------------------------------------------------------------
# Hiding the answer
# --------------------------------------------------------------------------------------------------

# Between two words of an answer: up to three separators (spaces, punctuation, "_", "%20" and other
# percent-escapes), or none ("listcomprehension"). Letters and digits never separate.
_SEPARATOR = r"(?:%[0-9A-Fa-f]{2}|[\W_]){0,3}"
_WORD_CHAR = re.compile(r"[^\W_]")
_LINK_TARGET = re.compile(r"(\]\()([^)\s]+)(\))")


def answer_pattern(answer: str) -> re.Pattern[str]:
    """Every spelling of `answer` worth hiding: its words in order, any case, joined by any short run of
    separators (space, hyphen, underscore, %20, dots) or none; a last word ending in "y" also matches
    its "-ies" plural. Other inflections ("comprehensions", "boxes") are covered because the whole word
    around a match is hidden (`AnswerHider.hide`)."""
    words = re.findall(r"[^\W_]+", answer)
    if not words:  # an answer of punctuation only is hidden as written
        return re.compile(re.escape(answer.strip()), re.IGNORECASE)
    parts = [re.escape(w) for w in words]
    last = words[-1]
    if len(last) > 1 and last[-1] in "yY":
        parts[-1] = re.escape(last[:-1]) + "(?:y|ie)"
    return re.compile(_SEPARATOR.join(parts), re.IGNORECASE)


@dataclass
class AnswerHider:
    """Hides the task's answers from what the agent is shown, and reads naturally doing it.

    Text: each match of `answer_pattern` is widened to the whole words it touches and the span becomes
    `[...]` (so "List comprehensions" gives "List [...]", never "List [...]s"); this repeats until no
    match is left, so the answer is absent in every spelling the pattern covers. URLs: a fragment that
    holds the answer is dropped (the page is the same; `#term-list-comprehension` only scrolls); a path
    or query that holds it shows `[...]` there, and the hider remembers the real URL so web_extractor
    fetches the page the agent picked (`resolve`).
    """

    answers: tuple[str, ...]
    pages: bool = False  # hide in web_extractor pages too (conditions.hide_in includes "pages")
    aliases: dict[str, str] = field(default_factory=dict)  # shown URL -> real URL

    def __post_init__(self) -> None:
        self.patterns = [answer_pattern(a) for a in self.answers]

    def __bool__(self) -> bool:
        return bool(self.answers)

    def contains(self, text: str) -> bool:
        """Whether `text` (percent-escapes decoded as well) still shows an answer."""
        return any(p.search(text) or p.search(unquote(text)) for p in self.patterns)

    def hide(self, text: str) -> str:
        """`text` with every word holding an answer replaced by [...]."""
        for pattern in self.patterns:
            for _ in range(len(text) + 1):  # each round removes letters: it ends
                match = pattern.search(text)
                if match is None:
                    break
                start, end = match.span()
                while start > 0 and _WORD_CHAR.match(text[start - 1]):
                    start -= 1
                while end < len(text) and _WORD_CHAR.match(text[end]):
                    end += 1
                text = text[:start] + HIDDEN + text[end:]
        return text

    def hide_url(self, url: str) -> str:
        """The URL as shown: without a fragment that holds an answer, with [...] where its path or
        query holds one (remembered, so `resolve` gives the real URL back)."""
        if not self.answers or not self.contains(url):
            return url
        parts = urlsplit(url)
        real = url
        if parts.fragment and self.contains(parts.fragment):
            parts = parts._replace(fragment="")
            real = urlunsplit(parts)
        if not self.contains(urlunsplit(parts)):
            shown = urlunsplit(parts)
        else:
            netloc = parts.netloc if not self.contains(parts.netloc) else self.hide(unquote(parts.netloc))
            shown = urlunsplit(
                parts._replace(
                    netloc=netloc,
                    path=self.hide(unquote(parts.path)),
                    query=self.hide(unquote(parts.query)),
                    fragment=self.hide(unquote(parts.fragment)),
                )
            )
            base, n = shown, 2
            while self.aliases.get(shown, real) != real:  # two real URLs that mask alike stay apart
                shown = base.replace(HIDDEN, f"[...{n}]", 1)
                n += 1
        if shown != real:
            self.aliases[shown] = real
        return shown

    def resolve(self, url: str) -> str:
        """The real URL behind one the hider showed (itself for any other URL)."""
        if url in self.aliases:
            return self.aliases[url]
        parts = urlsplit(url)
        bare = urlunsplit(parts._replace(fragment=""))
        if bare in self.aliases:
            real = urlsplit(self.aliases[bare])
            return urlunsplit(real._replace(fragment=parts.fragment or real.fragment))
        return url

    def hide_in_hits(self, hits: list[Hit]) -> list[Hit]:
        if not self.answers:
            return hits
        return [Hit(self.hide_url(h.url), self.hide(h.title), self.hide(h.snippet), h.date) for h in hits]

    def hide_in_page(self, markdown: str) -> str:
        """A page's markdown with link targets shown as result URLs are and the text hidden (only when
        conditions.hide_in includes "pages")."""
        if not self.answers or not self.pages:
            return markdown
        linked = _LINK_TARGET.sub(lambda m: m.group(1) + self.hide_url(m.group(2)) + m.group(3), markdown)
        return self.hide(linked)
