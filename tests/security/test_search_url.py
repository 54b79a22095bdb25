"""Containment of the search domain's http backend: a task chooses `search.url`, the pages
`web_extractor` fetches and `search.api_key_env`; the collector runs on the host, so none of them may
reach the host's own services, its private networks or cloud metadata, or carry a host secret out.
Engine-free: the backend is plain HTTP from the collector."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from collectors import url_policy
from collectors.environment import EnvironmentOptions, Task, TaskError, tool_call_action
from collectors.search import SearchEnvironment
from collectors.search_backends import SearxngBackend
from collectors.url_policy import URLNotAllowed
from tests.security.canary import HostCanary

FORBIDDEN = [
    "http://127.0.0.1:{port}",
    "http://localhost:{port}",
    "http://[::1]:{port}",
    "http://0.0.0.0:{port}",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1:{port}",
    "file://{file}",
]


class Recorder(BaseHTTPRequestHandler):
    """A SearXNG-shaped service the operator allowed; `/go?to=URL` redirects, every request is kept."""

    seen: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # the http.server API names it
        url = urlparse(self.path)
        query = parse_qs(url.query)
        Recorder.seen.append({"path": self.path, "headers": dict(self.headers)})
        if url.path == "/go":
            self.send_response(302)
            self.send_header("Location", query["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = (
            json.dumps({"results": [{"url": "http://example.org/a", "title": "A", "content": "a"}]})
            if url.path == "/search"
            else "<html><title>ok</title><main><p>fine page</p></main></html>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if url.path == "/search" else "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def allowed_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("WORLDLINE_SEARCH_ALLOWED_URLS", origin)  # as an operator opts in
    try:
        yield origin
    finally:
        server.shutdown()
        server.server_close()


def attack_urls(canary: HostCanary) -> list[str]:
    return [u.format(port=canary.tcp_port, file=canary.file) for u in FORBIDDEN]


def http_task(url: str, **extra: Any) -> Task:
    return Task(id="evil", instruction="x", config={"search": {"backend": "http", "url": url, **extra}})


def test_forbidden_search_urls_are_refused_at_validation(host_canary: HostCanary) -> None:
    for url in attack_urls(host_canary):
        with pytest.raises(TaskError) as caught:
            SearchEnvironment.validate_task(http_task(url))
        message = str(caught.value)
        assert "evil" in message and "search" in message and "url" in message, message
        if not url.startswith("file:"):
            assert "WORLDLINE_SEARCH_ALLOWED_URLS" in message and "not a public address" in message
    host_canary.assert_untouched()


def test_forbidden_search_urls_are_an_env_failure_at_reset(host_canary: HostCanary) -> None:
    """Without validation (a task file edited after it was checked), reset refuses with the reason;
    the runner records a ValueError from reset as the episode's env_failure."""
    for url in attack_urls(host_canary):
        env = SearchEnvironment(EnvironmentOptions())
        with pytest.raises(URLNotAllowed, match="task evil") as caught:
            env.reset(http_task(url))
        assert isinstance(caught.value, ValueError)
        env.close()
    host_canary.assert_untouched()


def test_web_extractor_refuses_forbidden_pages_and_the_episode_goes_on(
    host_canary: HostCanary, allowed_server: str
) -> None:
    task = http_task(allowed_server)
    SearchEnvironment.validate_task(task)
    env = SearchEnvironment(EnvironmentOptions())
    env.reset(task)
    texts: list[str] = []
    try:
        attacks = [
            *attack_urls(host_canary),
            f"{allowed_server}/go?to=http://127.0.0.1:{host_canary.tcp_port}/",
        ]
        for url in attacks:
            step = env.step(tool_call_action("web_extractor", {"url": url}))
            texts.append(step.observation.text)
            assert step.observation.is_error, (url, step.observation.text)
            assert step.observation.text.startswith("Error:"), step.observation.text
        assert "not a public address" in texts[0] and "not a public address" in texts[-1]
        fine = env.step(tool_call_action("web_extractor", {"url": f"{allowed_server}/page"}))
        assert not fine.observation.is_error and "fine page" in fine.observation.text
        found = env.step(tool_call_action("web_search", {"query": "q"}))
        assert not found.observation.is_error and "example.org/a" in found.observation.text
    finally:
        env.close()
    assert any(s["path"].startswith("/go") for s in Recorder.seen)  # the redirect was served, not followed
    host_canary.assert_untouched(texts)


def test_redirect_chains_are_bounded(allowed_server: str) -> None:
    env = SearchEnvironment(EnvironmentOptions())
    env.reset(http_task(allowed_server))
    chain = f"{allowed_server}/go?to=" + "/go?to=" * 5 + "/page"  # six redirects before the page
    try:
        step = env.step(tool_call_action("web_extractor", {"url": chain}))
    finally:
        env.close()
    assert step.observation.is_error and "more than 5 redirects" in step.observation.text, (
        step.observation.text
    )
    assert not any(s["path"] == "/page" for s in Recorder.seen)


def test_a_name_that_rebinds_to_the_loopback_after_the_check_is_refused_on_connect(
    host_canary: HostCanary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first answer is public (the check passes), every later one is the canary: the connection
    checks its own resolution and connects only to an address it checked."""
    answers = iter(["93.184.216.34"])

    def rebinding(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        address = next(answers, "127.0.0.1")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(url_policy.socket, "getaddrinfo", rebinding)
    backend = SearxngBackend(f"http://rebind.test:{host_canary.tcp_port}", timeout_s=2)
    try:
        with pytest.raises(Exception, match="not a public address") as caught:
            backend.search("x", 3)
    finally:
        backend.close()
    assert "127.0.0.1" in str(caught.value)
    host_canary.assert_untouched([str(caught.value)])


def test_api_key_env_may_not_name_a_host_variable(
    host_canary: HostCanary, allowed_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOST_DEPLOY_TOKEN", host_canary.token)
    task = http_task(allowed_server, api_key_env="HOST_DEPLOY_TOKEN")
    with pytest.raises(TaskError) as caught:
        SearchEnvironment.validate_task(task)
    message = str(caught.value)
    assert "evil" in message and "search.api_key_env" in message and "WORLDLINE_SEARCH_" in message
    env = SearchEnvironment(EnvironmentOptions())  # and without validation, reset refuses it too
    with pytest.raises(URLNotAllowed, match="WORLDLINE_SEARCH_"):
        env.reset(task)
    env.close()
    sent = [json.dumps(s) for s in Recorder.seen]
    assert not sent  # nothing was requested at all
    host_canary.assert_untouched([message, *sent])


def test_an_exposed_search_key_and_a_literal_key_still_work(
    allowed_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLDLINE_SEARCH_KEY", "exposed-key")
    for extra, bearer in (
        ({"api_key_env": "WORLDLINE_SEARCH_KEY"}, "exposed-key"),
        ({"api_key": "lit"}, "lit"),
    ):
        Recorder.seen = []
        task = http_task(allowed_server, **extra)
        SearchEnvironment.validate_task(task)
        env = SearchEnvironment(EnvironmentOptions())
        env.reset(task)
        try:
            env.step(tool_call_action("web_search", {"query": "q"}))
        finally:
            env.close()
        assert Recorder.seen[0]["headers"]["Authorization"] == f"Bearer {bearer}"
