"""Robust parsing of model output: reasoning blocks, the last predicted observation, lenient JSON.

Every function here is total: it never raises on arbitrary text, because a model's output is data to
be judged or quarantined, never a reason to stop a job.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import json_repair

from schemas.worldmodel import PREDICTION_CLOSE, PREDICTION_OPEN, THINK_CLOSE, THINK_OPEN

_THINK_OPEN = re.compile(re.escape(THINK_OPEN), re.IGNORECASE)
_THINK_CLOSE = re.compile(re.escape(THINK_CLOSE), re.IGNORECASE)
_PREDICTION_OPEN = re.compile(re.escape(PREDICTION_OPEN), re.IGNORECASE)
_PREDICTION_CLOSE = re.compile(re.escape(PREDICTION_CLOSE), re.IGNORECASE)
_CODE_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)


def split_reasoning(text: str) -> tuple[str, str]:
    """Split model output into (reasoning, answer).

    Reasoning models emit their reasoning first, so only leading blocks count as reasoning: any number
    of `<think>...</think>` blocks at the start, a bare `</think>` with no opening tag before it (chat
    templates that open the block in the prompt, as Qwen3 does), or a leading `<think>` that never closes
    (output cut by max_tokens: all of it is reasoning, the answer is empty). Think tags later in the
    answer are data (an observation may quote them) and are left alone.
    """
    reasoning_parts: list[str] = []
    rest = text
    first_close = _THINK_CLOSE.search(rest)
    first_open = _THINK_OPEN.search(rest)
    if first_close is not None and (first_open is None or first_open.start() > first_close.start()):
        reasoning_parts.append(rest[: first_close.start()].strip())
        rest = rest[first_close.end() :]
    while True:
        stripped = rest.lstrip()
        opening = _THINK_OPEN.match(stripped)
        if opening is None:
            break
        closing = _THINK_CLOSE.search(stripped, opening.end())
        if closing is None:
            reasoning_parts.append(stripped[opening.end() :].strip())
            rest = ""
            break
        reasoning_parts.append(stripped[opening.end() : closing.start()].strip())
        rest = stripped[closing.end() :]
    reasoning = "\n\n".join(part for part in reasoning_parts if part)
    return reasoning, rest.strip()


def strip_think(text: str) -> str:
    """The answer part of model output, with every reasoning block removed."""
    return split_reasoning(text)[1]


@dataclass(frozen=True)
class PredictionParse:
    """The outcome of extracting a predicted observation; `reason` is a code for counting failures."""

    observation: str | None
    reason: str  # ok | no_block | unterminated_block | empty_block

    @property
    def ok(self) -> bool:
        return self.observation is not None


def parse_predicted_observation(text: str) -> PredictionParse:
    """Take the LAST complete `<predicted_observation>` block after stripping reasoning.

    Only the content between the tags is returned (surrounding whitespace trimmed). An opening tag with
    no closing tag after it means the model was cut off: it is a failure, never a guess.
    """
    answer = strip_think(text)
    closes = list(_PREDICTION_CLOSE.finditer(answer))
    opens = list(_PREDICTION_OPEN.finditer(answer))
    if not closes:
        return PredictionParse(None, "unterminated_block" if opens else "no_block")
    last_close = closes[-1]
    opens_before = [match for match in opens if match.end() <= last_close.start()]
    if not opens_before:
        return PredictionParse(None, "no_block")
    if opens[-1].start() > last_close.start():
        # A newer block was started after the last complete one and never finished.
        return PredictionParse(None, "unterminated_block")
    body = answer[opens_before[-1].end() : last_close.start()].strip()
    if not body:
        return PredictionParse(None, "empty_block")
    return PredictionParse(body, "ok")


def extract_predicted_observation(text: str) -> str | None:
    """The last predicted observation block's content, or None when there is no usable block."""
    return parse_predicted_observation(text).observation


def parse_json_lenient(text: str) -> Any | None:
    """Parse JSON from model output: strips reasoning and code fences, repairs broken JSON.

    Returns a dict or list (or a scalar when the whole answer is valid JSON), None when nothing
    JSON-like can be recovered.
    """
    try:
        answer = strip_think(text).strip()
        answer_candidates = _json_candidates(answer)
        for candidate in answer_candidates:
            try:
                return json.loads(candidate)
            except ValueError:
                continue
        # A valid JSON document whose strings quote a think tag (the split above cut it): take it whole.
        for candidate in _json_candidates(text.strip()):
            if _THINK_OPEN.search(candidate) or _THINK_CLOSE.search(candidate):
                try:
                    return json.loads(candidate)
                except ValueError:
                    continue
        # A fence inside a JSON string cuts the fenced block short: take the last complete JSON container.
        embedded = _last_json_container(answer)
        if embedded:
            return embedded
        for candidate in answer_candidates:
            start = _first_container_start(candidate)
            if start is None:
                continue
            repaired = json_repair.loads(candidate[start:])
            if isinstance(repaired, dict | list) and repaired:
                return repaired
        return None
    except (RecursionError, ValueError, TypeError, IndexError, KeyError, AttributeError):
        return None


def _last_json_container(text: str) -> dict[str, Any] | list[Any] | None:
    """The last JSON object or array that decodes strictly somewhere inside `text`, scanning left to right."""
    decoder = json.JSONDecoder()
    found: dict[str, Any] | list[Any] | None = None
    pos = 0
    while True:
        starts = [i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0]
        if not starts:
            return found
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        if isinstance(value, dict | list):
            found = value
        pos = max(end, start + 1)


def _json_candidates(text: str) -> list[str]:
    """Fenced code blocks (last first), then the whole text; empty strings are skipped."""
    candidates = [block.strip() for block in reversed(_CODE_FENCE.findall(text))] + [text]
    return [candidate for candidate in candidates if candidate]


def parse_json_object(text: str) -> dict[str, Any] | None:
    """Like parse_json_lenient but only accepts a JSON object (the shape judges and optimizers answer in)."""
    parsed = parse_json_lenient(text)
    if isinstance(parsed, dict):
        return parsed
    if isinstance(parsed, list):
        objects = [item for item in parsed if isinstance(item, dict)]
        return objects[-1] if objects else None
    return None


def parse_tool_arguments(raw: str | None) -> tuple[Any, bool]:
    """Decode a tool call's JSON arguments; returns (arguments, repaired). Empty arguments are {}."""
    if raw is None or not raw.strip():
        return {}, False
    try:
        return json.loads(raw), False
    except ValueError:
        pass
    try:
        repaired = json_repair.loads(raw)
    except (RecursionError, ValueError, TypeError, IndexError, KeyError, AttributeError):
        return {}, True
    return (repaired if repaired != "" else {}), True


def _first_container_start(text: str) -> int | None:
    positions = [pos for pos in (text.find("{"), text.find("[")) if pos >= 0]
    return min(positions) if positions else None
