"""The MCP client side of the mcp domain: one SDK session on a private event loop, driven synchronously,
and the tool results rendered as the client received them.

`MCPConnection` owns one asyncio event loop per episode; a single owner task enters the SDK's transport
(stdio or streamable HTTP) and session context managers and keeps them open until `close`, while calls
run on the same loop from the caller's thread (`run_until_complete`). The SDK's anyio cancel scopes are
thus entered and left by the task that owns them, and N episodes in N runner threads are N independent
loops and servers.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
from typing import Any, TextIO

from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from collectors.mcp_servers import Launch
from collectors.sandbox import SandboxError

DEFAULT_START_TIMEOUT_S = 30.0


class MCPServerError(SandboxError):
    """The MCP server could not start, or died: the episode's environment failed (an env_failure)."""


# -- observations ----------------------------------------------------------------------------------


def describe_binary(data: str, mime_type: str | None, what: str) -> str:
    """A base64 payload as a short description: kind, MIME type, decoded size and a digest."""
    try:
        raw = base64.b64decode(data, validate=False)
    except (ValueError, TypeError):
        raw = data.encode()
    digest = hashlib.sha256(raw).hexdigest()[:16]
    return f"[{what} {mime_type or 'unknown type'}, {len(raw)} bytes, sha256 {digest}]"


def describe_block(block: Any) -> dict[str, Any]:
    """One content block in MCP wire form, binary data replaced by its description."""
    obj: dict[str, Any] = block.model_dump(by_alias=True, mode="json", exclude_none=True)
    kind = obj.get("type")
    if kind in ("image", "audio") and isinstance(obj.get("data"), str):
        obj["data"] = describe_binary(obj["data"], obj.get("mimeType"), kind)
    if kind == "resource" and isinstance(obj.get("resource"), dict):
        resource = obj["resource"]
        if isinstance(resource.get("blob"), str):
            resource["blob"] = describe_binary(resource["blob"], resource.get("mimeType"), "blob")
    return obj


def render_tool_result(result: types.CallToolResult) -> str:
    """The tool result as the client received it (MCP JSON, camelCase keys, one line as AgentWorldBench
    records it), binaries described."""
    out: dict[str, Any] = {"content": [describe_block(b) for b in result.content]}
    if result.structured_content is not None:
        out["structuredContent"] = result.structured_content
    out["isError"] = bool(result.is_error)
    return json.dumps(out, ensure_ascii=False)


def render_error(code: int | None, message: str, data: Any = None) -> str:
    """A JSON-RPC error (or a transport failure, code None) as the client saw it."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return json.dumps({"error": error}, ensure_ascii=False)


# -- the connection --------------------------------------------------------------------------------


class MCPConnection:
    """One client session to one server on a private event loop, driven synchronously.

    A single owner task enters the transport and session context managers and keeps them open until
    `close`; calls run on the same loop from the caller's thread (`run_until_complete`), so the SDK's
    anyio cancel scopes are entered and left by the task that owns them.
    """

    def __init__(
        self,
        *,
        launch: Launch | None = None,
        url: str | None = None,
        headers: dict[str, str] | None = None,
        errlog: TextIO | None = None,
        call_timeout_s: float = 30.0,
    ) -> None:
        if (launch is None) == (url is None):
            raise ValueError("an MCP connection needs exactly one of a launch (stdio) or a url (HTTP)")
        self.launch, self.url, self.headers = launch, url, headers or {}
        self.errlog = errlog
        self.call_timeout_s = call_timeout_s
        self.loop = asyncio.new_event_loop()
        self.session: ClientSession | None = None
        self.init: types.InitializeResult | None = None
        self._owner: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None
        self.closed_reason: str | None = None

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
                http_client = None
                if self.headers:
                    from mcp.shared._httpx_utils import create_mcp_http_client

                    http_client = await stack.enter_async_context(
                        create_mcp_http_client(headers=self.headers)
                    )
                streams = await stack.enter_async_context(
                    streamable_http_client(self.url, http_client=http_client)
                )
            read, write = streams[0], streams[1]
            session = await stack.enter_async_context(ClientSession(read, write))
            init = await session.initialize()
            self.session = session
            ready.set_result(init)
            assert self._closing is not None
            await self._closing.wait()

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

    def close(self) -> None:
        if self.loop.is_closed():
            return
        try:
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

        return self.loop.run_until_complete(asyncio.wait_for(all_pages(), self.call_timeout_s))

    def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """The server's result; raises MCPError for JSON-RPC errors, timeouts and a closed connection."""
        session = self._require()
        # The SDK's own read timeout answers a slow server with an MCPError (REQUEST_TIMEOUT).
        return self.loop.run_until_complete(
            session.call_tool(name, arguments, read_timeout_seconds=self.call_timeout_s)
        )

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
