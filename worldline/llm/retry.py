"""Which failures are worth retrying, and how long to wait before the next attempt."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping

import openai

from worldline.llm.errors import MalformedResponse

# 408 is a request timeout reported by a proxy: the same transient condition as a client-side timeout.
RETRYABLE_STATUS_CODES = frozenset({408, 429})


def is_retryable(error: BaseException) -> bool:
    """429, 408, 5xx, timeouts, dropped connections and unusable 2xx bodies are retried; other 4xx are not."""
    if isinstance(error, openai.APIStatusError):
        return error.status_code in RETRYABLE_STATUS_CODES or error.status_code >= 500
    if isinstance(error, openai.APIConnectionError | openai.APIResponseValidationError | MalformedResponse):
        return True  # APIConnectionError includes APITimeoutError
    return False


def retry_after_seconds(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """The server's requested wait from `retry-after-ms` or `Retry-After` (seconds or HTTP date)."""
    if not headers:
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(float(raw_ms) / 1000.0, 0.0)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if moment is None:
        return None
    current = time.time() if now is None else now
    return max(moment.timestamp() - current, 0.0)


def backoff_delay(
    attempt: int,
    *,
    base_s: float,
    max_s: float,
    retry_after_s: float | None = None,
    retry_after_max_s: float = 300.0,
    rng: random.Random | None = None,
) -> float:
    """Seconds to sleep after failed attempt number `attempt` (1-based).

    A server-provided Retry-After is honoured as is (capped at retry_after_max_s). Otherwise exponential
    backoff with "equal jitter": half the exponential step is fixed, half uniformly random, so concurrent
    clients spread out without ever retrying immediately.
    """
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), retry_after_max_s)
    step = min(max_s, base_s * (2 ** max(attempt - 1, 0)))
    jitter = (rng.uniform if rng is not None else random.uniform)(0, step / 2)
    return float(step / 2 + jitter)


def error_headers(error: BaseException) -> Mapping[str, str] | None:
    """The HTTP response headers attached to an openai status error, if any."""
    if isinstance(error, openai.APIStatusError):
        return dict(error.response.headers)
    return None
