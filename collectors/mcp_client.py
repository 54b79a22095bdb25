"""The MCP client side of the mcp domain: one SDK session on a private event loop, driven synchronously,
and the tool results rendered as the client received them.

`MCPConnection` owns one asyncio event loop per episode; a single owner task enters the SDK's transport
(stdio or streamable HTTP) and session context managers and keeps them open until `close`, and a single
caller task, started once the session is open, runs every request of the episode. The caller's thread
hands it one request and runs the loop until that request is answered (see `MCPConnection._request`).
The SDK's anyio cancel scopes are thus entered and left by the tasks that own them, and N episodes in N
collection threads are N independent loops and servers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, TextIO

import anyio
import httpcore2
import httpx2
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from collectors.mcp_servers import Launch
from collectors.sandbox import SandboxError
from collectors.url_policy import OriginPolicy, URLNotAllowed
from schemas import mcp_observation

DEFAULT_START_TIMEOUT_S = 30.0


class MCPServerError(SandboxError):
    """The MCP server could not start, or died: the episode's environment failed (an env_failure)."""


# -- where an HTTP server may be reached ------------------------------------------------------------

ALLOWED_URLS_ENV = "WORLDLINE_MCP_ALLOWED_URLS"
URL_FIX = (
    f"an operator who trusts that server names its origin in {ALLOWED_URLS_ENV} "
    "(comma-separated, e.g. http://127.0.0.1:8931) or with `worldline collect --mcp-allow-url ORIGIN`"
)


class URLRefused(MCPServerError):
    """An `mcp.url` (or where it resolves, or redirects) that this machine does not connect to;
    `unresolved` when the reason is that its host name has no address now."""

    def __init__(self, message: str, unresolved: bool = False) -> None:
        super().__init__(message)
        self.unresolved = unresolved


@dataclass(frozen=True)
class URLPolicy:
    """Where the collector connects for a task's `mcp.url`: only to http(s) servers whose every address
    is public, unless the operator (never the task) names the server's origin as allowed.

    The check runs at task validation, again when the episode connects, and on every TCP connection
    the HTTP client opens (`guarded_http_client`): each resolves the host, refuses it when any address
    is forbidden, and connects to the address it checked, so a name that changes its answer between
    the checks (DNS rebinding) or a redirect within the origin to another port never reaches what the
    checks refused."""

    allowed: frozenset[tuple[str, str, int]] = frozenset()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> URLPolicy:
        """The origins named in WORLDLINE_MCP_ALLOWED_URLS (comma- or space-separated)."""
        return cls(OriginPolicy.from_env(ALLOWED_URLS_ENV, environ).allowed)

    @property
    def origins(self) -> OriginPolicy:
        """The same origins as the address rule shared with the search domain (collectors.url_policy)."""
        return OriginPolicy(self.allowed, ALLOWED_URLS_ENV)

    def allows(self, host: str, port: int) -> bool:
        """Whether the operator named an origin on this host and port."""
        return self.origins.allows(host, port)

    def check_url(self, url: str, *, resolve_failure_ok: bool = False) -> None:
        """Raise URLRefused unless `url` may be reached. With `resolve_failure_ok`, a host name that
        does not resolve now passes (task validation: connecting will check it again)."""
        try:
            self.origins.check_url(url, resolve_failure_ok=resolve_failure_ok)
        except URLNotAllowed as exc:
            raise URLRefused(str(exc), unresolved=exc.unresolved) from exc


def resolve_checked(host: str, port: int, policy: URLPolicy) -> list[str]:
    """The addresses of `host` (an IP literal is its own), each one checked; URLRefused naming the
    first forbidden address, or saying the name does not resolve."""
    try:
        return policy.origins.resolve_checked(host, port)
    except URLNotAllowed as exc:
        raise URLRefused(str(exc), unresolved=exc.unresolved) from exc


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's network backend that resolves each host itself, checks every address against the
    policy and connects to a checked address (TLS still verifies the URL's host name)."""

    def __init__(self, policy: URLPolicy) -> None:
        self.policy = policy
        self.inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        addresses = await loop.run_in_executor(None, resolve_checked, host, port, self.policy)
        error: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (OSError, httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                error = exc
        raise httpcore2.ConnectError(f"cannot connect to {host}:{port}: {error}")

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise URLRefused(f"a unix socket ({path}) is not an MCP server URL")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def guarded_http_client(policy: URLPolicy, headers: dict[str, str] | None = None) -> httpx2.AsyncClient:
    """The SDK's HTTP client (its timeouts, no redirects of its own), without proxies from the
    environment, whose every connection goes through `GuardedBackend`."""
    transport = httpx2.AsyncHTTPTransport(trust_env=False)
    pool = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore2.AsyncConnectionPool):
        raise MCPServerError("httpx2's transport changed shape: its connection pool cannot be guarded")
    transport._pool = httpcore2.AsyncConnectionPool(
        ssl_context=httpx2.create_ssl_context(trust_env=False), network_backend=GuardedBackend(policy)
    )
    kwargs: dict[str, Any] = {
        "timeout": httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        "transport": transport,
        "trust_env": False,
    }
    if headers:
        kwargs["headers"] = headers
    return httpx2.AsyncClient(**kwargs)


# -- observations ----------------------------------------------------------------------------------


def render_tool_result(result: types.CallToolResult) -> str:
    """The observation of a result the SDK validated (schemas.mcp_observation's convention), for a reply
    whose wire form was not seen; `MCPConnection.last_reply` is the wire form itself."""
    text, _, _ = mcp_observation.render_result(
        result.model_dump(by_alias=True, mode="json", exclude_none=True)
    )
    return text


# -- the connection --------------------------------------------------------------------------------


class MCPConnection:
    """One client session to one server on a private event loop, driven synchronously.

    A single owner task enters the transport and session context managers and keeps them open until
    `close`; a single caller task runs the requests (`list_tools`, `call_tool`) that the caller's thread
    hands it, so the SDK's anyio cancel scopes are entered and left by the task that owns them.
    """

    def __init__(
        self,
        *,
        launch: Launch | None = None,
        url: str | None = None,
        headers: dict[str, str] | None = None,
        errlog: TextIO | None = None,
        call_timeout_s: float = 30.0,
        url_policy: URLPolicy | None = None,
    ) -> None:
        if (launch is None) == (url is None):
            raise ValueError("an MCP connection needs exactly one of a launch (stdio) or a url (HTTP)")
        self.launch, self.url, self.headers = launch, url, headers or {}
        self.errlog = errlog
        # Where a url server may be: checked when the session opens and on every connection it makes.
        self.url_policy = url_policy or (URLPolicy.from_env() if url is not None else URLPolicy())
        self.call_timeout_s = call_timeout_s
        self.loop = asyncio.new_event_loop()
        self.session: ClientSession | None = None
        self.init: types.InitializeResult | None = None
        self._owner: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None
        self._caller: asyncio.Task[None] | None = None
        self._inbox: asyncio.Future[Callable[[], Awaitable[Any]]] | None = None
        self._outcome: tuple[Any, BaseException | None] | None = None
        self._unanswered: str | None = None
        self._interrupted: str | None = None
        self.closed_reason: str | None = None
        # The last reply read from the server, as sent: {"result": {...}} or {"error": {...}}.
        self.last_reply: dict[str, Any] | None = None

    # lifecycle
    def open(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> types.InitializeResult:
        return self.loop.run_until_complete(self._open(timeout_s))

    async def _open(self, timeout_s: float) -> types.InitializeResult:
        self._closing = asyncio.Event()
        ready: asyncio.Future[types.InitializeResult] = self.loop.create_future()
        self._owner = self.loop.create_task(self._own(ready))
        waiting: set[asyncio.Future[Any]] = {ready, self._owner}
        done, _ = await asyncio.wait(waiting, timeout=timeout_s, return_when="FIRST_COMPLETED")
        if ready in done:
            self.init = ready.result()
            self._inbox = self.loop.create_future()
            self._caller = self.loop.create_task(self._serve_requests())
            return self.init
        if self._owner in done:
            exc = self._owner.exception()
            raise MCPServerError(f"the MCP server ended before it initialised: {exc_text(exc)}")
        await self._stop_owner()
        raise MCPServerError(f"the MCP server did not initialise within {timeout_s:g} s")

    async def _own(self, ready: asyncio.Future[types.InitializeResult]) -> None:
        async with contextlib.AsyncExitStack() as stack:
            if self.launch is not None:
                params = StdioServerParameters(
                    command=self.launch.command,
                    args=self.launch.args,
                    env=self.launch.env or None,
                    cwd=self.launch.cwd,
                )
                streams = await stack.enter_async_context(
                    stdio_client(params, errlog=self.errlog or _devnull())
                )
            else:
                assert self.url is not None
                policy = self.url_policy
                await asyncio.get_running_loop().run_in_executor(None, policy.check_url, self.url)
                http_client = await stack.enter_async_context(guarded_http_client(policy, self.headers))
                streams = await stack.enter_async_context(
                    streamable_http_client(self.url, http_client=http_client)
                )
            read, write = streams[0], streams[1]
            # The session reads through a tap that keeps each reply as the server sent it (the SDK's
            # validated result drops fields its model does not know). LIFO unwinding: the session
            # closes, the tap is cancelled, then the transport closes.
            tapped_send, tapped_read = anyio.create_memory_object_stream[Any](0)
            taps = await stack.enter_async_context(anyio.create_task_group())
            taps.start_soon(self._tap, read, tapped_send)
            stack.callback(taps.cancel_scope.cancel)
            session = await stack.enter_async_context(ClientSession(tapped_read, write))
            init = await session.initialize()
            self.session = session
            ready.set_result(init)
            assert self._closing is not None
            await self._closing.wait()

    async def _tap(self, source: Any, sink: Any) -> None:
        """Forward what the transport read to the session, keeping the last tools/call reply (a
        response's `result`, or an error's `error`) as it came off the wire."""
        async with sink:
            async for item in source:
                message = getattr(item, "message", None)
                message = getattr(message, "root", message)
                # Only tools/call answers (a result with `content`, or an error): the SDK may list the
                # tools after a call to validate its structured content, and that reply is not the call's.
                if isinstance(message, types.JSONRPCResponse) and "content" in message.result:
                    self.last_reply = {"result": message.result}
                elif isinstance(message, types.JSONRPCError):
                    self.last_reply = {
                        "error": message.error.model_dump(by_alias=True, mode="json", exclude_none=True)
                    }
                await sink.send(item)

    async def _stop_owner(self) -> None:
        if self._owner is None:
            return
        if self._closing is not None:
            self._closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._owner), timeout=5.0)
        except (TimeoutError, asyncio.CancelledError):
            self._owner.cancel()
        except BaseException:  # the transport's own teardown failure: nothing left to release
            pass
        if not self._owner.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._owner, timeout=5.0)

    async def _stop_caller(self) -> None:
        caller = self._caller
        if caller is None:
            return
        if not caller.done():
            caller.cancel()
            with contextlib.suppress(BaseException):  # its cancellation, or the request it was cut out of
                await asyncio.wait_for(caller, timeout=5.0)
        elif not caller.cancelled():
            caller.exception()  # an interrupt that ended it already reached the thread it interrupted

    def close(self) -> None:
        if self.loop.is_closed():
            return
        try:
            self.loop.run_until_complete(self._stop_caller())
            self.loop.run_until_complete(self._stop_owner())
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.session = None
            self.loop.close()

    # requests
    def _require(self) -> ClientSession:
        if self.session is None:
            raise MCPServerError("the MCP session is not open (call open() first)")
        return self.session

    async def _serve_requests(self) -> None:
        """The caller task: awaits the next request from the caller's thread, runs it, keeps its outcome
        and stops the loop, which hands control back to that thread in the same loop turn that brought
        the answer. A `run_until_complete` per call would cost a task, a done callback and two more loop
        turns each time. Whatever ends a request, the loop is stopped, so the caller's thread never waits
        on a loop that nobody will stop."""
        loop = self.loop
        while True:
            assert self._inbox is not None
            request = await self._inbox
            self._inbox = loop.create_future()
            try:
                self._outcome = (await request(), None)
            except asyncio.CancelledError as exc:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # close() stops this task
                self._outcome = (None, exc)
            except Exception as exc:
                self._outcome = (None, exc)
            except BaseException as exc:  # KeyboardInterrupt, SystemExit: this task ends with it
                self._outcome = (None, exc)
                loop.stop()
                raise
            loop.stop()

    def interrupt(self, reason: str) -> None:
        """From any thread: end the request in flight (its caller gets `MCPServerError(reason)`) and
        refuse later ones. The loop belongs to the caller's thread, so the work is handed to it; when
        no request is in flight nothing runs until the next one, which is refused. `close` still
        releases the session from the caller's thread."""
        self._interrupted = reason
        if not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed in between: nothing to end
                self.loop.call_soon_threadsafe(self._end_request_in_flight, reason)

    def _end_request_in_flight(self, reason: str) -> None:
        if self._unanswered is None or self._outcome is not None or not self.loop.is_running():
            return  # no request is waiting (a close() runs the loop): nothing to hand back
        self._outcome = (None, MCPServerError(f"{self._unanswered} was interrupted: {reason}"))
        if self._caller is not None:
            self._caller.cancel()  # the request it awaits is abandoned with it
        self.loop.stop()

    def _request(self, request: Callable[[], Awaitable[Any]], what: str) -> Any:
        """Run `request` on the caller task and return its result (or raise its exception)."""
        if self._interrupted is not None:
            raise MCPServerError(f"the MCP session was interrupted: {self._interrupted}")
        if self._unanswered is not None:
            raise MCPServerError(f"the MCP session is unusable: {self._unanswered} was interrupted")
        inbox = self._inbox
        if self._caller is None or inbox is None:
            raise MCPServerError("the MCP session is not open (call open() first)")
        if self._caller.done():
            ended = "it was closed" if self._caller.cancelled() else exc_text(self._caller.exception())
            raise MCPServerError(f"the MCP session takes no more requests: {ended}")
        self._outcome = None
        self._unanswered = what
        inbox.set_result(request)
        self.loop.run_forever()  # until the caller task has the outcome and stops the loop
        outcome = self._outcome
        if outcome is None:
            raise MCPServerError(f"the MCP session's caller task ended without answering {what}")
        self._unanswered, self._outcome = None, None
        result, error = outcome
        if error is not None:
            raise error
        return result

    def list_tools(self) -> list[types.Tool]:
        session = self._require()

        async def all_pages() -> list[types.Tool]:
            tools: list[types.Tool] = []
            cursor: str | None = None
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools

        tools: list[types.Tool] = self._request(
            lambda: asyncio.wait_for(all_pages(), self.call_timeout_s), "tools/list"
        )
        return tools

    def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """The server's result; raises MCPError for JSON-RPC errors, timeouts and a closed connection."""
        session = self._require()
        # The SDK's own read timeout answers a slow server with an MCPError (REQUEST_TIMEOUT).
        request = partial(session.call_tool, name, arguments, read_timeout_seconds=self.call_timeout_s)
        self.last_reply = None
        result: types.CallToolResult = self._request(request, f"tools/call {name!r}")
        return result

    def server_alive(self) -> bool:
        return self._owner is not None and not self._owner.done()


def exc_text(exc: BaseException | None) -> str:
    """An exception (or exception group) as one readable line."""
    if exc is None:
        return "no error reported"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(exc_text(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def _devnull() -> TextIO:
    return open("/dev/null", "w")  # the server process keeps writing to it until it exits
