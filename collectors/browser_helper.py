#!/usr/bin/python3
"""The web domain's in-sandbox side: Playwright, Chromium and the bundled sites, inside a container of
worldline/browser (infra/build-browser-image.sh), driven over the exec's stdin/stdout in JSON lines.

The collector (collectors/web.py, on the host) copies this file and collectors/sites/ into the sandbox
and runs `python3 browser_helper.py`; the helper serves the bundled sites on the sandbox's own loopback
(SITES_URL) and answers one request per line:

    {"cmd": "launch", "args": [...], "allow": [...], "sites": true}
                                 -> {"ok": true, "version": "...", "sites_url": "..."}
    {"cmd": "reset", "start_url": "...", "allow": [...], "timeout_ms": 5000, "settle_ms": 150}
                                 -> {"ok": true, "status": 200, "page": {...}} | {"ok": false, "error", "kind"}
    {"cmd": "act", "name": "click", "args": {"bid": "e7"}}  -> {"ok": true, "info": {}, "page": {...}}
    {"cmd": "act", "name": "fill", "target": {"role": "textbox", "name": "Email"}, "args": {"value": "a"}}
    {"cmd": "observe"}                                 -> {"ok": true, "page": {...}}
    {"cmd": "quit"}

`page` holds what the observation and the failure checks need (URL, title, tabs, the ARIA snapshot,
the main document's HTTP status, body text, crash, the browser's process count and memory) and
`refused`: every request the allow-list stopped since the previous reply. An action that fails has
`"ok": false`, `error` (shown to the agent) and `kind`: syntax, arguments, playwright or refused.

The allow-list is a set of origins (scheme, host, port); `url_verdict` is the one rule, used here on
every request, WebSocket and navigation the page makes, and by the collector before it sends a URL.
This file imports only the standard library at module level (Playwright when it runs): it must run on
the image's system interpreter alone.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import traceback
from typing import Any
from urllib.parse import urlsplit

SITES_PORT = 8000
SITES_URL = f"http://127.0.0.1:{SITES_PORT}"
POLICY_DIR = "/tmp/chromium-policy"  # /etc/chromium/policies/managed/allow.json links here (the image)
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
# Schemes a page may load without a network request leaving the browser.
INERT_SCHEMES = ("data", "blob", "about")
# What Chromium draws for each character of a password field (-webkit-text-security: disc).
BULLET = "\u2022"
_SECRET_TEST = "(e instanceof HTMLInputElement && (e.type === 'password' || getComputedStyle(e).webkitTextSecurity && getComputedStyle(e).webkitTextSecurity !== 'none'))"
SECRET_VALUES_JS = (
    f"() => Array.from(document.querySelectorAll('input')).filter(e => {_SECRET_TEST}).map(e => e.value)"
)
SECRET_OF_ELEMENT_JS = f"e => {_SECRET_TEST} ? e.value : null"
# A textbox line of the ARIA snapshot with a value: `- textbox "Password" [active] [ref=e9]: hunter2`.
TEXTBOX_VALUE = re.compile(r"^(\s*- textbox\b.*?\[ref=([a-z0-9]+)\][^:]*: )(.*)$")


def origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s)/ws(s) URL; ws counts as http and wss as https."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def url_verdict(url: str, allow: list[str], *, navigation: bool) -> str | None:
    """None when `url` may be loaded, else why it is refused. `allow` holds origins such as
    "http://127.0.0.1:8000"; a navigation may also go to about:blank, and a subresource may use an
    inert scheme (data:, blob:) that never leaves the browser."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if navigation and url.strip() == "about:blank":
        return None
    if not navigation and scheme in INERT_SCHEMES:
        return None
    target = origin_of(url)
    if target is None:
        shown = f"{scheme}:" if scheme else "a URL without a scheme"
        return f"the scheme {shown} is not allowed (only http(s) to the task's allowed origins)"
    allowed = {origin_of(a) for a in allow} - {None}
    if target in allowed:
        return None
    scheme, host, port = target
    host = f"[{host}]" if ":" in host else host
    origins = ", ".join(sorted(allow)) or "none"
    return f"{scheme}://{host}:{port} is not in the task's allow-list (allowed: {origins})"


class ActionError(Exception):
    """An action the page cannot apply as written; `kind` says whose mistake it is."""

    def __init__(self, message: str, kind: str = "syntax") -> None:
        super().__init__(message)
        self.kind = kind


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


class Driver:
    """One Chromium with one context (fresh cookies and storage) per reset."""

    def __init__(self) -> None:
        self.playwright: Any = None
        self.browser: Any = None
        self.context: Any = None
        self.page: Any = None
        self.sites: Any = None
        self.allow: list[str] = []
        self.timeout_ms = 5000
        self.settle_ms = 150
        self.refused: list[dict[str, Any]] = []
        self.statuses: dict[int, int] = {}  # id(page) -> HTTP status of its last main-frame navigation
        self.crashed: str | None = None
        self.watched: set[int] = set()  # id() of the pages whose events are subscribed
        # A page-defined episode (MiniWoB++): JS that starts it after load and reads its status.
        self.episode: dict[str, str] | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def launch(self, req: dict[str, Any]) -> dict[str, Any]:
        from playwright.sync_api import sync_playwright

        if req.get("sites", True) and self.sites is None:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from collectors.sites.server import serve_sites

            self.sites = serve_sites(SITES_PORT)
        self.write_policy([str(a) for a in req.get("allow", [SITES_URL])])
        self.playwright = sync_playwright().start()
        self.browser = self.playwright.chromium.launch(
            executable_path=req.get("executable", "/usr/bin/chromium"),
            args=list(req.get("args", [])),
            downloads_path="/tmp/downloads",
        )
        return {"ok": True, "version": self.browser.version, "sites_url": SITES_URL if self.sites else ""}

    @staticmethod
    def write_policy(allow: list[str]) -> None:
        """Chromium's own URL allow-list for this sandbox: every URL blocked but the allowed origins and
        about:blank. The browser enforces it on every navigation, redirects included (request routing
        does not see a redirect's target), so it must be in place before Chromium starts."""
        os.makedirs(POLICY_DIR, exist_ok=True)
        policy = {"URLBlocklist": ["*"], "URLAllowlist": sorted(set(allow)) + ["about:blank"]}
        with open(os.path.join(POLICY_DIR, "allow.json"), "w") as f:
            json.dump(policy, f)

    def reset(self, req: dict[str, Any]) -> dict[str, Any]:
        self.close_context()
        self.allow = [str(a) for a in req.get("allow", [])]
        self.timeout_ms = int(req.get("timeout_ms", 5000))
        self.settle_ms = int(req.get("settle_ms", 150))
        self.refused, self.statuses, self.crashed, self.watched = [], {}, None, set()
        self.episode = req.get("episode") or None
        if self.sites is not None:  # this task's static trees only, never the previous task's
            self.sites.static = {str(k): str(v) for k, v in (req.get("static") or {}).items()}
        self.context = self.browser.new_context(
            viewport=req.get("viewport", {"width": 1280, "height": 800}),
            locale="en-GB",
            timezone_id="UTC",
            accept_downloads=False,
            service_workers="block",  # a service worker's fetches would bypass the routes below
        )
        self.context.set_default_timeout(self.timeout_ms)
        self.context.route("**/*", self._route)
        self.context.route_web_socket(re.compile(".*"), self._route_web_socket)
        self.context.on("page", self._watch_page)
        self.context.on("requestfailed", self._request_failed)
        self.page = self.context.new_page()
        url = str(req["start_url"])
        why = url_verdict(url, self.allow, navigation=True)
        if why:
            self._refuse(url, "document", True, why)
            return {"ok": False, "kind": "refused", "error": f"navigation to {url} refused: {why}"}
        from playwright.sync_api import Error as PlaywrightError

        try:
            response = self.page.goto(url, wait_until="load", timeout=max(self.timeout_ms, 15000))
        except PlaywrightError as exc:
            return {
                "ok": False,
                "kind": "playwright",
                "error": first_line(exc),
                "refused": self.take_refused(),
            }
        reply: dict[str, Any] = {"ok": True, "status": response.status if response is not None else None}
        if self.episode:
            try:
                self.page.evaluate(self.episode["start"])
                self.page.wait_for_function(self.episode["ready"], timeout=self.timeout_ms)
                reply["episode"] = self.episode_status()
            except PlaywrightError as exc:
                return {
                    "ok": False,
                    "kind": "playwright",
                    "error": f"the page's episode did not start: {first_line(exc)}",
                }
        return reply

    def episode_status(self) -> Any:
        """What the page says about its episode (the task's `status` expression), or None."""
        if not self.episode:
            return None
        try:
            return self.page.evaluate(self.episode["status"])
        except Exception as exc:  # a page that navigated away has no episode any more
            return {"error": first_line(exc)}

    def close_context(self) -> None:
        if self.context is not None:
            try:
                self.context.close()
            except Exception:  # the browser may already be gone
                pass
        self.context = self.page = None

    def quit(self) -> None:
        self.close_context()
        for closer in (self.browser, self.playwright):
            try:
                if closer is self.playwright and closer is not None:
                    closer.stop()
                elif closer is not None:
                    closer.close()
            except Exception:
                pass
        if self.sites is not None:
            self.sites.stop()

    # -- the allow-list ----------------------------------------------------------------------------
    def _refuse(self, url: str, kind: str, navigation: bool, why: str) -> None:
        entry = {"url": url[:500], "kind": kind, "navigation": navigation, "reason": why}
        if not any(r["url"] == entry["url"] and r["kind"] == kind for r in self.refused):
            self.refused.append(entry)

    def _route(self, route: Any) -> None:
        request = route.request
        navigation = request.is_navigation_request()
        why = url_verdict(request.url, self.allow, navigation=navigation)
        if why is None:
            route.continue_()
            return
        self._refuse(request.url, request.resource_type, navigation, why)
        route.abort("blockedbyclient")

    def _route_web_socket(self, ws: Any) -> None:
        why = url_verdict(ws.url, self.allow, navigation=False)
        if why is None:
            ws.connect_to_server()
            return
        self._refuse(ws.url, "websocket", False, why)
        ws.close(code=1008, reason="refused by the sandbox's allow-list")

    def _request_failed(self, request: Any) -> None:
        failure = request.failure or ""
        # Our own aborts are recorded by _route; the browser's policy blocks (file:, chrome:) here.
        navigation = request.is_navigation_request()
        if "ERR_BLOCKED_BY_ADMINISTRATOR" in failure:
            # An allowed URL that the policy still blocks was redirected to one outside the allow-list.
            why = url_verdict(request.url, self.allow, navigation=navigation) or (
                "it redirects outside the task's allow-list (blocked by the browser's policy)"
            )
            self._refuse(request.url, request.resource_type, navigation, why)
        elif "ERR_UNSAFE_REDIRECT" in failure:
            why = "the browser refuses a redirect to a local resource (file:, chrome:, ...)"
            self._refuse(request.url, request.resource_type, navigation, why)

    def _adopt_new_tabs(self) -> None:
        """Tabs the page opened whose "page" event has not been handled yet (the event can arrive after
        the action returned): watched now, the newest one current."""
        for page in list(self.context.pages):
            if id(page) not in self.watched:
                self._watch_page(page)

    def _watch_page(self, page: Any) -> None:
        if id(page) in self.watched:
            return
        self.watched.add(id(page))
        # A popup or target=_blank link becomes the active tab first: subscribing to the events below
        # is a round trip to the driver, during which the action's reply may already be composed.
        popup = self.page is not None
        if popup:
            self.page = page
        page.on("response", lambda r: self._record_status(page, r))
        page.on("crash", lambda _p: setattr(self, "crashed", f"the tab {page.url} crashed"))
        page.on("download", self._download)
        page.on("filechooser", self._file_chooser)
        page.on("console", self._console)
        if popup:
            try:
                page.wait_for_load_state("domcontentloaded", timeout=self.timeout_ms)
            except Exception:
                pass
        try:
            # Chromium's policy stops a page's own navigations (links, scripts, forms) before any
            # request exists; the navigation the page asked for is visible over CDP.
            cdp = self.context.new_cdp_session(page)
            cdp.send("Page.enable")
            for event in ("Page.frameRequestedNavigation", "Page.frameScheduledNavigation"):
                cdp.on(event, self._requested_navigation)
        except Exception:  # a page that closed at once
            pass

    def _requested_navigation(self, event: dict[str, Any]) -> None:
        url = str(event.get("url", ""))
        why = url_verdict(url, self.allow, navigation=True)
        if why:
            self._refuse(url, "document", True, why)

    def _console(self, message: Any) -> None:
        # Chromium itself stops a page's link or script from opening a local URL (file:, chrome:); the
        # only trace it leaves is this console error.
        try:
            text = str(message.text)
        except Exception:
            return
        if text.startswith("Not allowed to load local resource:"):
            url = text.split(":", 1)[1].strip()
            self._refuse(url, "document", True, "the browser does not let pages open local resources")

    def _download(self, download: Any) -> None:
        self._refuse(download.url, "download", False, "downloads are disabled in the sandbox")
        try:
            download.cancel()
        except Exception:
            pass

    def _file_chooser(self, chooser: Any) -> None:
        self._refuse(self.page.url if self.page else "", "filechooser", False, "no file is offered to pages")

    def _record_status(self, page: Any, response: Any) -> None:
        try:
            if response.request.is_navigation_request() and response.frame == page.main_frame:
                self.statuses[id(page)] = response.status
        except Exception:  # a response of a page that is closing
            pass

    def take_refused(self) -> list[dict[str, Any]]:
        refused, self.refused = self.refused, []
        return refused

    # -- actions -----------------------------------------------------------------------------------
    def locator(self, bid: str) -> Any:
        locator = self.page.locator(f"aria-ref={bid}")
        if locator.count() == 0:
            raise ActionError(
                f"no element with ref {bid} on the current page (refs come from the latest tree)"
            )
        return locator

    def target_locator(self, target: dict[str, Any]) -> Any:
        """The element the object form names: role + accessible name, or visible text, searched in the
        page and then in each iframe; the first visible match wins."""
        exact = bool(target.get("exact", False))
        frames = [self.page.main_frame] + [f for f in self.page.frames if f != self.page.main_frame]
        for frame in frames:
            if "role" in target:
                kwargs = {"name": target["name"], "exact": exact} if "name" in target else {}
                locator = frame.get_by_role(str(target["role"]).replace(" ", ""), **kwargs)
            elif "text" in target or "name" in target:
                locator = frame.get_by_text(str(target.get("text", target.get("name"))), exact=exact)
            else:
                raise ActionError("an object action needs 'role' (and 'name') or 'text' to find its element")
            for i in range(min(locator.count(), 10)):
                if locator.nth(i).is_visible():
                    return locator.nth(i)
        described = ", ".join(f"{k}={v!r}" for k, v in target.items())
        raise ActionError(f"no visible element with {described} on the current page")

    def act(self, req: dict[str, Any]) -> dict[str, Any]:
        name, a = str(req["name"]), dict(req.get("args") or {})
        page, timeout = self.page, self.timeout_ms
        if req.get("target") is not None:
            getattr(self.target_locator(req["target"]), name)(*a.values())
            self.settle()
            return {"resolved": dict(req["target"])}
        if name == "noop":
            page.wait_for_timeout(min(float(a.get("wait_ms", 1000)), 10000))
        elif name in ("click", "dblclick"):
            getattr(self.locator(a["bid"]), name)(button=a.get("button", "left"))
        elif name in ("hover", "clear", "focus"):
            getattr(self.locator(a["bid"]), name)()
        elif name == "fill":
            self.locator(a["bid"]).fill(str(a["value"]))
        elif name == "press":
            self.locator(a["bid"]).press(str(a["key_comb"]))
        elif name == "select_option":
            options = a["options"]
            self.locator(a["bid"]).select_option(
                label=options if isinstance(options, list) else [str(options)]
            )
        elif name == "mouse_move":
            page.mouse.move(float(a["x"]), float(a["y"]))
        elif name in ("mouse_click", "mouse_dblclick"):
            page.mouse.click(
                float(a["x"]),
                float(a["y"]),
                button=a.get("button", "left"),
                click_count=2 if name == "mouse_dblclick" else 1,
            )
        elif name in ("mouse_down", "mouse_up"):
            page.mouse.move(float(a["x"]), float(a["y"]))
            getattr(page.mouse, name.removeprefix("mouse_"))(button=a.get("button", "left"))
        elif name == "scroll":
            page.mouse.wheel(float(a["delta_x"]), float(a["delta_y"]))
        elif name == "keyboard_press":
            page.keyboard.press(str(a["key"]))
        elif name == "keyboard_type":
            page.keyboard.type(str(a["text"]))
        elif name == "tab_focus":
            pages = self.context.pages
            index = int(a["index"])
            if not 0 <= index < len(pages):
                raise ActionError(f"no tab {index}; open tabs: 0..{len(pages) - 1}")
            self.page = pages[index]
            self.page.bring_to_front()
        elif name == "new_tab":
            self.page = self.context.new_page()
        elif name == "tab_close":
            closing = self.page
            pages = [p for p in self.context.pages if p is not closing]
            self.page = pages[-1] if pages else self.context.new_page()
            closing.close()
        elif name == "go_back":
            page.go_back(timeout=timeout)
        elif name == "go_forward":
            page.go_forward(timeout=timeout)
        elif name == "goto":
            url = str(a["url"])
            why = url_verdict(url, self.allow, navigation=True)
            if why:
                self._refuse(url, "document", True, why)
                raise ActionError(f"navigation to {url} refused: {why}; the page did not change", "refused")
            page.goto(url, timeout=max(timeout, 15000))
        else:
            raise ActionError(f"unknown web action {name!r}")
        self.settle()
        return {}

    def settle(self) -> None:
        """Wait for a navigation the action started (if any) and a short moment for client-side updates."""
        self._adopt_new_tabs()
        try:
            self.page.wait_for_load_state("load", timeout=self.timeout_ms)
        except Exception:
            pass
        if self.settle_ms:
            self.page.wait_for_timeout(self.settle_ms)

    # -- observation -------------------------------------------------------------------------------
    def page_state(self) -> dict[str, Any]:
        page = self.page
        try:
            snapshot = self.mask_secrets(page.aria_snapshot(mode="ai", timeout=self.timeout_ms))
        except Exception as exc:  # a page mid-navigation or crashed: say so instead of failing the run
            snapshot = f"(the accessibility tree could not be read: {first_line(exc)})"
        tabs = []
        for i, p in enumerate(self.context.pages):
            tabs.append(f"[{i}] {safe_title(p) or p.url}" + (" (current)" if p is page else ""))
        try:
            text = page.evaluate("() => (document.body ? document.body.innerText : '').slice(0, 4000)")
        except Exception:
            text = ""
        procs, rss_mb = self.resources()
        return {
            "url": page.url,
            "title": safe_title(page),
            "tabs": tabs,
            "snapshot": snapshot,
            "status": self.statuses.get(id(page)),
            "text": text if isinstance(text, str) else "",
            "crashed": self.crashed,
            "procs": procs,
            "rss_mb": rss_mb,
        }

    def mask_secrets(self, snapshot: str) -> str:
        """The snapshot with the value of every password field shown as the browser draws it: one
        bullet per character (`textbox "Password" [ref=e9]: •••••••`). Playwright's snapshot gives a
        password input's value in clear text like any textbox; a field counts as secret when it is an
        input of type password or its text is drawn masked (`-webkit-text-security`)."""
        values: set[str] = set()
        for frame in self.page.frames:
            try:
                found = frame.evaluate(SECRET_VALUES_JS)
            except Exception:  # a frame that is navigating or gone
                continue
            values.update(v for v in found if isinstance(v, str) and v)
        if not values:
            return snapshot
        lines = snapshot.split("\n")
        for i, line in enumerate(lines):
            match = TEXTBOX_VALUE.match(line)
            if match is None or not any(
                v in match.group(3) or json.dumps(v)[1:-1] in match.group(3) for v in values
            ):
                continue
            try:
                secret = self.page.locator(f"aria-ref={match.group(2)}").evaluate(SECRET_OF_ELEMENT_JS)
            except Exception:
                continue
            if isinstance(secret, str) and secret:
                lines[i] = match.group(1) + BULLET * len(secret)
        return "\n".join(lines)

    def resources(self) -> tuple[int, float]:
        """The browser's processes (as Chromium lists them over CDP) and their resident memory."""
        try:
            session = self.browser.new_browser_cdp_session()
            try:
                info = session.send("SystemInfo.getProcessInfo")
            finally:
                session.detach()
        except Exception:  # a Chromium without SystemInfo, or one that is gone
            return 0, 0.0
        pids = [int(p["id"]) for p in info.get("processInfo", []) if p.get("id")]
        return len(pids), sum(rss_kb(pid) for pid in pids) / 1000.0


def safe_title(page: Any) -> str:
    try:
        return str(page.title())
    except Exception:
        return ""


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def handle(driver: Driver, req: dict[str, Any]) -> dict[str, Any]:
    from playwright.sync_api import Error as PlaywrightError

    cmd = req.get("cmd")
    if cmd == "launch":
        return driver.launch(req)
    if cmd == "reset":
        reply = driver.reset(req)
    elif cmd == "observe":
        reply = {"ok": True}
    elif cmd == "act":
        try:
            reply = {"ok": True, "info": driver.act(req)}
        except PlaywrightError as exc:
            reply = {"ok": False, "kind": "playwright", "error": first_line(exc)}
        except ActionError as exc:
            reply = {"ok": False, "kind": exc.kind, "error": str(exc)}
        except (TypeError, ValueError, KeyError) as exc:
            reply = {"ok": False, "kind": "arguments", "error": f"bad arguments: {exc}"}
    else:
        return {"ok": False, "kind": "protocol", "error": f"unknown command {cmd!r}"}
    if driver.page is not None:
        if driver.episode and cmd != "reset":
            reply["episode"] = driver.episode_status()
        reply["page"] = driver.page_state()
    reply["refused"] = reply.get("refused", []) + driver.take_refused()
    return reply


def main() -> int:
    driver = Driver()
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing but replies may reach the protocol stream
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                req = json.loads(line)
            except json.JSONDecodeError as exc:
                reply: dict[str, Any] = {"ok": False, "kind": "protocol", "error": f"not JSON: {exc}"}
            else:
                if req.get("cmd") == "quit":
                    break
                try:
                    reply = handle(driver, req)
                except Exception as exc:  # the helper answers every request; the collector decides
                    traceback.print_exc()
                    reply = {
                        "ok": False,
                        "kind": "helper",
                        "error": f"{type(exc).__name__}: {first_line(exc)}",
                    }
            out.write(json.dumps(reply, ensure_ascii=False) + "\n")
            out.flush()
    finally:
        watchdog = threading.Timer(10, lambda: os._exit(0))
        watchdog.daemon = True
        watchdog.start()
        driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
