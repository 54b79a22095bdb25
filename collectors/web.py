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

Where the browser runs: on the host, as a child process of the collector, never in the container
engine. Chromium's own sandbox is off (root, `--no-sandbox`), so isolation comes from what we pass it:
a host-resolver rule that maps every host except 127.0.0.1/localhost to NOTFOUND unless the task sets
`"network": true` (the counterpart of a sandbox's --network none), `--disable-dev-shm-usage` (renderer
shared memory in /tmp, so a small /dev/shm never crashes a tab), a V8 heap cap and a renderer-process
cap, and a watchdog that measures the browser's process tree after every step against `memory_mb`
and `pids`. Untrusted sites belong in a collector that itself runs inside a container or VM.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from collectors.environment import Check, ResetResult, StepResult, Task, TaskError
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
from collectors.sites import SITES_PLACEHOLDER, shared_sites_url
from schemas import Action, ActionKind, ActionSpace, Domain, Observation, ObservationFormat

CHROMIUM = "/usr/bin/chromium"
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
LOCAL_HOSTS = "EXCLUDE 127.0.0.1, EXCLUDE localhost"


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


def launch_args(limits: BrowserLimits, network: bool) -> list[str]:
    args = CHROMIUM_ARGS + [
        f"--js-flags=--max-old-space-size={limits.js_heap_mb}",
        f"--renderer-process-limit={limits.renderer_processes}",
    ]
    if not network:
        args.append(f"--host-resolver-rules=MAP * ~NOTFOUND, {LOCAL_HOSTS}")
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


def resolve_start_url(url: str) -> str:
    """`{sites}` replaced by the bundled sites' base URL (their server starts on first use)."""
    if SITES_PLACEHOLDER in url:
        return url.replace(SITES_PLACEHOLDER, shared_sites_url())
    return url


def focused_line(snapshot: str) -> str:
    """The snapshot node marked [active] that is deepest (the focused element), without its children."""
    found: list[str] = _ACTIVE.findall(snapshot)
    if not found:
        return "none"
    return found[-1].rstrip(":").replace(" [active]", "").strip()


class WebEnvironment(GuiEnvironment):
    """One browser context (fresh cookies and storage) per task, in a browser launched per
    environment, or a shared one passed in (tests and benchmarks reuse one browser)."""

    domain = Domain.WEB
    action_space = ACTION_SPACE
    config_fields = frozenset({"start_url", "limits"})

    def __init__(self, options: Any, browser: Any = None) -> None:
        super().__init__(options)
        self._own_browser = browser is None
        self.browser = browser
        self._playwright: Any = None
        self.context: Any = None
        self.page: Any = None
        self.limits = BrowserLimits()
        self.tracker = StateTracker()
        self.statuses: dict[int, int] = {}  # id(page) -> HTTP status of its last main-frame navigation
        self.crashed: str | None = None
        self.last_error = ""
        self.network = False

    # -- interface ----------------------------------------------------------------------------------
    @classmethod
    def validate_task(cls, task: Task, where: str = "task") -> None:
        config = cls.checked_config(task, where)
        url = config.get("start_url")
        if not isinstance(url, str) or not re.match(r"^(https?://|\{sites\}|about:|file://)", url):
            raise TaskError(
                f"{where} (id {task.id}): field 'web.start_url' must be an http(s) URL or start with {{sites}} "
                f'(the bundled local sites), e.g. "{{sites}}/shop/"; got {url!r}'
            )
        BrowserLimits().with_overrides(config.get("limits"), f"{where} (id {task.id})")

    @classmethod
    def doctor_checks(cls) -> list[Check]:
        checks: list[Check] = []
        path = shutil.which("chromium") or (CHROMIUM if os.path.exists(CHROMIUM) else None)
        version = ""
        if path:
            try:
                version = subprocess.run(
                    [path, "--version"], capture_output=True, text=True, timeout=20
                ).stdout.strip()
            except (OSError, subprocess.TimeoutExpired) as exc:
                version = f"{type(exc).__name__}: {exc}"
        checks.append(
            Check("chromium installed", bool(path), version or "not found", "sudo infra/install-system.sh")
        )
        try:
            import playwright.sync_api  # noqa: F401

            checks.append(Check("playwright importable", True, "playwright.sync_api"))
        except ImportError as exc:
            checks.append(Check("playwright importable", False, str(exc), "make setup"))
            return checks
        if path:
            t0 = time.monotonic()
            try:
                from playwright.sync_api import sync_playwright

                with sync_playwright() as p:
                    browser = p.chromium.launch(
                        executable_path=path, args=launch_args(BrowserLimits(), False)
                    )
                    page = browser.new_page()
                    page.set_content("<button>ok</button>")
                    ok = "button" in page.aria_snapshot(mode="ai")
                    browser.close()
                checks.append(
                    Check(
                        "browser launches", ok, f"headless Chromium answered in {time.monotonic() - t0:.1f} s"
                    )
                )
            except Exception as exc:  # the doctor reports every failure instead of crashing
                checks.append(
                    Check(
                        "browser launches",
                        False,
                        f"{type(exc).__name__}: {exc}"[:300],
                        "sudo infra/install-system.sh",
                    )
                )
        return checks

    def reset(self, task: Task) -> ResetResult:
        from playwright.sync_api import Error as PlaywrightError

        self.task = task
        config = task.domain_config("web")
        self.limits = BrowserLimits().with_overrides(config.get("limits"), f"task {task.id}")
        self.network = bool(task.network)
        start_url = resolve_start_url(str(config.get("start_url", "")))
        if self.browser is None:
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
            self.browser = self._playwright.chromium.launch(
                executable_path=CHROMIUM, args=launch_args(self.limits, self.network)
            )
        self.context = self.browser.new_context(viewport=VIEWPORT, locale="en-GB", timezone_id="UTC")
        self.context.set_default_timeout(self.limits.action_timeout_ms)
        if not self.network and not self._own_browser:
            # A shared browser was launched without our resolver rule: block other hosts per context.
            self.context.route(
                re.compile(r"^https?://(?!127\.0\.0\.1[:/]|localhost[:/])"), lambda r: r.abort()
            )
        self.context.on("page", self._watch_page)
        self.page = self.context.new_page()
        status: int | None = None
        try:
            response = self.page.goto(
                start_url, wait_until="load", timeout=max(self.limits.action_timeout_ms, 15000)
            )
            status = response.status if response is not None else None
        except PlaywrightError as exc:
            raise EnvFailure(
                f"task {task.id}: the start URL {start_url} could not be loaded: {_first_line(exc)}"
            ) from exc
        text = self._observe()
        failure = self._page_failure()
        if failure:
            raise EnvFailure(f"task {task.id}: the start page is an error page: {failure}")
        self.tracker.reset(state_text(text))
        initial_state = (
            f"## Browser\nChromium {self.browser.version}, viewport {VIEWPORT['width']}x{VIEWPORT['height']}, "
            f"locale en-GB, timezone UTC, network {'on' if self.network else 'local only'}\n\n"
            f"## Start page\nURL: {start_url}\nHTTP status: {status}\nTitle: {self.page.title()}\n"
            f"Tabs: 1\n\n## Screen\n{text}"
        )
        return ResetResult(
            observation=Observation(text=text, format=ObservationFormat.AXTREE),
            initial_state=initial_state,
            action_space=ACTION_SPACE,
            info={
                "start_url": start_url,
                "browser": f"chromium {self.browser.version}",
                "limits": asdict(self.limits),
            },
        )

    def step(self, action: Action) -> StepResult:
        from playwright.sync_api import Error as PlaywrightError

        if self.page is None:
            raise EnvFailure("step() before reset(): call reset(task) first")
        self.last_error = ""
        info: dict[str, Any] = {}
        try:
            with self.agent_mistakes(info):
                call = gui_call_from_action(action)
                action = Action(kind=ActionKind.GUI, text=call.text(), tool_name=action.tool_name)
                info.update(self._apply(call))
        except PlaywrightError as exc:
            self.last_error = _first_line(exc)
            info["action_error"] = "playwright"
        text = self._observe()
        failure = self._page_failure() or self._resource_failure()
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
        for closer in (self.context, self.browser if self._own_browser else None, self._playwright):
            if closer is None:
                continue
            try:
                closer.close() if closer is not self._playwright else closer.stop()
            except Exception:  # closing is best effort: the browser may already be gone
                pass
        self.context = self.page = None
        if self._own_browser:
            self.browser = None
        self._playwright = None

    # -- actions ------------------------------------------------------------------------------------
    def _watch_page(self, page: Any) -> None:
        page.on("response", lambda r: self._record_status(page, r))
        page.on("crash", lambda _p: setattr(self, "crashed", f"the tab {page.url} crashed"))
        if self.page is not None:  # a popup or target=_blank link: it becomes the active tab
            self.page = page
            try:
                page.wait_for_load_state("domcontentloaded", timeout=self.limits.action_timeout_ms)
            except Exception:
                pass

    def _record_status(self, page: Any, response: Any) -> None:
        try:
            if response.request.is_navigation_request() and response.frame == page.main_frame:
                self.statuses[id(page)] = response.status
        except Exception:  # a response of a page that is closing
            pass

    def _locator(self, bid: Any) -> Any:
        bid = str(bid).strip().strip("[]").removeprefix("ref=")
        if bid.isdigit():  # BrowserGym-style numeric bid: the main frame's ref eN
            bid = f"e{bid}"
        if not re.fullmatch(r"(?:f\d+)?e\d+", bid):
            raise ActionSyntaxError(
                f'{bid!r} is not an element ref; use the [ref=...] value from the tree, e.g. "e7"'
            )
        locator = self.page.locator(f"aria-ref={bid}")
        if locator.count() == 0:
            raise ActionSyntaxError(
                f"no element with ref {bid} on the current page (refs come from the latest tree)"
            )
        return locator

    def _target_locator(self, target: dict[str, Any]) -> Any:
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
                raise ActionSyntaxError(
                    "an object action needs 'role' (and 'name') or 'text' to find its element"
                )
            for i in range(min(locator.count(), 10)):
                if locator.nth(i).is_visible():
                    return locator.nth(i)
        described = ", ".join(f"{k}={v!r}" for k, v in target.items())
        raise ActionSyntaxError(f"no visible element with {described} on the current page")

    def _apply(self, call: GuiCall) -> dict[str, Any]:
        page = self.page
        timeout = self.limits.action_timeout_ms
        if call.target is not None:
            extra = TARGET_ACTIONS.get(call.name)
            if extra is None:
                raise ActionSyntaxError(
                    f"the object form supports {', '.join(sorted(TARGET_ACTIONS))}; got action {call.name!r}"
                )
            locator = self._target_locator(call.target)
            kwargs = bind_arguments(GuiCall(call.name, kwargs=call.kwargs), extra, call.name)
            if call.name in ("fill", "press", "select_option") and not kwargs:
                raise ActionSyntaxError(f"{call.name} needs {extra[0]!r} in the object form")
            getattr(locator, call.name)(*kwargs.values())
            self._settle()
            return {"resolved": dict(call.target)}
        spec = WEB_ACTIONS.get(call.name)
        if spec is None:
            raise ActionSyntaxError(f"unknown web action {call.name!r}; available: {', '.join(WEB_ACTIONS)}")
        params = list(spec[1])
        a = bind_arguments(call, params, call.name)
        missing = [p for p in spec[2] if p not in a]
        if missing:
            raise ActionSyntaxError(f"{call.name}() needs {', '.join(missing)}")
        name = call.name
        if name == "noop":
            page.wait_for_timeout(min(float(a.get("wait_ms", 1000)), 10000))
        elif name in ("click", "dblclick"):
            getattr(self._locator(a["bid"]), name)(button=a.get("button", "left"))
        elif name in ("hover", "clear", "focus"):
            getattr(self._locator(a["bid"]), name)()
        elif name == "fill":
            self._locator(a["bid"]).fill(str(a["value"]))
        elif name == "press":
            self._locator(a["bid"]).press(str(a["key_comb"]))
        elif name == "select_option":
            options = a["options"]
            self._locator(a["bid"]).select_option(
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
                raise ActionSyntaxError(f"no tab {index}; open tabs: 0..{len(pages) - 1}")
            self.page = pages[index]
            self.page.bring_to_front()
        elif name == "new_tab":
            self.page = self.context.new_page()
        elif name == "tab_close":
            closing = self.page
            pages = [p for p in self.context.pages if p is not closing]
            if not pages:
                self.page = self.context.new_page()
            else:
                self.page = pages[-1]
            closing.close()
        elif name == "go_back":
            page.go_back(timeout=timeout)
        elif name == "go_forward":
            page.go_forward(timeout=timeout)
        elif name == "goto":
            url = resolve_start_url(str(a["url"]))
            page.goto(url, timeout=max(timeout, 15000))
        elif name == "send_msg_to_user":
            return {"message_to_user": str(a["text"])}
        elif name == "report_infeasible":
            return {"infeasible": str(a["reason"])}
        self._settle()
        return {}

    def _settle(self) -> None:
        """Wait for a navigation the action started (if any) and a short moment for client-side updates."""
        try:
            self.page.wait_for_load_state("load", timeout=self.limits.action_timeout_ms)
        except Exception:
            pass
        if self.limits.settle_ms:
            self.page.wait_for_timeout(self.limits.settle_ms)

    # -- observation --------------------------------------------------------------------------------
    def _observe(self) -> str:
        page = self.page
        try:
            snapshot = page.aria_snapshot(mode="ai", timeout=self.limits.action_timeout_ms)
        except Exception as exc:  # a page mid-navigation or crashed: say so instead of failing the run
            snapshot = f"(the accessibility tree could not be read: {_first_line(exc)})"
        tabs = []
        for i, p in enumerate(self.context.pages):
            try:
                title = p.title()
            except Exception:
                title = "(closed)"
            tabs.append(f"[{i}] {title or p.url}" + (" (current)" if p is page else ""))
        self._last_snapshot = snapshot
        lines = [
            f"URL: {page.url}",
            f"Title: {_safe_title(page)}",
            f"Tabs: {' | '.join(tabs)}",
            f"Focused: {focused_line(snapshot)}",
        ]
        if self.last_error:
            lines.append(f"Last action error: {self.last_error}")
        lines += ["", snapshot]
        return "\n".join(lines)

    def _page_failure(self) -> str | None:
        if self.crashed:
            return self.crashed
        page = self.page
        if page.url.startswith("chrome-error://"):
            return f"browser error page: the navigation failed ({_safe_title(page) or page.url})"
        snapshot = getattr(self, "_last_snapshot", "")
        try:
            text = page.evaluate("() => (document.body ? document.body.innerText : '').slice(0, 4000)")
        except Exception:
            text = ""
        return detect_page_failure(
            status=self.statuses.get(id(page)),
            title=_safe_title(page),
            headings=_HEADING.findall(snapshot),
            text=text,
            url=page.url,
        )

    def _resource_failure(self) -> str | None:
        """The browser's processes (as Chromium lists them) against the memory and process limits."""
        procs = browser_processes(self.browser)
        if not procs:
            return None
        rss_mb = sum(_rss(pid) for pid in procs) / 1e6
        if rss_mb > self.limits.memory_mb:
            return f"the browser exceeded its memory limit ({rss_mb:.0f} MB > {self.limits.memory_mb} MB)"
        if len(procs) > self.limits.pids:
            return f"the browser exceeded its process limit ({len(procs)} > {self.limits.pids})"
        return None


def browser_processes(browser: Any) -> list[int]:
    """Process ids of a running Chromium (browser, renderers, utilities) from CDP SystemInfo."""
    try:
        session = browser.new_browser_cdp_session()
        try:
            info = session.send("SystemInfo.getProcessInfo")
        finally:
            session.detach()
    except Exception:  # an older Chromium without SystemInfo, or one that is gone
        return []
    return [int(p["id"]) for p in info.get("processInfo", []) if p.get("id")]


def _rss(pid: int) -> int:
    import psutil

    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def _safe_title(page: Any) -> str:
    try:
        return str(page.title())
    except Exception:
        return ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


ENVIRONMENT = WebEnvironment
