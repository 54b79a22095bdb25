"""Parsing the judge's answer into five scores, robustly and totally (never raises).

Order of evidence: reasoning blocks are dropped; the last `<final_evaluation>` block is preferred (an
unclosed one is read to the end: the answer was cut off); inside it fenced JSON blocks (last first),
then every brace-matched object (the last that holds scores wins), then a repaired parse of a
truncated object, then `dimension: value` pairs. Scores are coerced from ints, floats and strings
such as "4", "4/5" or "**4**"; values outside 1..5 fail the parse (policy "fail", the default, so a
judge on the wrong scale never inflates a reward) or are clamped (policy "clamp").
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import json_repair

from schemas.worldmodel import SCORING_DIMENSIONS
from worldline.llm.parsing import split_reasoning

SCORE_MIN, SCORE_MAX = 1.0, 5.0

OutOfRangePolicy = Literal["fail", "clamp"]

_TAG_OPEN = re.compile(r"<final_evaluation>", re.IGNORECASE)
_TAG_CLOSE = re.compile(r"</final_evaluation>", re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_FRACTION = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(?:/|out of)\s*(\d+(?:\.\d+)?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class JudgeAnswer:
    """One parsed judge answer. `scores` is None on failure and `reason` says why (a counting code):
    ok | empty | no_json | no_scores | missing_dimension | non_numeric | out_of_range."""

    scores: dict[str, float] | None
    reason: str
    strengths: list[str] = field(default_factory=list)
    weaknesses: list[str] = field(default_factory=list)
    clamped: tuple[str, ...] = ()
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.scores is not None

    @property
    def mean(self) -> float | None:
        """Mean of the five dimensions on the 1..5 scale."""
        if self.scores is None:
            return None
        return sum(self.scores[d] for d in SCORING_DIMENSIONS) / len(SCORING_DIMENSIONS)


def normalise(raw_mean: float) -> float:
    """AgentWorldBench's normalisation of a 1..5 mean to 0..100: (raw - 1) / 4 * 100."""
    return (raw_mean - 1.0) / 4.0 * 100.0


def evaluation_block(answer: str) -> tuple[str | None, bool]:
    """The last `<final_evaluation>` block of the answer and whether it was closed."""
    opens = list(_TAG_OPEN.finditer(answer))
    if not opens:
        return None, False
    start = opens[-1].end()
    close = _TAG_CLOSE.search(answer, start)
    if close is None:
        return answer[start:].strip(), False
    return answer[start : close.start()].strip(), True


def brace_objects(text: str) -> list[str]:
    """Every top-level `{...}` span of `text`, matched with string and escape awareness, left to right."""
    spans: list[str] = []
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            return spans
        depth, in_string, escaped = 0, False, False
        end = -1
        for i in range(start, len(text)):
            ch = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
                continue
            if ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        if end < 0:
            return spans  # unbalanced from here on: the repair pass handles truncated tails
        spans.append(text[start : end + 1])
        pos = end + 1


def _loads(candidate: str) -> Any | None:
    try:
        return json.loads(candidate)
    except ValueError:
        pass
    try:
        repaired = json_repair.loads(candidate)
    except (RecursionError, ValueError, TypeError, IndexError, KeyError, AttributeError):
        return None
    return repaired if isinstance(repaired, dict | list) and repaired else None


def _score_table(obj: Any) -> dict[str, Any] | None:
    """The mapping that holds the dimensions: `scores`, a nested `final_evaluation`, or the object itself."""
    if isinstance(obj, list):
        for item in reversed(obj):
            found = _score_table(item)
            if found is not None:
                return found
        return None
    if not isinstance(obj, dict):
        return None
    lowered = {str(key).strip().lower(): value for key, value in obj.items()}
    for key in ("scores", "score", "final_evaluation", "evaluation"):
        if isinstance(lowered.get(key), dict):
            inner = _score_table(lowered[key])
            if inner is not None:
                return inner
    if any(dimension in lowered for dimension in SCORING_DIMENSIONS):
        return lowered
    return None


def coerce_score(value: Any) -> float | None:
    """A number from an int, float or string ("4", "4/5", "**4**", "4 out of 5"); None when not numeric.

    A fraction over another denominator ("8/10") is not a score on this scale: None, never a guessed
    rescaling.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, dict):
        for key in ("score", "value", "rating"):
            if key in value:
                return coerce_score(value[key])
        return None
    if isinstance(value, str):
        text = value.strip().strip("*_` ")
        fraction = _FRACTION.match(text)
        if fraction:
            numerator, denominator = float(fraction[1]), float(fraction[2])
            return numerator if denominator == SCORE_MAX else None
        match = _NUMBER.search(text)
        if match:
            return float(match.group())
    return None


def _as_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(item) for item in value]
    if isinstance(value, str) and value.strip():
        return [value]
    return []


def _from_table(
    table: dict[str, Any], source: dict[str, Any] | None, policy: OutOfRangePolicy
) -> JudgeAnswer:
    lowered = {str(key).strip().lower(): value for key, value in table.items()}
    strengths = _as_list((source or {}).get("strengths"))
    weaknesses = _as_list((source or {}).get("weaknesses"))
    missing = [d for d in SCORING_DIMENSIONS if d not in lowered]
    if missing:
        return JudgeAnswer(None, "missing_dimension", strengths, weaknesses, detail=",".join(missing))
    scores: dict[str, float] = {}
    clamped: list[str] = []
    for dimension in SCORING_DIMENSIONS:
        number = coerce_score(lowered[dimension])
        if number is None:
            return JudgeAnswer(
                None, "non_numeric", strengths, weaknesses, detail=f"{dimension}={lowered[dimension]!r}"
            )
        if not SCORE_MIN <= number <= SCORE_MAX:
            if policy == "fail":
                return JudgeAnswer(
                    None, "out_of_range", strengths, weaknesses, detail=f"{dimension}={number:g}"
                )
            number = min(max(number, SCORE_MIN), SCORE_MAX)
            clamped.append(dimension)
        scores[dimension] = number
    return JudgeAnswer(scores, "ok", strengths, weaknesses, tuple(clamped))


_PAIR = re.compile(
    rf"[\"']?({'|'.join(SCORING_DIMENSIONS)})[\"']?\s*[:=]\s*[\"']?\s*([-+]?\d+(?:\.\d+)?(?:\s*/\s*\d+)?)",
    re.IGNORECASE,
)


def parse_judge_answer(text: str, *, out_of_range: OutOfRangePolicy = "fail") -> JudgeAnswer:
    """Parse a judge's raw output (see the module docstring); total on any input."""
    try:
        return _parse(text or "", out_of_range)
    except (RecursionError, ValueError, TypeError, IndexError, KeyError, AttributeError) as error:
        return JudgeAnswer(None, "no_json", detail=f"{type(error).__name__}")


def _parse(text: str, policy: OutOfRangePolicy) -> JudgeAnswer:
    _, answer = split_reasoning(text)
    if not answer.strip():
        return JudgeAnswer(None, "empty")
    block, _closed = evaluation_block(answer)
    region = block if block is not None else answer
    candidates = [c.strip() for c in reversed(_FENCE.findall(region))]
    candidates += list(reversed(brace_objects(region)))
    first_brace = region.find("{")
    if first_brace >= 0:
        candidates.append(region[first_brace:])  # a truncated object: repaired below
    first_failure: JudgeAnswer | None = None
    for candidate in candidates:
        if not candidate:
            continue
        parsed = _loads(candidate)
        table = _score_table(parsed)
        if table is None:
            continue
        source = parsed if isinstance(parsed, dict) else None
        result = _from_table(table, source, policy)
        if result.ok:
            return result
        first_failure = first_failure or result
    pairs = {name.lower(): value for name, value in _PAIR.findall(region)}
    if pairs:
        result = _from_table(pairs, None, policy)
        if result.ok or first_failure is None:
            return result
    if first_failure is not None:
        return first_failure
    return JudgeAnswer(None, "no_json" if not candidates else "no_scores")


def parse_pairwise_answer(text: str) -> str | None:
    """'A' or 'B' from a pairwise comparison answer (JSON `winner`, or `\\boxed{A}`); None otherwise."""
    _, answer = split_reasoning(text or "")
    block, _ = evaluation_block(answer)
    region = block if block is not None else answer
    for candidate in [c.strip() for c in reversed(_FENCE.findall(region))] + list(
        reversed(brace_objects(region))
    ):
        parsed = _loads(candidate)
        if isinstance(parsed, dict):
            winner = str(parsed.get("winner", "")).strip().strip("\"'").upper()
            if winner in ("A", "B"):
                return winner
    boxed: list[str] = re.findall(r"boxed\{\s*([AB])\s*\}", region, re.IGNORECASE)
    if boxed:
        return boxed[-1].upper()
    named: list[str] = re.findall(r"winner\W{0,4}([AB])\b", region, re.IGNORECASE)
    return named[-1].upper() if named else None
