"""An HTTP server on 127.0.0.1 for the bundled web applications (collectors/sites/apps.py).

Tasks refer to it as `{sites}` in `web.start_url` and in `goto(...)` actions. The web domain runs it
inside each browser sandbox, on the sandbox's own loopback (collectors/browser_helper.py starts it on
port 8000), so pages reach it and nothing on the host. This module and apps.py import only the standard
library and each other: they are copied into the sandbox and run on the image's python3.
"""

from __future__ import annotations

import mimetypes
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from collectors.sites.apps import Request, Response, route

SITES_PLACEHOLDER = "{sites}"


class _Handler(BaseHTTPRequestHandler):
    server_version = "worldline-sites/1"

    def log_message(self, format: str, *args: object) -> None:  # requests are not logged
        return

    def _serve(self, method: str) -> None:
        parts = urlsplit(self.path)
        server_: SitesServer = self.server  # type: ignore[assignment]
        if method == "GET" and self._serve_static(server_, parts.path):
            return
        body = b""
        if method == "POST":
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, 1_000_000))
        form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        cookie = self.headers.get("Cookie") or ""
        session = ""
        for item in cookie.split(";"):
            key, _, value = item.strip().partition("=")
            if key == "wl_session":
                session = value
        server: SitesServer = self.server  # type: ignore[assignment]
        response = route(Request(method, parts.path, query, form, session), server.state)
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        for key, value in response.headers.items():
            self.send_header(key, value)
        data = response.body.encode("utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _serve_static(self, server: SitesServer, path: str) -> bool:
        """A file of a static tree mounted at /<name>/ (GET only, no listings, nothing outside the
        tree); False when `path` is not under a mounted name, so the bundled apps answer it."""
        name, _, rest = path.lstrip("/").partition("/")
        root = server.static.get(name)
        if root is None:
            return False
        target = os.path.realpath(os.path.join(root, unquote(rest)))
        inside = target.startswith(os.path.realpath(root) + os.sep)
        if not inside or not os.path.isfile(target):
            body = b"not found"
            self.send_response(404)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
        else:
            with open(target, "rb") as f:
                body = f.read()
            self.send_response(200)
            self.send_header("Content-Type", mimetypes.guess_type(target)[0] or "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        return True

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")


class SitesServer(ThreadingHTTPServer):
    """The bundled sites on one port; `state` holds server-side sessions (carts, orders)."""

    daemon_threads = True

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.state: dict[str, dict[str, object]] = {}
        # Static trees served read-only at /<name>/ (a task's `web.static`), replaced per task.
        self.static: dict[str, str] = {}
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> SitesServer:
        self._thread = threading.Thread(target=self.serve_forever, name="worldline-sites", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def serve_sites(port: int = 0) -> SitesServer:
    """Start the bundled sites on 127.0.0.1 (a free port when 0) in a background thread."""
    return SitesServer(port).start()


_shared: SitesServer | None = None
_shared_lock = threading.Lock()


def shared_sites_url() -> str:
    """The base URL of this process's shared sites server, started on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = serve_sites()
        return _shared.base_url


__all__ = ["SITES_PLACEHOLDER", "Response", "SitesServer", "serve_sites", "shared_sites_url"]
