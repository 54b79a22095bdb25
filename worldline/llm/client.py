"""The one LLM client of worldline: any OpenAI-compatible endpoint, with retries, cache, concurrency
bound, budget and accounting in one place so every LLM-backed step behaves the same.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypeVar

import openai

from worldline.llm.accounting import UsageLedger
from worldline.llm.cache import ResponseCache, cache_key
from worldline.llm.config import PLACEHOLDER_API_KEY, LLMConfig, Role
from worldline.llm.errors import (
    BudgetExceeded,
    LLMCallFailed,
    MalformedResponse,
    RequestRejected,
    RetriesExhausted,
)
from worldline.llm.parsing import PredictionParse, parse_predicted_observation, parse_tool_arguments
from worldline.llm.parsing import split_reasoning as split_reasoning_text
from worldline.llm.retry import backoff_delay, error_headers, is_retryable, retry_after_seconds
from worldline.redaction.records import redact_message

log = logging.getLogger("worldline.llm")

T = TypeVar("T")

# A prompt token is about four characters of English/JSON; used only for budget reservations and for
# usage when an endpoint reports none.
CHARS_PER_TOKEN_ESTIMATE = 4


@dataclass(frozen=True)
class ToolCall:
    """One tool call from the model; `arguments` is parsed JSON (repaired when the model broke it)."""

    id: str
    name: str
    arguments: Any
    raw_arguments: str
    arguments_repaired: bool = False


@dataclass(frozen=True)
class ChatResult:
    """The parsed answer of one chat call; `text` never contains reasoning, `reasoning` holds it."""

    text: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    model: str
    role: str
    sample_index: int
    cache_key: str
    cached: bool = False
    latency_s: float = 0.0
    attempts: int = 0
    usage_estimated: bool = False
    raw_content: str = ""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def predicted_observation(self) -> PredictionParse:
        """The last `<predicted_observation>` block of the answer, with a reason code on failure."""
        return parse_predicted_observation(self.text)

    def to_cache_record(self) -> dict[str, Any]:
        record = asdict(self)
        for transient in ("role", "cached", "latency_s", "attempts", "cache_key"):
            record.pop(transient)
        return record

    @classmethod
    def from_cache_record(cls, record: Mapping[str, Any], *, role: str, key: str) -> ChatResult:
        tool_calls = tuple(ToolCall(**call) for call in record.get("tool_calls", ()))
        fields = {name: value for name, value in record.items() if name != "tool_calls"}
        return cls(**fields, tool_calls=tool_calls, role=role, cache_key=key, cached=True)


@dataclass(frozen=True)
class ChatRequest:
    """One chat call as data, for batches (`chat_many`). `extra` goes to the endpoint as extra body
    fields (e.g. top_k, chat_template_kwargs for vLLM) and is part of the cache key."""

    role: Role | str
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] | None = None
    tool_choice: Any = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: Sequence[str] | None = None
    seed: int | None = None
    response_format: Mapping[str, Any] | None = None
    sample_index: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None
    use_cache: bool = True


@dataclass
class _LoopResources:
    """The openai client and semaphore of one event loop (neither may cross loops)."""

    openai_client: openai.AsyncOpenAI
    semaphore: asyncio.Semaphore


class LLMClient:
    """Async chat client; build one per job and share it. See docs/llm.md."""

    def __init__(self, config: LLMConfig | None = None) -> None:
        self.config = config if config is not None else LLMConfig.from_env()
        self.base_url = self.config.require_endpoint()
        self.ledger = UsageLedger(
            max_calls=self.config.max_calls,
            max_total_tokens=self.config.max_total_tokens,
            prices=dict(self.config.prices),
        )
        self.cache = ResponseCache(self.config.cache_path) if self.config.cache_path is not None else None
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopResources] = (
            weakref.WeakKeyDictionary()
        )
        self._loops_lock = threading.Lock()
        # Secrets and PII redacted from outgoing messages, per class (the values are never kept).
        self.redactions: Counter[str] = Counter()
        # The backoff sleep, replaceable so tests can observe computed delays without waiting.
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    @classmethod
    def from_env(cls, **overrides: Any) -> LLMClient:
        return cls(LLMConfig.from_env(**overrides))

    @property
    def usage(self) -> dict[str, Any]:
        """A snapshot of calls, cache hits, tokens and cost, in total, per role and per model."""
        return self.ledger.snapshot()

    def format_usage(self) -> str:
        return self.ledger.format()

    def budget_warning(self, planned_calls: int, tokens_per_call: int | None = None) -> str | None:
        """Warn (log and return the message) when the remaining budget cannot cover the planned calls."""
        message = self.ledger.budget_warning(planned_calls, tokens_per_call)
        if message:
            log.warning(message)
        return message

    def _resources(self) -> _LoopResources:
        loop = asyncio.get_running_loop()
        with self._loops_lock:
            resources = self._loops.get(loop)
            if resources is None:
                resources = _LoopResources(
                    openai_client=openai.AsyncOpenAI(
                        base_url=self.base_url,
                        api_key=self.config.api_key or PLACEHOLDER_API_KEY,
                        timeout=self.config.timeout_s,
                        # Retries happen here, where they are counted, cached and budgeted.
                        max_retries=0,
                    ),
                    semaphore=asyncio.Semaphore(self.config.concurrency),
                )
                self._loops[loop] = resources
            return resources

    async def chat(
        self,
        role: Role | str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Any = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
        sample_index: int = 0,
        model: str | None = None,
        use_cache: bool = True,
        **extra: Any,
    ) -> ChatResult:
        """Send one chat completion (or answer it from the cache). Extra keyword arguments are sent as
        extra body fields. Raises BudgetExceeded before sending, RetriesExhausted / RequestRejected after."""
        if extra.get("n", 1) != 1:
            raise ValueError(
                f"n={extra['n']} is not supported by LLMClient.chat: use chat_samples(role, messages, n) so each "
                f"sample is its own cache entry and budget call"
            )
        return await self.run(
            ChatRequest(
                role=role,
                messages=messages,
                tools=tools,
                tool_choice=tool_choice,
                temperature=temperature,
                top_p=top_p,
                max_tokens=max_tokens,
                stop=stop,
                seed=seed,
                response_format=response_format,
                sample_index=sample_index,
                extra=extra,
                model=model,
                use_cache=use_cache,
            )
        )

    async def chat_samples(
        self, role: Role | str, messages: Sequence[Mapping[str, Any]], n: int, **kwargs: Any
    ) -> list[ChatResult]:
        """`n` independent samples of one prompt (sample_index 0..n-1), each cached separately."""
        requests = [
            ChatRequest(role=role, messages=messages, sample_index=index, **kwargs) for index in range(n)
        ]
        results = await self.chat_many(requests)
        return [result for result in results if isinstance(result, ChatResult)]

    async def chat_many(
        self, requests: Sequence[ChatRequest], *, return_exceptions: bool = False
    ) -> list[ChatResult | BaseException]:
        """Run a batch concurrently under the client's bound, results in input order.

        Every call is allowed to finish before an error is raised, so the ledger and cache are consistent
        when a caller catches BudgetExceeded; with return_exceptions=True errors come back in place.
        """
        outcomes = await asyncio.gather(*(self.run(request) for request in requests), return_exceptions=True)
        if not return_exceptions:
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
        return list(outcomes)

    async def run(self, request: ChatRequest) -> ChatResult:
        """Execute one ChatRequest: cache lookup, budget reservation, bounded attempts with backoff."""
        role = Role(request.role).value
        model = request.model or self.config.model_for(request.role)
        # Nothing leaves for an endpoint (or enters the cache) unredacted: every message's content,
        # content parts and tool-call arguments go through the shared redaction core first.
        request = replace(request, messages=[redact_message(m, self.redactions) for m in request.messages])
        wire = _wire_request(model, request)
        key = cache_key({**wire, "sample_index": request.sample_index})

        if self.cache is not None and request.use_cache:
            record = self.cache.get(key)
            if record is not None:
                try:
                    cached = ChatResult.from_cache_record(record, role=role, key=key)
                except (TypeError, ValueError):
                    cached = None  # written by an incompatible version: a miss, overwritten below
                if cached is not None:
                    self.ledger.record_cache_hit(role=role, model=model)
                    return cached

        prompt_estimate = _estimate_prompt_tokens(request)
        result = await self._send_with_retries(role, model, wire, request, key, prompt_estimate)
        if self.cache is not None and request.use_cache:
            self.cache.put(key, model, result.to_cache_record())
        return result

    async def _send_with_retries(
        self,
        role: str,
        model: str,
        wire: dict[str, Any],
        request: ChatRequest,
        key: str,
        prompt_estimate: int,
    ) -> ChatResult:
        resources = self._resources()
        # The body exactly as the cache key saw it; `extra_body` fields join it as the SDK would merge them.
        # Posted through the client's own `post` (same auth, headers, timeouts, status errors): `create`
        # would first walk every message through the SDK's TypedDict transform, a quarter of the
        # client's CPU per call on long judge prompts, for a body that is plain JSON already.
        body = {name: value for name, value in wire.items() if name != "extra_body"}
        body.update(wire.get("extra_body") or {})
        attempts_allowed = self.config.max_retries + 1
        estimate = prompt_estimate + (request.max_tokens or 0)
        attempt = 0
        while True:
            attempt += 1
            result: ChatResult | None = None
            try:
                async with resources.semaphore:
                    # Every request is counted (and journaled) right before it leaves, retries included:
                    # the budget caps what the endpoint receives, and a kill loses no count.
                    reservation = self.ledger.reserve(
                        estimated_tokens=estimate, role=role, model=model, retry=attempt > 1
                    )
                    try:
                        started = time.perf_counter()
                        text = await resources.openai_client.post("/chat/completions", body=body, cast_to=str)
                        latency = time.perf_counter() - started
                        result = _parse_completion(
                            text,
                            role=role,
                            model=model,
                            request=request,
                            key=key,
                            latency_s=latency,
                            attempts=attempt,
                            prompt_estimate=prompt_estimate,
                        )
                    finally:
                        self.ledger.settle(
                            reservation,
                            role=role,
                            model=model,
                            prompt_tokens=result.prompt_tokens if result else 0,
                            completion_tokens=result.completion_tokens if result else 0,
                        )
                return result
            except BudgetExceeded:
                raise
            except Exception as error:  # classified below; anything not retryable is re-raised typed
                if not is_retryable(error) or attempt >= attempts_allowed:
                    self.ledger.record_failure(role=role, model=model)
                if not is_retryable(error):
                    if isinstance(error, openai.APIStatusError):
                        raise RequestRejected(
                            f"{role} call to model '{model}' rejected with HTTP {error.status_code}: "
                            f"{_short(error)}; fix the request or the model name (not retried)",
                            role=role,
                            model=model,
                            attempts=attempt,
                            last_cause=error,
                            status_code=error.status_code,
                        ) from error
                    raise
                if attempt >= attempts_allowed:
                    raise RetriesExhausted(
                        f"{role} call to model '{model}' failed after {attempt} attempts; last error: "
                        f"{type(error).__name__}: {_short(error)}. Check the endpoint at {self.base_url} or "
                        f"raise LLMConfig.max_retries / timeout_s",
                        role=role,
                        model=model,
                        attempts=attempt,
                        last_cause=error,
                    ) from error
                delay = backoff_delay(
                    attempt,
                    base_s=self.config.backoff_base_s,
                    max_s=self.config.backoff_max_s,
                    retry_after_s=retry_after_seconds(error_headers(error)),
                    retry_after_max_s=self.config.retry_after_max_s,
                )
                log.info(
                    "retrying %s call to %s after %s (attempt %d/%d, sleeping %.2fs)",
                    role,
                    model,
                    type(error).__name__,
                    attempt,
                    attempts_allowed,
                    delay,
                )
                await self.sleep(delay)

    async def aclose(self) -> None:
        """Close the HTTP client of the running loop and the cache."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._loops_lock:
            resources = self._loops.pop(loop, None) if loop is not None else None
        if resources is not None:
            await resources.openai_client.close()
        if self.cache is not None:
            self.cache.close()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class SyncLLMClient:
    """Blocking facade for non-async callers (Beam DoFns, scripts): runs an LLMClient on its own
    event-loop thread, so several threads can share it and its concurrency bound."""

    def __init__(self, config: LLMConfig | None = None, *, client: LLMClient | None = None) -> None:
        self.client = client if client is not None else LLMClient(config)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="worldline-llm", daemon=True)
        self._thread.start()
        self._closed = False

    def _call(self, coroutine: Awaitable[T]) -> T:
        if self._closed:
            raise RuntimeError("SyncLLMClient is closed; create a new one")
        future: Future[T] = asyncio.run_coroutine_threadsafe(_as_coroutine(coroutine), self._loop)
        return future.result()

    @property
    def config(self) -> LLMConfig:
        return self.client.config

    @property
    def usage(self) -> dict[str, Any]:
        return self.client.usage

    def format_usage(self) -> str:
        return self.client.format_usage()

    def budget_warning(self, planned_calls: int, tokens_per_call: int | None = None) -> str | None:
        return self.client.budget_warning(planned_calls, tokens_per_call)

    def chat(self, role: Role | str, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        return self._call(self.client.chat(role, messages, **kwargs))

    def run(self, request: ChatRequest) -> ChatResult:
        return self._call(self.client.run(request))

    def chat_many(
        self, requests: Sequence[ChatRequest], *, return_exceptions: bool = False
    ) -> list[ChatResult | BaseException]:
        return self._call(self.client.chat_many(requests, return_exceptions=return_exceptions))

    def chat_samples(
        self, role: Role | str, messages: Sequence[Mapping[str, Any]], n: int, **kwargs: Any
    ) -> list[ChatResult]:
        return self._call(self.client.chat_samples(role, messages, n, **kwargs))

    def run_coroutine(self, coroutine: Awaitable[T]) -> T:
        """Run any coroutine that uses `self.client` (e.g. a judge batch) on the client's loop thread."""
        return self._call(coroutine)

    def close(self) -> None:
        if self._closed:
            return
        self._call(self.client.aclose())
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> SyncLLMClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _wire_request(model: str, request: ChatRequest) -> dict[str, Any]:
    """The request body as sent (None fields omitted); also the basis of the cache key."""
    wire: dict[str, Any] = {
        "model": model,
        "messages": [dict(message) for message in request.messages],
        "tools": [dict(tool) for tool in request.tools] if request.tools else None,
        "tool_choice": request.tool_choice,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "max_tokens": request.max_tokens,
        "stop": list(request.stop) if request.stop else None,
        "seed": request.seed,
        "response_format": dict(request.response_format) if request.response_format else None,
        "extra_body": dict(request.extra) if request.extra else None,
    }
    return {name: value for name, value in wire.items() if value is not None}


def _estimate_prompt_tokens(request: ChatRequest) -> int:
    size = len(json.dumps(list(request.messages), ensure_ascii=False, default=str))
    if request.tools:
        size += len(json.dumps(list(request.tools), ensure_ascii=False, default=str))
    return size // CHARS_PER_TOKEN_ESTIMATE + 1


def _parse_completion(
    body_text: str,
    *,
    role: str,
    model: str,
    request: ChatRequest,
    key: str,
    latency_s: float,
    attempts: int,
    prompt_estimate: int,
) -> ChatResult:
    """Turn a chat-completion body into a ChatResult, or raise MalformedResponse (retried)."""
    try:
        body = json.loads(body_text)
    except ValueError:
        raise MalformedResponse(f"response body is not JSON: {body_text[:200]!r}") from None
    if not isinstance(body, dict):
        raise MalformedResponse(f"response body is not a JSON object: {body_text[:200]!r}")
    if isinstance(body.get("error"), dict):
        raise MalformedResponse(f"endpoint returned an error object with status 200: {body['error']!r}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedResponse(f"response has no choices: {body_text[:200]!r}")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise MalformedResponse(f"response choice has no message: {body_text[:200]!r}")

    raw_content = message.get("content") or ""
    if not isinstance(raw_content, str):
        raw_content = json.dumps(raw_content, ensure_ascii=False)
    think_reasoning, text = split_reasoning_text(raw_content)
    # vLLM/SGLang reasoning parsers return `reasoning_content`; newer vLLM names it `reasoning`.
    field_reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    if not isinstance(field_reasoning, str):
        field_reasoning = json.dumps(field_reasoning, ensure_ascii=False)
    reasoning = "\n\n".join(part for part in (field_reasoning.strip(), think_reasoning) if part)

    tool_calls = tuple(
        _parse_tool_call(call, index) for index, call in enumerate(message.get("tool_calls") or [])
    )

    usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
    prompt_tokens = _as_int(usage.get("prompt_tokens")) if usage else None
    completion_tokens = _as_int(usage.get("completion_tokens")) if usage else None
    estimated = prompt_tokens is None or completion_tokens is None
    if prompt_tokens is None:
        prompt_tokens = prompt_estimate
    if completion_tokens is None:
        completion_tokens = len(raw_content + field_reasoning) // CHARS_PER_TOKEN_ESTIMATE + 1

    finish_reason = choice.get("finish_reason")
    return ChatResult(
        text=text,
        reasoning=reasoning,
        tool_calls=tool_calls,
        finish_reason=str(finish_reason) if finish_reason is not None else None,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        model=str(body.get("model") or model),
        role=role,
        sample_index=request.sample_index,
        cache_key=key,
        cached=False,
        latency_s=latency_s,
        attempts=attempts,
        usage_estimated=estimated,
        raw_content=raw_content,
    )


def _parse_tool_call(call: Any, index: int) -> ToolCall:
    if not isinstance(call, dict):
        raise MalformedResponse(f"tool call #{index} is not an object: {call!r}")
    declared = call.get("function")
    function: dict[str, Any] = declared if isinstance(declared, dict) else {}
    raw_arguments = function.get("arguments")
    if isinstance(raw_arguments, dict | list):
        raw_arguments = json.dumps(raw_arguments, ensure_ascii=False)
    raw_arguments = "" if raw_arguments is None else str(raw_arguments)
    arguments, repaired = parse_tool_arguments(raw_arguments)
    return ToolCall(
        id=str(call.get("id") or f"call_{index}"),
        name=str(function.get("name") or ""),
        arguments=arguments,
        raw_arguments=raw_arguments,
        arguments_repaired=repaired,
    )


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _short(error: BaseException, limit: int = 300) -> str:
    text = str(error)
    return text if len(text) <= limit else text[:limit] + "..."


__all__ = [
    "ChatRequest",
    "ChatResult",
    "LLMCallFailed",
    "LLMClient",
    "SyncLLMClient",
    "ToolCall",
]
