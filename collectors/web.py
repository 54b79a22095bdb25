"""Web domain: Playwright driving Debian's Chromium; the observation is the page's accessibility tree.

Observation: URL, title, open tabs, the focused element and the last action's error, then Playwright's
ARIA snapshot in "ai" mode: one line per node (role, accessible name, states, value) with a `[ref=eN]`
on every node an action can address (`fN...` inside iframes, whose content is inlined). Those refs are
the element ids (BrowserGym's bids): Playwright keeps them stable for an element across snapshots and
resolves them at action time (`aria-ref=e7`). It was chosen over the CDP full AX tree with our own ids
(benchmarks/gui_bench.py measures both on the same pages): rendered as text, the CDP tree is about
twice the characters and Qwen tokens (the raw CDP reply about 20x), it needs our own filtering of
ignored and generic nodes, it holds no iframe content without one more call per frame, and acting on
its ids needs a node -> element mapping we would maintain ourselves. The snapshot costs ~10-50 ms per
page against ~5-15 ms for the CDP call: small next to the step itself.

Actions: BrowserGym's calls (`click("e7")`, `fill("e9", "hi")`, `goto(url)`, `noop(500)`, ...) parsed
with `ast` (never evaluated), their tool-call form, and the object form `{"action": "click", "role":
"link", "name": "About"}` resolved against the live page at replay time.

Where the browser runs: in a sandbox container from our own image, worldline/browser
(infra/build-browser-image.sh: Debian's chromium and fonts, python3 and Playwright with its node
driver), created by collectors/sandbox.py like a terminal's, with `--network none`, a read-only root,
tmpfs for /tmp, HOME and /dev/shm, memory and process limits. Chromium, the Playwright driver and the
page-driving code (collectors/browser_helper.py) all run in that container; the collector on the host
speaks JSON lines with the helper over the exec's stdin/stdout, the only channel between them. The
bundled sites (collectors/sites/) are copied in and served on the sandbox's own loopback
(`{sites}` is http://127.0.0.1:8000 there), so nothing on the host is reachable from the page. A
task's `web.static` folders (MiniWoB++ pages) are copied in too and served read-only by the same
server at `{sites}/<name>/`; `web.miniwob` starts a MiniWoB++ page's episode (collectors/web_episodes.py).
What a page may load is an allow-list of origins per task: the bundled sites, plus the task's
`web.allow` when it has `"network": true`. `url_verdict` refuses every other host, port and scheme
(file:, chrome:, view-source:, javascript:, ...) before a request leaves the browser: the collector
checks start URLs and `goto`, the helper routes every request and WebSocket of the context,
Chromium's managed policy (written per sandbox by the helper) blocks every URL but the allowed origins
on every navigation, redirects included, as well as downloads and file dialogs, and a host-resolver
rule lets only the allowed hosts resolve (IP literals included). A refusal is the environment's answer:
the turn's `info["refused"]` lists what was stopped and why, a refused navigation is the observation's
last action error (the tab keeps its page, or shows Chromium's "blocked" page), and a refused
start URL ends the episode as `env_failure` with the reason. A watchdog compares the browser's
processes (listed by Chromium, measured in the sandbox) after every step against `memory_mb` and `pids`.
"""

from __future__ import annotations

import json
import re
import select
import socket
import struct
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import docker.errors

from collectors import engine
from collectors.browser_helper import SITES_URL, origin_of, url_verdict
from collectors.environment import INFO_EPISODE_END, Check, ResetResult, StepResult, Task, TaskError
from collectors.gui_common import (
    ActionSyntaxError,
    EnvFailure,
    GuiCall,
    GuiEnvironment,
    StateTracker,
    bind_arguments,
    detect_page_failure,
    gui_call_from_action,
    state_text,
    tools_from_signatures,
)
from collectors.sandbox import Sandbox, SandboxError, SandboxLimits
from collectors.sites import SITES_PLACEHOLDER
from collectors.sites.apps import APPS as BUNDLED_APPS
from collectors.static_site import StaticSiteError, check_site, read_site, tree_digest
from collectors.web_episodes import check_miniwob, miniwob_episode
from schemas import Action, ActionKind, ActionSpace, Domain, Observation, ObservationFormat

IMAGE = "worldline/browser"
BUILD_SCRIPT = engine.REPO_ROOT / "infra" / "build-browser-image.sh"
CHROMIUM = "/usr/bin/chromium"  # inside the image
HELPER = Path(__file__).with_name("browser_helper.py")
SITES_DIR = Path(__file__).with_name("sites")
HELPER_DIR = "/work/browser"  # in the work tmpfs of the sandbox: the helper and the sites' code
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
VIEWPORT = {"width": 1280, "height": 800}

# The text of Playwright's TargetClosedError: the page, its context or the whole browser is gone.
BROWSER_CLOSED = "Target page, context or browser has been closed"


@dataclass(frozen=True)
class BrowserLimits:
    """Resource limits of one browser; a task overrides them with `"web": {"limits": {...}}`."""

    memory_mb: int = 2048  # the whole process tree's resident memory
    pids: int = 64  # processes in the browser's tree
    js_heap_mb: int = 512  # V8 old-space cap per renderer
    renderer_processes: int = 4
    action_timeout_ms: int = 5000
    settle_ms: int = 150  # after an action: time for client-side updates before the snapshot

    def with_overrides(self, overrides: dict[str, Any] | None, where: str) -> BrowserLimits:
        if not overrides:
            return self
        known = set(asdict(self))
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise TaskError(
                f"{where}: web.limits has unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return replace(self, **{k: int(v) for k, v in overrides.items()})


def launch_args(limits: BrowserLimits, network: bool, allow: list[str] | None = None) -> list[str]:
    """Chromium's flags: limits, and a host-resolver rule under which only the allowed origins' hosts
    resolve (IP literals included), so not even a redirect the routes cannot see reaches another host."""
    args = CHROMIUM_ARGS + [
        f"--js-flags=--max-old-space-size={limits.js_heap_mb}",
        f"--renderer-process-limit={limits.renderer_processes}",
    ]
    hosts = sorted({o[1] for o in (origin_of(a) for a in allow or [SITES_URL]) if o is not None})
    excluded = ", ".join(f"EXCLUDE {h}" for h in hosts) if allow is not None or not network else ""
    if excluded:
        args.append(f"--host-resolver-rules=MAP * ~NOTFOUND, {excluded}")
    return args


# name -> (description, JSON-schema properties, required); the property order is the positional order.
_S = {"type": "string"}
_N = {"type": "number"}
WEB_ACTIONS: dict[str, tuple[str, dict[str, dict[str, Any]], list[str]]] = {
    "noop": ("Do nothing and wait wait_ms milliseconds.", {"wait_ms": _N}, []),
    "click": ("Click the element with this ref (bid) from the tree.", {"bid": _S, "button": _S}, ["bid"]),
    "dblclick": ("Double-click an element.", {"bid": _S, "button": _S}, ["bid"]),
    "hover": ("Move the mouse over an element.", {"bid": _S}, ["bid"]),
    "fill": ("Replace the value of a text field.", {"bid": _S, "value": _S}, ["bid", "value"]),
    "clear": ("Clear a text field.", {"bid": _S}, ["bid"]),
    "focus": ("Focus an element.", {"bid": _S}, ["bid"]),
    "press": (
        "Focus an element and press a key combination such as Enter or Control+a.",
        {"bid": _S, "key_comb": _S},
        ["bid", "key_comb"],
    ),
    "select_option": (
        "Choose option(s) of a select by label or value.",
        {"bid": _S, "options": {"anyOf": [_S, {"type": "array", "items": _S}]}},
        ["bid", "options"],
    ),
    "mouse_move": ("Move the mouse to page coordinates.", {"x": _N, "y": _N}, ["x", "y"]),
    "mouse_click": ("Click at page coordinates.", {"x": _N, "y": _N, "button": _S}, ["x", "y"]),
    "mouse_dblclick": ("Double-click at page coordinates.", {"x": _N, "y": _N, "button": _S}, ["x", "y"]),
    "mouse_down": ("Press a mouse button at coordinates.", {"x": _N, "y": _N, "button": _S}, ["x", "y"]),
    "mouse_up": ("Release a mouse button at coordinates.", {"x": _N, "y": _N, "button": _S}, ["x", "y"]),
    "scroll": ("Scroll by dx, dy pixels.", {"delta_x": _N, "delta_y": _N}, ["delta_x", "delta_y"]),
    "keyboard_press": ("Press a key (Enter, Tab, Control+a) on the focused element.", {"key": _S}, ["key"]),
    "keyboard_type": ("Type text into the focused element.", {"text": _S}, ["text"]),
    "tab_focus": ("Switch to the tab with this index.", {"index": {"type": "integer"}}, ["index"]),
    "new_tab": ("Open a new blank tab.", {}, []),
    "tab_close": ("Close the current tab.", {}, []),
    "go_back": ("Go back in history.", {}, []),
    "go_forward": ("Go forward in history.", {}, []),
    "goto": ("Navigate the current tab to a URL.", {"url": _S}, ["url"]),
    "send_msg_to_user": ("Send a message to the user (no effect on the page).", {"text": _S}, ["text"]),
    "report_infeasible": ("Declare the task infeasible, with the reason.", {"reason": _S}, ["reason"]),
}
# Actions the object form {"action", "role", "name" | "text", ...} may use, with their extra arguments.
TARGET_ACTIONS = {
    "click": [],
    "dblclick": [],
    "hover": [],
    "fill": ["value"],
    "clear": [],
    "focus": [],
    "press": ["key_comb"],
    "select_option": ["options"],
    "check": [],
    "uncheck": [],
}

ACTION_SPACE = ActionSpace(
    description=(
        "You operate a Chromium browser. The observation shows the URL, the title, the open tabs, the "
        "focused element, the last action's error and the page's accessibility tree, where every element "
        "you can act on carries [ref=ID] (IDs inside iframes start with f). Act with one call per turn, "
        'BrowserGym style: click("e7"), fill("e9", "text"), select_option("e12", "Express"), '
        'press("e9", "Enter"), hover, dblclick, focus, clear, scroll(0, 300), keyboard_type("hi"), '
        'keyboard_press("Enter"), mouse_click(x, y), goto("http://..."), go_back(), go_forward(), '
        'new_tab(), tab_focus(1), tab_close(), noop(500), send_msg_to_user("..."), '
        'report_infeasible("..."). An element can also be addressed by role and accessible name: '
        '{"action": "click", "role": "link", "name": "About"}.'
    ),
    tools=tools_from_signatures(WEB_ACTIONS),
)

_REF_LINE = re.compile(r"\[ref=([a-z0-9]+)\]")
_HEADING = re.compile(r'^\s*- heading "((?:[^"\\]|\\.)*)"', re.M)
_ACTIVE = re.compile(r"^\s*- (.*\[active\].*)$", re.M)


def resolve_start_url(url: str, sites_url: str = SITES_URL) -> str:
    """`{sites}` replaced by the bundled sites' base URL inside the sandbox."""
    return url.replace(SITES_PLACEHOLDER, sites_url) if SITES_PLACEHOLDER in url else url


def focused_line(snapshot: str) -> str:
    """The snapshot node marked [active] that is deepest (the focused element), without its children."""
    found: list[str] = _ACTIVE.findall(snapshot)
    if not found:
        return "none"
    return found[-1].rstrip(":").replace(" [active]", "").strip()


def allowed_origins(config: dict[str, Any]) -> list[str]:
    """The origins a task's pages may reach: the bundled sites, then the task's `web.allow`."""
    return [SITES_URL] + [str(a).rstrip("/") for a in config.get("allow") or []]


def sandbox_limits(base: SandboxLimits, limits: BrowserLimits, network: bool) -> SandboxLimits:
    """The terminal's sandbox limits, raised where Chromium needs more: the container's memory holds
    the browser's budget plus the driver and helper, its pids limit counts threads (Chromium runs
    dozens per process), and /tmp holds the profile and, with --disable-dev-shm-usage, shared memory."""
    return replace(
        base,
        memory_mb=max(base.memory_mb, limits.memory_mb + 512),
        pids=max(base.pids, 1024),
        tmp_mb=max(base.tmp_mb, 512),
        network=network,
    )


class HelperError(EnvFailure):
    """The browser helper in the sandbox failed (crashed, timed out, or its sandbox is gone)."""


_FRAME = struct.Struct(">BxxxL")  # the engine's multiplexed exec stream: kind (1 stdout, 2 stderr), size


class HelperClient:
    """JSON lines with collectors/browser_helper.py over one exec's stdin/stdout (no TTY); one request
    at a time. The exec is the only channel between the host and the sandbox."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        api: Any = sandbox.client.api
        try:
            exec_id = api.exec_create(
                sandbox.container.id,
                ["python3", f"{HELPER_DIR}/browser_helper.py"],
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                workdir="/tmp",
            )
            conn = api.exec_start(exec_id, socket=True, tty=False)
        except docker.errors.APIError as exc:
            raise HelperError(f"sandbox {sandbox.name}: the browser helper did not start: {exc}") from exc
        self.sock: socket.socket = getattr(conn, "_sock", conn)
        self._conn = conn
        self._out = b""
        self._raw = b""
        self._err = b""
        self._lock = threading.Lock()

    def call(self, timeout_s: float, **request: Any) -> dict[str, Any]:
        with self._lock:
            try:
                self.sock.sendall((json.dumps(request) + "\n").encode("utf-8"))
            except OSError as exc:
                raise HelperError(f"{self._who()}: cannot send {request.get('cmd')!r}: {exc}") from exc
            deadline = time.monotonic() + timeout_s
            while b"\n" not in self._out:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise HelperError(
                        f"{self._who()} did not answer {request.get('cmd')!r} within {timeout_s:.0f} s"
                    )
                try:
                    ready, _, _ = select.select([self.sock], [], [], remaining)
                    chunk = self.sock.recv(1 << 16) if ready else b""
                except OSError as exc:
                    raise HelperError(f"{self._who()}: the connection broke: {exc}") from exc
                if ready and not chunk:
                    raise HelperError(f"{self._who()} exited: {self._stderr()}")
                self._demux(chunk)
            line, _, self._out = self._out.partition(b"\n")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _demux(self, chunk: bytes) -> None:
        self._raw += chunk
        while len(self._raw) >= _FRAME.size:
            kind, size = _FRAME.unpack_from(self._raw)
            if len(self._raw) < _FRAME.size + size:
                return
            payload = self._raw[_FRAME.size : _FRAME.size + size]
            self._raw = self._raw[_FRAME.size + size :]
            if kind == 2:
                self._err = (self._err + payload)[-4000:]
            else:
                self._out += payload

    def _who(self) -> str:
        return f"the browser helper in sandbox {self.sandbox.name}"

    def stderr_tail(self) -> str:
        """The helper's last stderr lines (Chromium's and the driver's complaints)."""
        try:  # whatever the helper wrote before its reply is already in the stream
            while select.select([self.sock], [], [], 0.2)[0]:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    break
                self._demux(chunk)
        except OSError:
            pass
        return self._stderr()

    def _stderr(self) -> str:
        text = self._err.decode("utf-8", "replace").strip()
        return text[-1500:] or "(no output)"

    def close(self) -> None:
        try:
            self.sock.sendall(b'{"cmd": "quit"}\n')
        except OSError:
            pass
        for closer in (self.sock, self._conn):
            try:
                closer.close()
            except Exception:  # already closed
                pass


@dataclass
class BrowserSandbox:
    """A sandbox of worldline/browser with the helper running and Chromium launched in it. One per
    task in collection; tests and benchmarks share one across tasks (a fresh context per reset)."""

    sandbox: Sandbox
    helper: HelperClient
    version: str
    sites_url: str
    network: bool
    copied: set[str] = field(default_factory=set)  # sandbox folders holding static trees

    @classmethod
    def open(
        cls,
        client: Any,
        limits: BrowserLimits | None = None,
        base: SandboxLimits | None = None,
        *,
        network: bool = False,
        allow: list[str] | None = None,
        run_label: str = "",
    ) -> BrowserSandbox:
        """Start the sandbox, copy the helper and the sites in, and launch Chromium with `allow` (default:
        the bundled sites) as its own URL allow-list; each reset's context enforces the task's as well."""
        limits = limits or BrowserLimits()
        allow = allow or [SITES_URL]
        box_limits = sandbox_limits(base or SandboxLimits(), limits, network)
        try:
            sandbox = Sandbox.create(client, IMAGE, box_limits, run_label=run_label)
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(
                f"the web domain's image {IMAGE} is missing; build it with {BUILD_SCRIPT}"
            ) from exc
        try:
            # One flat archive per directory: the helper, then the sites' package it imports.
            sandbox.put_files({"browser_helper.py": HELPER.read_bytes()}, base=HELPER_DIR)
            sandbox.put_files({"__init__.py": ""}, base=f"{HELPER_DIR}/collectors")
            sites = {path.name: path.read_bytes() for path in sorted(SITES_DIR.glob("*.py"))}
            sandbox.put_files(sites, base=f"{HELPER_DIR}/collectors/sites")
            helper = HelperClient(sandbox)
            reply = helper.call(
                90,
                cmd="launch",
                executable=CHROMIUM,
                args=launch_args(limits, network, allow),
                allow=allow,
                sites=True,
            )
            if not reply.get("ok"):
                raise HelperError(
                    f"sandbox {sandbox.name}: Chromium did not start: {reply.get('error')}; "
                    f"the helper said: {helper.stderr_tail()}"
                )
        except BaseException:
            sandbox.close()
            raise
        return cls(sandbox, helper, str(reply["version"]), str(reply["sites_url"]), network)

    def put_static(self, static: dict[str, str], task_id: str) -> dict[str, str]:
        """Copy a task's static trees (`web.static`: name -> host site folder, collectors/static_site.py)
        into the sandbox once each; returns name -> folder in the sandbox, for the sites server to
        serve at {sites}/<name>/."""
        placed: dict[str, str] = {}
        for name, folder in sorted(static.items()):
            try:
                files = read_site(folder, f"task {task_id}: web.static {name!r}")
            except StaticSiteError as exc:
                raise TaskError(str(exc)) from exc
            where = f"{HELPER_DIR}/static/{tree_digest(files)[:16]}"
            if where not in self.copied:
                self.sandbox.put_files(files, base=where)
                self.copied.add(where)
            placed[name] = where
        return placed

    def close(self) -> None:
        self.helper.close()
        self.sandbox.close()


class WebEnvironment(GuiEnvironment):
    """One browser context (fresh cookies and storage) per task, in a browser sandbox started per
    environment, or a shared one passed in (tests and benchmarks reuse one)."""

    domain = Domain.WEB
    action_space = ACTION_SPACE
    default_image = IMAGE
    config_fields = frozenset({"start_url", "limits", "allow", "static", "miniwob"})

    def __init__(self, options: Any, browser: BrowserSandbox | None = None) -> None:
        super().__init__(options)
        self._own_browser = browser is None
        self.browser = browser
        self.limits = BrowserLimits()
        self.tracker = StateTracker()
        self.allow: list[str] = [SITES_URL]
        self.last_error = ""
        self.network = False
        self.page: dict[str, Any] | None = None  # the helper's last page state
        self.blocked_page = False  # the tab shows the error page of a navigation we refused

    # -- interface ----------------------------------------------------------------------------------
    @classmethod
    def needs_engine(cls, task: Task | None = None) -> bool:
        return True

    @classmethod
    def validate_task(cls, task: Task, where: str = "task") -> None:
        config = cls.checked_config(task, where)
        url = config.get("start_url")
        # Any scheme is accepted here: what a task may load is the sandbox's decision at run time,
        # recorded in its trajectory (a refused start URL is an env_failure that says why).
        if not isinstance(url, str) or not re.match(r"^(\{sites\}|[A-Za-z][A-Za-z0-9+.-]*:)", url):
            raise TaskError(
                f"{where} (id {task.id}): field 'web.start_url' must be an http(s) URL or start with {{sites}} "
                f'(the bundled local sites), e.g. "{{sites}}/shop/"; got {url!r}'
            )
        allow = config.get("allow", [])
        if not isinstance(allow, list) or not all(
            isinstance(a, str) and origin_of(a) and urlsplit_path(a) in ("", "/") for a in allow
        ):
            raise TaskError(
                f"{where} (id {task.id}): field 'web.allow' must be a list of origins such as "
                f'"https://example.org" or "http://10.0.0.5:8080" (scheme, host, port; no path); got {allow!r}'
            )
        if allow and not task.network:
            raise TaskError(
                f"{where} (id {task.id}): field 'web.allow' lists origins outside the sandbox, which has no "
                'network unless the task sets "network": true; add it or drop web.allow'
            )
        BrowserLimits().with_overrides(config.get("limits"), f"{where} (id {task.id})")
        static = config.get("static", {})
        if not isinstance(static, dict) or not all(
            isinstance(k, str)
            and re.fullmatch(r"[a-z0-9][a-z0-9_-]*", k)
            and k not in BUNDLED_APPS
            and isinstance(v, str)
            and Path(v).is_absolute()
            for k, v in static.items()
        ):
            raise TaskError(
                f"{where} (id {task.id}): field 'web.static' must map names (lowercase, not a bundled app: "
                f"{', '.join(sorted(BUNDLED_APPS))}) to absolute folder paths, served at {{sites}}/<name>/; "
                f"got {static!r}"
            )
        for name, folder in sorted(static.items()):
            try:
                check_site(folder, f"{where} (id {task.id}): web.static {name!r}")
            except StaticSiteError as exc:
                raise TaskError(str(exc)) from exc
        if "miniwob" in config:
            check_miniwob(config["miniwob"], f"{where} (id {task.id})")

    @classmethod
    def doctor_checks(cls) -> list[Check]:
        try:
            client = engine.connect(timeout_s=20)
        except engine.EngineUnavailable as exc:
            return [Check("browser image", False, str(exc)[:300], "make setup", domain="web")]
        try:
            engine.image_reference(client, IMAGE)
        except docker.errors.ImageNotFound:
            return [
                Check("browser image", False, f"{IMAGE} is not in the engine", f"bash {BUILD_SCRIPT}", "web")
            ]
        checks = [Check("browser image", True, IMAGE, domain="web")]
        t0 = time.monotonic()
        try:
            box = BrowserSandbox.open(client)
            try:
                reply = box.helper.call(30, cmd="reset", start_url=f"{box.sites_url}/", allow=[box.sites_url])
                ok = bool(reply.get("ok")) and "link" in str((reply.get("page") or {}).get("snapshot", ""))
            finally:
                box.close()
            detail = f"Chromium {box.version} in a sandbox answered in {time.monotonic() - t0:.1f} s"
            checks.append(Check("browser launches", ok, detail, domain="web"))
        except Exception as exc:  # the doctor reports every failure instead of crashing
            checks.append(
                Check(
                    "browser launches",
                    False,
                    f"{type(exc).__name__}: {exc}"[:300],
                    f"bash {BUILD_SCRIPT}",
                    "web",
                )
            )
        return checks

    def reset(self, task: Task) -> ResetResult:
        self.task = task
        config = task.domain_config("web")
        self.limits = BrowserLimits().with_overrides(config.get("limits"), f"task {task.id}")
        self.network = bool(task.network)
        self.allow = allowed_origins(config)
        if self.browser is None:
            if self.options.client is None:
                raise SandboxError(
                    f"task {task.id}: the web domain runs its browser in a sandbox, but the collection was "
                    "started without the container engine"
                )
            base = self.options.limits.with_overrides(task.limits)
            self.browser = BrowserSandbox.open(
                self.options.client,
                self.limits,
                base,
                network=self.network,
                allow=self.allow,
                run_label=self.options.run_label,
            )
            self.sandbox = self.browser.sandbox
        start_url = resolve_start_url(str(config.get("start_url", "")), self.browser.sites_url)
        static = self.browser.put_static(dict(config.get("static") or {}), task.id)
        episode = miniwob_episode(config["miniwob"]) if "miniwob" in config else None
        reply = self._call(
            max(self.limits.action_timeout_ms, 15000) / 1000 + 30,
            cmd="reset",
            start_url=start_url,
            allow=self.allow,
            timeout_ms=self.limits.action_timeout_ms,
            settle_ms=self.limits.settle_ms,
            viewport=VIEWPORT,
            static=static,
            episode=episode,
        )
        refused = reply.get("refused") or []
        if not reply.get("ok"):
            if reply.get("kind") == "refused" or refused:
                why = refused[0]["reason"] if refused else reply.get("error")
                raise EnvFailure(f"task {task.id}: the start URL {start_url} is refused: {why}")
            raise EnvFailure(
                f"task {task.id}: the start URL {start_url} could not be loaded: {reply.get('error')}"
            )
        self.page = reply["page"]
        text = self._observe()
        failure = self._page_failure()
        if failure:
            raise EnvFailure(f"task {task.id}: the start page is an error page: {failure}")
        self.tracker.reset(state_text(text))
        page = self.page
        initial_state = (
            f"## Browser\nChromium {self.browser.version}, viewport {VIEWPORT['width']}x{VIEWPORT['height']}, "
            f"locale en-GB, timezone UTC, network {'on' if self.network else 'local only'}, "
            f"allowed origins {', '.join(self.allow)}\n\n"
            f"## Start page\nURL: {start_url}\nHTTP status: {reply.get('status')}\nTitle: {page['title']}\n"
            f"Tabs: 1\n\n## Screen\n{text}"
        )
        info: dict[str, Any] = {
            "start_url": start_url,
            "browser": f"chromium {self.browser.version}",
            "limits": asdict(self.limits),
            "allow": list(self.allow),
        }
        if refused:
            info["refused"] = refused
        if episode is not None:
            info["miniwob"] = reply.get("episode")
            initial_state += (
                f"\n\n## MiniWoB++ episode\n{json.dumps(reply.get('episode'), ensure_ascii=False)}"
            )
        return ResetResult(
            observation=Observation(text=text, format=ObservationFormat.AXTREE),
            initial_state=initial_state,
            action_space=ACTION_SPACE,
            info=info,
        )

    def step(self, action: Action) -> StepResult:
        if self.browser is None or self.page is None:
            raise EnvFailure("step() before reset(): call reset(task) first")
        self.last_error = ""
        info: dict[str, Any] = {}
        request: dict[str, Any] | None = None
        with self.agent_mistakes(info):
            call = gui_call_from_action(action)
            action = Action(kind=ActionKind.GUI, text=call.text(), tool_name=action.tool_name)
            try:
                request = self._request(call, info)
            except RefusedAction as exc:
                self.last_error, info["action_error"] = str(exc), "refused"
        if request is None:
            request = {"cmd": "observe"}
        timeout_s = max(self.limits.action_timeout_ms, 15000) / 1000 * 2 + 30
        reply = self._call(timeout_s, **request)
        if not reply.get("ok"):
            self.last_error = str(reply.get("error", ""))
            info["action_error"] = str(reply.get("kind", "playwright"))
        info.update(reply.get("info") or {})
        episode = reply.get("episode")
        if isinstance(episode, dict):
            info["miniwob"] = episode
            if episode.get("done"):  # the page ended its episode (core.endEpisode): nothing more to do
                info[INFO_EPISODE_END] = {
                    "status": "complete",
                    "reason": f"the MiniWoB++ episode ended with reward {episode.get('reward')} "
                    f"(raw {episode.get('raw_reward')})",
                }
        refused = list(info.pop("refused", [])) + list(reply.get("refused") or [])
        if refused:
            info["refused"] = refused
            navigations = [r for r in refused if r.get("navigation")]
            # A navigation the browser stopped (a redirect, a link) fails the action with net::ERR_BLOCKED_*:
            # the refusal, with its reason, is the clearer error.
            blocked = not self.last_error or re.search(r"ERR_BLOCKED_BY|ERR_UNSAFE_REDIRECT", self.last_error)
            if navigations and blocked:
                self.last_error = f"navigation to {navigations[0]['url']} refused: {navigations[0]['reason']}"
                info["action_error"] = "refused"
        self.page = reply["page"]
        self.blocked_page = self.page["url"].startswith("chrome-error://") and (
            self.blocked_page or any(r.get("navigation") for r in refused)
        )
        text = self._observe()
        failure = self._page_failure() or self._resource_failure()
        if not failure and (BROWSER_CLOSED in self.last_error or BROWSER_CLOSED in text):
            # Playwright's TargetClosedError: Chromium died or closed; no later action can be observed.
            failure = f"the browser closed or crashed during the step ({BROWSER_CLOSED.lower()})"
        return StepResult(
            action=action,
            observation=Observation(
                text=text, format=ObservationFormat.AXTREE, is_error=bool(self.last_error) or None
            ),
            info=info,
            state_changed=self.tracker.changed(state_text(text)),
            env_failure=failure,
        )

    def close(self) -> None:
        if self._own_browser and self.browser is not None:
            self.browser.close()
            self.browser = None
            self.sandbox = None
        self.page = None

    def interrupt(self) -> None:
        """Remove the sandbox at once (from the deadline thread): a blocked call sees its exec end."""
        if self._own_browser and self.browser is not None:
            self.browser.sandbox.close()

    # -- actions ------------------------------------------------------------------------------------
    def _call(self, timeout_s: float, **request: Any) -> dict[str, Any]:
        assert self.browser is not None
        reply = self.browser.helper.call(timeout_s, **request)
        if not reply.get("ok") and reply.get("kind") in ("helper", "protocol"):
            raise HelperError(f"the browser helper failed on {request.get('cmd')!r}: {reply.get('error')}")
        return reply

    def _request(self, call: GuiCall, info: dict[str, Any]) -> dict[str, Any] | None:
        """The helper request for one parsed call, after the checks that need no page (arguments,
        ref syntax, the allow-list for goto); None for actions that do not touch the page."""
        if call.target is not None:
            extra = TARGET_ACTIONS.get(call.name)
            if extra is None:
                raise ActionSyntaxError(
                    f"the object form supports {', '.join(sorted(TARGET_ACTIONS))}; got action {call.name!r}"
                )
            kwargs = bind_arguments(GuiCall(call.name, kwargs=call.kwargs), extra, call.name)
            if call.name in ("fill", "press", "select_option") and not kwargs:
                raise ActionSyntaxError(f"{call.name} needs {extra[0]!r} in the object form")
            return {"cmd": "act", "name": call.name, "target": dict(call.target), "args": kwargs}
        spec = WEB_ACTIONS.get(call.name)
        if spec is None:
            raise ActionSyntaxError(f"unknown web action {call.name!r}; available: {', '.join(WEB_ACTIONS)}")
        a = bind_arguments(call, list(spec[1]), call.name)
        missing = [p for p in spec[2] if p not in a]
        if missing:
            raise ActionSyntaxError(f"{call.name}() needs {', '.join(missing)}")
        if "bid" in a:
            a["bid"] = element_ref(a["bid"])
        if call.name == "noop":
            float(a.get("wait_ms", 1000))  # a non-number is the agent's mistake, before the page sees it
        if call.name == "tab_focus":
            int(a["index"])
        if call.name == "send_msg_to_user":
            info["message_to_user"] = str(a["text"])
            return None
        if call.name == "report_infeasible":
            info["infeasible"] = str(a["reason"])
            return None
        if call.name == "goto":
            assert self.browser is not None
            url = resolve_start_url(str(a["url"]), self.browser.sites_url)
            why = url_verdict(url, self.allow, navigation=True)
            if why:
                info["refused"] = [{"url": url[:500], "kind": "document", "navigation": True, "reason": why}]
                raise RefusedAction(f"navigation to {url} refused: {why}; the page did not change")
            a["url"] = url
        return {"cmd": "act", "name": call.name, "args": a}

    # -- observation --------------------------------------------------------------------------------
    def _observe(self) -> str:
        page = self.page or {}
        snapshot = str(page.get("snapshot", ""))
        lines = [
            f"URL: {page.get('url', '')}",
            f"Title: {page.get('title', '')}",
            f"Tabs: {' | '.join(page.get('tabs') or [])}",
            f"Focused: {focused_line(snapshot)}",
        ]
        if self.last_error:
            lines.append(f"Last action error: {self.last_error}")
        lines += ["", snapshot]
        return "\n".join(lines)

    def _page_failure(self) -> str | None:
        page = self.page or {}
        if page.get("crashed"):
            return str(page["crashed"])
        url, title = str(page.get("url", "")), str(page.get("title", ""))
        if url.startswith("chrome-error://"):
            if self.blocked_page:  # the error page of a navigation we refused: that refusal is the answer
                return None
            return f"browser error page: the navigation failed ({title or url})"
        return detect_page_failure(
            status=page.get("status"),
            title=title,
            headings=_HEADING.findall(str(page.get("snapshot", ""))),
            text=str(page.get("text", "")),
            url=url,
        )

    def _resource_failure(self) -> str | None:
        """The browser's processes (as Chromium lists them) against the memory and process limits."""
        page = self.page or {}
        procs, rss_mb = int(page.get("procs") or 0), float(page.get("rss_mb") or 0.0)
        if not procs:
            return None
        if rss_mb > self.limits.memory_mb:
            return f"the browser exceeded its memory limit ({rss_mb:.0f} MB > {self.limits.memory_mb} MB)"
        if procs > self.limits.pids:
            return f"the browser exceeded its process limit ({procs} > {self.limits.pids})"
        return None


class RefusedAction(ActionSyntaxError):
    """A navigation outside the task's allow-list, refused before it reaches the browser."""


def element_ref(bid: Any) -> str:
    """An element ref from the tree (`e7`, `f1e3`); a BrowserGym-style numeric bid means `eN`."""
    text = str(bid).strip().strip("[]").removeprefix("ref=")
    if text.isdigit():
        text = f"e{text}"
    if not re.fullmatch(r"(?:f\d+)?e\d+", text):
        raise ActionSyntaxError(
            f'{text!r} is not an element ref; use the [ref=...] value from the tree, e.g. "e7"'
        )
    return text


def urlsplit_path(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


ENVIRONMENT = WebEnvironment
