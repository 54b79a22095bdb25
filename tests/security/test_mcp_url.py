"""MCP containment for `mcp.url`: a task's HTTP server address never reaches this machine.

The collector connects from the host to a task's `mcp.url`, so the URL is checked against the
operator's policy (collectors/mcp_client.py `URLPolicy`): only http(s), only public addresses, unless
the operator names the origin in WORLDLINE_MCP_ALLOWED_URLS. A URL refused at validation stops the run
with the task id, the field and the fix; one that turns hostile after validation (a name that now
resolves to the loopback, a redirect) is refused when the episode connects, and the trajectory is an
`env_failure` saying why. The canary's loopback listener records no connection either way.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from collectors.collection import CollectConfig, CollectError, collect
from collectors.environment import Task
from collectors.mcp import MCPEnvironment
from collectors.mcp_client import ALLOWED_URLS_ENV, URLPolicy, URLRefused, guarded_http_client
from schemas import TrajectoryStatus, iter_trajectories
from tests.security.canary import HostCanary
from tests.security.test_mcp import produced_texts
from worldline.cli import app

HOSTILE_URLS = {
    "loopback": ("http://127.0.0.1:{port}/mcp", "127.0.0.1 is not a public address (loopback)"),
    "localhost": ("http://localhost:{port}/mcp", "localhost (which resolves to 127.0.0.1) is not a public"),
    "short-loopback": ("http://127.1:{port}/mcp", "resolves to 127.0.0.1) is not a public address"),
    "decimal-loopback": ("http://2130706433:{port}/", "resolves to 127.0.0.1) is not a public address"),
    "ipv6-loopback": ("http://[::1]:{port}/mcp", "::1 is not a public address (loopback)"),
    "mapped-loopback": ("http://[::ffff:127.0.0.1]:{port}/", "is not a public address (loopback)"),
    "unspecified": ("http://0.0.0.0:{port}/mcp", "0.0.0.0 is not a public address (unspecified)"),
    "metadata": ("http://169.254.169.254/latest/meta-data/", "not a public address (link-local)"),
    "private": ("https://10.0.0.1:{port}/mcp", "10.0.0.1 is not a public address (private)"),
    "file-scheme": ("file://{file}", "must be an http:// or https:// URL"),
    "gopher-scheme": ("gopher://127.0.0.1:{port}/", "must be an http:// or https:// URL"),
}


def task_file(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({"instruction": "reach the host", **row}) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("name", sorted(HOSTILE_URLS))
def test_a_url_that_reaches_this_machine_stops_the_run(
    host_canary: HostCanary, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.delenv(ALLOWED_URLS_ENV, raising=False)
    template, reason = HOSTILE_URLS[name]
    url = template.format(port=host_canary.tcp_port, file=host_canary.file)
    path = task_file(tmp_path, [{"id": f"url-{name}", "mcp": {"url": url}}])
    with pytest.raises(CollectError) as raised:
        collect(CollectConfig(env="mcp", tasks_path=path, policy="scripted", out=tmp_path / "out"))
    message = str(raised.value)
    assert f"(id url-{name}): field 'mcp.url'" in message and reason in message, message
    if "scheme" not in name:
        assert ALLOWED_URLS_ENV in message and "--mcp-allow-url" in message  # the operator's fix
    assert not (tmp_path / "out").exists() or not list(iter_trajectories(tmp_path / "out"))
    host_canary.assert_untouched([message])


def test_only_the_operator_opts_in_to_a_loopback_origin(
    host_canary: HostCanary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The allowed origin is exact: its scheme, host and port; the task cannot widen it."""
    port = host_canary.tcp_port
    monkeypatch.setenv(ALLOWED_URLS_ENV, f"http://127.0.0.1:{port}")
    MCPEnvironment.validate_task(
        Task(id="ok", instruction="x", config={"mcp": {"url": f"http://127.0.0.1:{port}/mcp"}})
    )
    for other in (
        f"http://127.0.0.1:{port + 1}/mcp",
        f"https://127.0.0.1:{port}/",
        f"http://localhost:{port}/",
    ):
        with pytest.raises(Exception, match=r"field 'mcp.url' is refused"):
            MCPEnvironment.validate_task(Task(id="no", instruction="x", config={"mcp": {"url": other}}))
    monkeypatch.setenv(ALLOWED_URLS_ENV, "127.0.0.1:8931")
    with pytest.raises(Exception, match=rf"{ALLOWED_URLS_ENV}: '127.0.0.1:8931' is not an http"):
        MCPEnvironment.validate_task(
            Task(id="bad", instruction="x", config={"mcp": {"url": "http://127.0.0.1/"}})
        )
    assert host_canary.connections == []


@pytest.fixture
def redirector(host_canary: HostCanary) -> Iterator[str]:
    """An HTTP server on the loopback that answers every request with a redirect to the canary."""
    target = f"http://127.0.0.1:{host_canary.tcp_port}/mcp"

    class Redirect(http.server.BaseHTTPRequestHandler):
        def _redirect(self) -> None:
            self.send_response(307)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_DELETE = _redirect

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_rebinding_and_redirects_are_refused_when_the_episode_connects(
    host_canary: HostCanary, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redirector: str
) -> None:
    """A name that resolved to a public address at validation and to the loopback when the episode
    connects, and an operator-allowed server that redirects to the canary: each an env_failure saying
    why, in one run, and the canary is never reached."""
    real = socket.getaddrinfo
    answers = iter(["93.184.215.14"])  # validation's answer; every later one is the loopback

    def rebinding(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "rebind.example":
            address = next(answers, "127.0.0.1")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setenv(ALLOWED_URLS_ENV, redirector)
    rows = [
        {
            "id": "rebind",
            "mcp": {"url": f"http://rebind.example:{host_canary.tcp_port}/mcp", "start_timeout_s": 10},
        },
        {"id": "redirect", "mcp": {"url": f"{redirector}/mcp", "start_timeout_s": 10}},
    ]
    out = tmp_path / "out"
    summary = collect(
        CollectConfig(env="mcp", tasks_path=task_file(tmp_path, rows), policy="scripted", out=out)
    )
    assert summary.written == 2
    by_id = {t.metadata["task_id"]: t for t in iter_trajectories(out)}
    rebind, redirect = by_id["rebind"], by_id["redirect"]
    assert rebind.status == TrajectoryStatus.ENV_FAILURE and redirect.status == TrajectoryStatus.ENV_FAILURE
    assert "rebind.example (which resolves to 127.0.0.1) is not a public address (loopback)" in (
        rebind.status_reason or ""
    ), rebind.status_reason
    assert "failed to start" in (redirect.status_reason or ""), redirect.status_reason
    host_canary.assert_untouched(produced_texts(out))


def test_every_connection_of_the_http_client_is_checked(host_canary: HostCanary) -> None:
    """The client's own connections are guarded, whatever asks for them: an origin the operator did
    not allow (another port of an allowed host) is refused before a socket opens."""
    policy = URLPolicy(frozenset({("http", "127.0.0.1", host_canary.tcp_port + 1)}))

    async def fetch() -> None:
        async with guarded_http_client(policy) as client:
            await client.get(f"http://127.0.0.1:{host_canary.tcp_port}/")

    with pytest.raises(URLRefused, match="127.0.0.1 is not a public address"):
        asyncio.run(fetch())
    host_canary.assert_untouched()


def test_the_cli_flag_is_the_operators_opt_in(
    host_canary: HostCanary, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`worldline collect` refuses a loopback `mcp.url` (exit 2, the task and the fix named); with
    `--mcp-allow-url` naming that origin, the run goes ahead and the episode reaches the server (here
    a closed port: an env_failure with the connection error)."""
    monkeypatch.setenv(ALLOWED_URLS_ENV, "")  # none allowed; restored after the flag sets it
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # nothing listens there once the probe is closed
    origin = f"http://127.0.0.1:{closed}"
    tasks = task_file(tmp_path, [{"id": "local", "mcp": {"url": f"{origin}/mcp", "start_timeout_s": 5}}])
    args = ["collect", "--env", "mcp", "--tasks", str(tasks), "--no-progress"]
    refused = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert refused.exit_code != 0 and "(id local): field 'mcp.url' is refused" in " ".join(
        refused.output.split()
    ), refused.output
    allowed = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "b"), "--mcp-allow-url", origin])
    assert allowed.exit_code == 0, allowed.output
    [trajectory] = list(iter_trajectories(tmp_path / "b"))
    assert trajectory.status == TrajectoryStatus.ENV_FAILURE and "failed to start" in (
        trajectory.status_reason or ""
    )
    host_canary.assert_untouched(produced_texts(tmp_path / "b"))
