"""Typed errors of the shared LLM client, so callers can stop, skip or report precisely."""

from __future__ import annotations


class LLMError(Exception):
    """Base class of every error raised by worldline.llm."""


class LLMNotConfigured(LLMError):
    """No endpoint or model is configured for a step that needs one; the message names the env var."""


class BudgetExceeded(LLMError):
    """Sending the next call would exceed the configured call or token budget; nothing was sent."""

    def __init__(self, message: str, *, limit_name: str, limit: int, used: int) -> None:
        super().__init__(message)
        self.limit_name = limit_name
        self.limit = limit
        self.used = used


class MalformedResponse(LLMError):
    """The endpoint answered 2xx with a body that is not a usable chat completion (retryable)."""


class LLMCallFailed(LLMError):
    """A chat call failed; `last_cause` is the final underlying exception."""

    def __init__(self, message: str, *, role: str, model: str, attempts: int, last_cause: BaseException):
        super().__init__(message)
        self.role = role
        self.model = model
        self.attempts = attempts
        self.last_cause = last_cause


class RetriesExhausted(LLMCallFailed):
    """Every attempt hit a retryable failure (429, 5xx, timeout, connection, malformed body)."""


class RequestRejected(LLMCallFailed):
    """The endpoint rejected the request with a non-retryable 4xx (bad request, auth, unknown model)."""

    def __init__(
        self,
        message: str,
        *,
        role: str,
        model: str,
        attempts: int,
        last_cause: BaseException,
        status_code: int,
    ):
        super().__init__(message, role=role, model=model, attempts=attempts, last_cause=last_cause)
        self.status_code = status_code
