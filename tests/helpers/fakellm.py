"""A scripted OpenAI-compatible HTTP server for tests, driven by the real `openai` client.

It speaks the chat-completions wire format on 127.0.0.1 (random port) and answers from, in order:
matching rules, then a FIFO script, then a default responder (echo unless replaced). Every reply can
carry latency or a fault: HTTP 429 with Retry-After, 5xx, a delay past the client timeout, an invalid
JSON body, or a dropped connection. It records every request and the peak number in flight.

Use it through the `fake_llm` fixture (conftest.py loads this module as a pytest plugin).
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from worldline.llm import LLMConfig

FAKE_MODEL = "fake-model"

RequestJSON = dict[str, Any]


@dataclass(frozen=True)
class FakeToolCall:
    """A tool call the fake model makes; `arguments` as a dict is JSON-encoded, a str is sent verbatim
    (so tests can send deliberately broken JSON)."""

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    id: str | None = None


@dataclass(frozen=True)
class FakeReply:
    """One scripted answer or fault. Token counts default to a chars/4 estimate of the request/answer."""

    text: str | None = ""
    reasoning_content: str | None = None
    think: str | None = None  # put inside <think>...</think> at the start of `content`
    tool_calls: Sequence[FakeToolCall] = ()
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    omit_usage: bool = False
    model: str | None = None
    status: int = 200
    error_message: str | None = None
    retry_after: float | str | None = None
    delay_s: float = 0.0
    raw_body: bytes | None = None  # sent verbatim with `status` instead of a well-formed completion
    drop_connection: bool = False

    @classmethod
    def rate_limited(cls, retry_after: float | str | None = 0) -> FakeReply:
        return cls(status=429, retry_after=retry_after, error_message="rate limited")

    @classmethod
    def server_error(cls, status: int = 500) -> FakeReply:
        return cls(status=status, error_message="internal server error")

    @classmethod
    def bad_request(cls, message: str = "invalid request") -> FakeReply:
        return cls(status=400, error_message=message)

    @classmethod
    def slow(cls, delay_s: float, text: str = "late") -> FakeReply:
        return cls(text=text, delay_s=delay_s)

    @classmethod
    def malformed_body(
        cls, raw_body: bytes = b'{"id": "chatcmpl-broken", "choices": [ {"message": '
    ) -> FakeReply:
        return cls(raw_body=raw_body)

    @classmethod
    def dropped_connection(cls) -> FakeReply:
        return cls(drop_connection=True)

    @property
    def kind(self) -> str:
        if self.drop_connection:
            return "drop"
        if self.raw_body is not None:
            return "malformed"
        if self.status != 200:
            return f"http_{self.status}"
        return "ok"


Responder = Callable[[RequestJSON], "FakeReply | str"]


@dataclass
class FakeRule:
    """Answer requests that match every given condition with `reply` (at most `times` times)."""

    reply: FakeReply | str | Responder
    model: str | None = None
    user_contains: str | None = None
    match: Callable[[RequestJSON], bool] | None = None
    times: int | None = None
    hits: int = 0

    def matches(self, request: RequestJSON) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.model is not None and request.get("model") != self.model:
            return False
        if self.user_contains is not None and self.user_contains not in last_user_message(request):
            return False
        return self.match is None or bool(self.match(request))


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it (header names lower-cased), with the kind of reply it got
    (ok, http_429, malformed, drop, ...)."""

    method: str
    path: str
    headers: dict[str, str]
    body: RequestJSON | None
    reply_kind: str
    received_at: float = field(default_factory=time.monotonic)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])

    @property
    def last_user_message(self) -> str:
        return last_user_message(self.body or {})


def last_user_message(request: Mapping[str, Any]) -> str:
    """The text of the last user message of a chat request ('' when there is none)."""
    for message in reversed(request.get("messages") or []):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def _lower_headers(headers: Any) -> dict[str, str]:
    return {str(name).lower(): str(value) for name, value in headers.items()}


def echo_responder(request: RequestJSON) -> FakeReply:
    """The default answer: echo the last user message."""
    return FakeReply(text=f"echo: {last_user_message(request)}")


class _BackloggedHTTPServer(ThreadingHTTPServer):
    """socketserver's default listen backlog is 5: a burst of concurrent connects overflows it, the
    kernel drops SYNs and clients see resets or 1 s retransmits. A real endpoint queues them."""

    request_queue_size = 1024


class FakeLLMServer:
    """The scripted server; `base_url` ends in /v1 like a vLLM or OpenAI endpoint."""

    def __init__(self, *, cache_dir: Path | None = None) -> None:
        self.cache_dir = cache_dir
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._queue: deque[FakeReply | str | Responder] = deque()
        self._rules: list[FakeRule] = []
        self._default: Responder = echo_responder
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._ids = itertools.count(1)
        self._httpd = _BackloggedHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> FakeLLMServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fakellm", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # scripting ---------------------------------------------------------------------------------------
    def script(self, *replies: FakeReply | str | Responder) -> FakeLLMServer:
        """Queue replies, consumed one per chat request in order (a str is a plain text answer)."""
        with self._lock:
            self._queue.extend(replies)
        return self

    def add_rule(
        self,
        reply: FakeReply | str | Responder,
        *,
        model: str | None = None,
        user_contains: str | None = None,
        match: Callable[[RequestJSON], bool] | None = None,
        times: int | None = None,
    ) -> FakeRule:
        """Answer matching requests with `reply`; rules are checked before the script, first match wins."""
        rule = FakeRule(reply=reply, model=model, user_contains=user_contains, match=match, times=times)
        with self._lock:
            self._rules.append(rule)
        return rule

    def set_default(self, responder: Responder) -> None:
        """Replace the echo responder used when no rule matches and the script is empty."""
        with self._lock:
            self._default = responder

    def reset(self) -> None:
        """Forget script, rules, recorded requests and the concurrency peak."""
        with self._lock:
            self._queue.clear()
            self._rules.clear()
            self._default = echo_responder
            self._requests.clear()
            self._max_in_flight = self._in_flight

    # observations ------------------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """Every chat-completion request received, in arrival order."""
        with self._lock:
            return [request for request in self._requests if request.path.endswith("/chat/completions")]

    @property
    def all_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def max_concurrency(self) -> int:
        """The most chat requests that were being handled at the same moment."""
        with self._lock:
            return self._max_in_flight

    @property
    def pending_script(self) -> int:
        with self._lock:
            return len(self._queue)

    def config(self, **overrides: Any) -> LLMConfig:
        """An LLMConfig pointing here, with a per-test cache and short timeouts/backoffs for fast tests."""
        cache_dir = self.cache_dir
        values: dict[str, Any] = {
            "base_url": self.base_url,
            "api_key": "test-key",
            "default_model": FAKE_MODEL,
            "concurrency": 4,
            "timeout_s": 2.0,
            "max_retries": 3,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
            "retry_after_max_s": 0.5,
            "cache_path": (cache_dir / "llm-cache.sqlite") if cache_dir is not None else None,
        }
        values.update(overrides)
        return LLMConfig(**values)

    # request handling (runs on server threads) -------------------------------------------------------
    def _choose_reply(self, request: RequestJSON) -> FakeReply:
        with self._lock:
            source: FakeReply | str | Responder | None = None
            for rule in self._rules:
                if rule.matches(request):
                    rule.hits += 1
                    source = rule.reply
                    break
            if source is None and self._queue:
                source = self._queue.popleft()
            if source is None:
                source = self._default
        if callable(source) and not isinstance(source, FakeReply):
            source = source(request)
        return FakeReply(text=source) if isinstance(source, str) else source

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _completion_body(self, request: RequestJSON, reply: FakeReply) -> dict[str, Any]:
        content = reply.text
        if reply.think is not None:
            content = f"<think>{reply.think}</think>{content or ''}"
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id or f"call_{index}",
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.arguments
                        if isinstance(call.arguments, str)
                        else json.dumps(call.arguments),
                    },
                }
                for index, call in enumerate(reply.tool_calls)
            ]
        finish_reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        body: dict[str, Any] = {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or request.get("model") or FAKE_MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        }
        if not reply.omit_usage:
            prompt_chars = len(json.dumps(request.get("messages") or []))
            completion_chars = len(content or "") + len(reply.reasoning_content or "")
            prompt_tokens = reply.prompt_tokens if reply.prompt_tokens is not None else prompt_chars // 4 + 1
            completion_tokens = (
                reply.completion_tokens if reply.completion_tokens is not None else completion_chars // 4 + 1
            )
            body["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
        return body


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class FakeLLMHandler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so a dropped connection never poisons a pooled one.
        protocol_version = "HTTP/1.0"
        # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm holds the
        # body until the client's delayed ACK (~40 ms), a latency no real endpoint adds.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); nothing to deliver

        def do_GET(self) -> None:
            server._record(RecordedRequest("GET", self.path, _lower_headers(self.headers), None, "ok"))
            if self.path.rstrip("/") == "/v1/models":
                self._send_json(
                    200,
                    {"object": "list", "data": [{"id": FAKE_MODEL, "object": "model", "owned_by": "fake"}]},
                )
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                request = json.loads(raw or b"null")
            except ValueError:
                request = None
            if self.path.rstrip("/") != "/v1/chat/completions":
                server._record(
                    RecordedRequest("POST", self.path, _lower_headers(self.headers), request, "http_404")
                )
                self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            if not isinstance(request, dict):
                server._record(
                    RecordedRequest("POST", self.path, _lower_headers(self.headers), None, "http_400")
                )
                self._send_json(400, {"error": {"message": "body is not a JSON object", "type": "invalid"}})
                return
            server._enter()
            try:
                reply = server._choose_reply(request)
                server._record(
                    RecordedRequest("POST", self.path, _lower_headers(self.headers), request, reply.kind)
                )
                if reply.delay_s > 0 and server._stopping.wait(reply.delay_s):
                    return
                self._answer(request, reply)
            finally:
                server._leave()

        def _answer(self, request: RequestJSON, reply: FakeReply) -> None:
            if reply.drop_connection:
                # Close without a status line: the client sees the server disconnect mid-request.
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if reply.raw_body is not None:
                self._send_json(reply.status, reply.raw_body)
                return
            if reply.status != 200:
                headers = {}
                if reply.retry_after is not None:
                    headers["Retry-After"] = str(reply.retry_after)
                error_type = "rate_limit_error" if reply.status == 429 else "fake_error"
                message = reply.error_message or f"fake HTTP {reply.status}"
                self._send_json(
                    reply.status,
                    {"error": {"message": message, "type": error_type, "code": str(reply.status)}},
                    headers,
                )
                return
            self._send_json(200, server._completion_body(request, reply))

    return FakeLLMHandler


@pytest.fixture
def fake_llm(tmp_path: Path) -> Iterator[FakeLLMServer]:
    """A running FakeLLMServer; `fake_llm.config()` gives an LLMConfig aimed at it with a tmp cache."""
    server = FakeLLMServer(cache_dir=tmp_path / "llm-cache")
    server.start()
    try:
        yield server
    finally:
        server.close()
