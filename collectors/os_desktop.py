"""OS domain: real GTK applications on a private X display inside a sandbox, observed through the
AT-SPI tree.

Every task gets its own desktop in its own container of the image worldline/desktop
(infra/build-desktop-image.sh), made by `desktop_sandbox` with the sandbox's limits: no network,
memory / CPU / pids limits, a read-only root with size-limited tmpfs, the unprivileged sandbox user.
Inside it collectors/atspi_helper.py (Debian's python3, where pyatspi lives) starts Xvfb, a private
session bus and the AT-SPI bus, launches the task's applications (gedit, gnome-calculator, ...) with
the task's files in /work as their home, drives mouse and keyboard with xdotool and reads the tree.
The collector talks to it in JSON lines over the exec's stdin/stdout, and that JSON is all that crosses
the boundary: a task that saves to /etc/x or opens /root/... acts on the sandbox's own files, and
nothing of the host (its files, its X server, its buses, its loopback) is reachable from the desktop.
Removing the container ends every process of the session.

Observation: the window list of the task's applications, then the focused application's tree as text,
one node per line, indented: `[id] role "name" (states) value="..." @x,y wxh`. Only what is showing is
listed; unnamed layout containers are folded into their children.

Actions are pyautogui-style calls parsed with `ast` (never evaluated) and dispatched to xdotool:
click / doubleClick / tripleClick / rightClick / middleClick (x, y or an element id from the tree),
moveTo, dragTo, drag, scroll, typewrite / write, press, hotkey, keyDown, keyUp, plus wait(seconds),
done() and fail(reason). The object form {"action": "click", "role": "menu item", "name": "Save"}
finds the element in the live tree: a showing element is clicked at its centre, a hidden one (an item
of a closed menu) is activated through its AT-SPI action.
"""

from __future__ import annotations

import json
import re
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import docker.errors
from docker import DockerClient

from collectors import engine
from collectors.environment import Check, ResetResult, StepResult, Task, TaskError
from collectors.gui_common import (
    ActionSyntaxError,
    EnvFailure,
    GuiCall,
    GuiEnvironment,
    StateTracker,
    bind_arguments,
    gui_call_from_action,
    state_text,
    tools_from_signatures,
)
from collectors.sandbox import WORK_DIR, Sandbox, SandboxLimits
from schemas import Action, ActionKind, ActionSpace, Domain, Observation, ObservationFormat, turn_facts

DESKTOP_IMAGE = "worldline/desktop"
BUILD_SCRIPT = "bash infra/build-desktop-image.sh"
HELPER = Path(__file__).with_name("atspi_helper.py")
HELPER_PYTHON = "/usr/bin/python3"  # the image's system interpreter, which has pyatspi
MAX_REPLY_BYTES = 32 << 20  # a tree of MAX_NODES nodes with long text values stays far below
SCREEN = (1280, 800)
APP_START_TIMEOUT_S = 30.0
MAX_NODES = 800
# Roles that only lay out their children: folded away when they carry no name or state of interest.
LAYOUT_ROLES = {
    "panel",
    "filler",
    "box",
    "grouping",
    "section",
    "scroll pane",
    "viewport",
    "layered pane",
    "split pane",
    "redundant object",
    "unknown",
    "glass pane",
    "root pane",
    "internal frame",
}

# pyautogui key names -> X keysyms
KEY_NAMES = {
    "enter": "Return",
    "return": "Return",
    "esc": "Escape",
    "escape": "Escape",
    "tab": "Tab",
    "backspace": "BackSpace",
    "delete": "Delete",
    "del": "Delete",
    "space": "space",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "home": "Home",
    "end": "End",
    "pageup": "Prior",
    "pagedown": "Next",
    "pgup": "Prior",
    "pgdn": "Next",
    "insert": "Insert",
    "ctrl": "ctrl",
    "ctrlleft": "Control_L",
    "ctrlright": "Control_R",
    "control": "ctrl",
    "alt": "alt",
    "altleft": "Alt_L",
    "shift": "shift",
    "shiftleft": "Shift_L",
    "win": "super",
    "super": "super",
    "command": "super",
    "capslock": "Caps_Lock",
    "menu": "Menu",
    "printscreen": "Print",
    **{f"f{i}": f"F{i}" for i in range(1, 13)},
}
BUTTONS = {"left": "1", "middle": "2", "right": "3"}

_N = {"type": "number"}
_S = {"type": "string"}
_EL = {"type": "string", "description": "an element id from the tree, instead of x/y"}
OS_ACTIONS: dict[str, tuple[str, dict[str, dict[str, Any]], list[str]]] = {
    "click": (
        "Click at x, y (or an element's centre).",
        {"x": _N, "y": _N, "clicks": _N, "button": _S, "element": _EL},
        [],
    ),
    "doubleClick": (
        "Double-click at x, y (or an element).",
        {"x": _N, "y": _N, "button": _S, "element": _EL},
        [],
    ),
    "tripleClick": (
        "Triple-click at x, y (or an element).",
        {"x": _N, "y": _N, "button": _S, "element": _EL},
        [],
    ),
    "rightClick": ("Right-click at x, y (or an element).", {"x": _N, "y": _N, "element": _EL}, []),
    "middleClick": ("Middle-click at x, y (or an element).", {"x": _N, "y": _N, "element": _EL}, []),
    "moveTo": ("Move the mouse to x, y.", {"x": _N, "y": _N}, ["x", "y"]),
    "dragTo": ("Drag from the mouse position to x, y.", {"x": _N, "y": _N, "button": _S}, ["x", "y"]),
    "drag": (
        "Drag by an offset from the mouse position.",
        {"xOffset": _N, "yOffset": _N, "button": _S},
        ["xOffset", "yOffset"],
    ),
    "scroll": ("Scroll by clicks (positive: up) at x, y.", {"clicks": _N, "x": _N, "y": _N}, ["clicks"]),
    "typewrite": ("Type text.", {"message": _S, "interval": _N}, ["message"]),
    "write": ("Type text.", {"message": _S, "interval": _N}, ["message"]),
    "press": (
        "Press a key (or a list of keys) presses times.",
        {"keys": {"anyOf": [_S, {"type": "array", "items": _S}]}, "presses": _N},
        ["keys"],
    ),
    "hotkey": (
        "Press a key combination, e.g. hotkey('ctrl', 's').",
        {"keys": {"type": "array", "items": _S}},
        ["keys"],
    ),
    "keyDown": ("Hold a key down.", {"key": _S}, ["key"]),
    "keyUp": ("Release a key.", {"key": _S}, ["key"]),
    "wait": ("Wait seconds.", {"seconds": _N}, []),
    "done": ("Declare the task done.", {}, []),
    "fail": ("Declare the task infeasible.", {"reason": _S}, []),
}
TARGET_ACTIONS = {"click", "doubleClick", "rightClick", "typewrite", "write", "focus"}

ACTION_SPACE = ActionSpace(
    description=(
        f"You operate a Linux desktop ({SCREEN[0]}x{SCREEN[1]}) with GTK applications. The observation lists "
        'the windows and the focused application\'s accessibility tree: [id] role "name" (states) '
        "value=\"...\" @x,y wxh. Act with one pyautogui-style call per turn: click(x, y), click('12') "
        "(an element's centre), doubleClick, tripleClick, rightClick, middleClick, moveTo(x, y), "
        "dragTo(x, y), drag(dx, dy), scroll(clicks, x, y), typewrite('text'), press('enter'), "
        "hotkey('ctrl', 's'), keyDown/keyUp, wait(seconds), done(), fail('reason'). An element can also be "
        'addressed by role and name: {"action": "click", "role": "menu item", "name": "Save"}.'
    ),
    tools=tools_from_signatures(OS_ACTIONS),
)


class HelperError(EnvFailure):
    """The desktop helper in the sandbox failed (crashed, timed out, answered nonsense)."""


def desktop_sandbox(client: DockerClient, limits: SandboxLimits, run_label: str = "") -> Sandbox:
    """The container one desktop runs in; every container option of the os domain is decided here.

    The sandbox's own isolation (sandbox.py: no network, memory / CPU / pids limits, a read-only root with
    size-limited tmpfs, dropped capabilities, the sandbox user) with the network forced off, whatever
    the limits say: a desktop task reaches nothing outside its container."""
    return Sandbox.create(
        client, DESKTOP_IMAGE, limits.with_overrides({"network": False}), run_label=run_label
    )


class DesktopHelper:
    """The JSON-lines client of atspi_helper.py inside the sandbox, over one exec's stdin and stdout;
    one request at a time. Replies are data from inside the sandbox: each must be a JSON object echoing
    its request's id, at most MAX_REPLY_BYTES long, or the session fails with HelperError."""

    def __init__(self, sandbox: Sandbox, timeout_s: float = 20.0) -> None:
        self.sandbox = sandbox
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._seq = 0
        self._frames = b""  # bytes of the engine's multiplexed stream not yet split into frames
        self._stdout = b""
        self._stderr = b""  # the helper's last stderr bytes, for error messages
        self._closed = False
        # The source travels in the exec's argv: no file in the sandbox, which an application could
        # overwrite, decides what answers the collector.
        api = sandbox.client.api
        try:
            exec_id = api.exec_create(
                sandbox.container.id,
                [HELPER_PYTHON, "-c", HELPER.read_text("utf-8")],
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                environment={"HOME": WORK_DIR, "LANG": "C.UTF-8"},
                workdir=WORK_DIR,
            )["Id"]
            conn = api.exec_start(exec_id, socket=True)
        except docker.errors.APIError as exc:
            raise HelperError(f"sandbox {sandbox.name}: cannot start the desktop helper: {exc}") from exc
        self._sock: socket.socket = getattr(conn, "_sock", conn)

    def call(self, cmd: str, timeout_s: float | None = None, **request: Any) -> dict[str, Any]:
        with self._lock:
            self._seq += 1
            seq = self._seq
            line = json.dumps({"cmd": cmd, "id": seq, **request}) + "\n"
            try:
                self._sock.sendall(line.encode("utf-8"))
            except OSError as exc:
                raise HelperError(f"the desktop helper is gone ({exc}){self._stderr_tail()}") from exc
            raw = self._read_line(timeout_s or self.timeout_s, cmd)
        try:
            reply = json.loads(raw)
        except ValueError as exc:
            raise HelperError(
                f"the desktop helper answered {cmd!r} with something not JSON: {raw[:200]!r}"
            ) from exc
        if not isinstance(reply, dict) or reply.get("id") != seq:
            raise HelperError(f"the desktop helper's answer to {cmd!r} is not the reply to it: {raw[:200]!r}")
        return reply

    def _read_line(self, timeout_s: float, cmd: str) -> bytes:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._stdout:
            if len(self._stdout) > MAX_REPLY_BYTES:
                raise HelperError(f"the desktop helper's answer to {cmd!r} exceeds {MAX_REPLY_BYTES} bytes")
            remaining = deadline - time.monotonic()
            ready, _, _ = (
                select.select([self._sock], [], [], max(0.0, remaining)) if remaining > 0 else ([], [], [])
            )
            if not ready:
                raise HelperError(
                    f"the desktop helper did not answer {cmd!r} within {timeout_s:.0f} s{self._stderr_tail()}"
                )
            try:
                chunk = self._sock.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                raise HelperError(f"the desktop helper exited{self._stderr_tail()}")
            self._frames += chunk
            self._split_frames()
        line, _, self._stdout = self._stdout.partition(b"\n")
        return line

    def _split_frames(self) -> None:
        """The engine multiplexes stdout and stderr: frames of an 8-byte header (stream, 0, 0, 0, size
        as 4 bytes big-endian) and the payload."""
        while len(self._frames) >= 8:
            size = int.from_bytes(self._frames[4:8], "big")
            if len(self._frames) < 8 + size:
                return
            stream, payload = self._frames[0], self._frames[8 : 8 + size]
            self._frames = self._frames[8 + size :]
            if stream == 2:
                self._stderr = (self._stderr + payload)[-2000:]
            else:
                self._stdout += payload

    def _stderr_tail(self) -> str:
        text = self._stderr.decode("utf-8", "replace").strip()[-500:]
        return f": {text}" if text else ""

    def shutdown(self) -> None:
        """Make a blocked call return now (from another thread)."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._sock.sendall(b'{"cmd": "quit"}\n')
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass


@dataclass
class RunningApp:
    """An application of the session; `pid` is its process id inside the sandbox."""

    command: list[str]
    pid: int
    name: str = ""


@dataclass
class DesktopSession:
    """Xvfb + a session bus + the AT-SPI bus, and the applications started in it, all inside one
    sandbox; `close` removes the sandbox, which ends every process of the session."""

    sandbox: Sandbox
    helper: DesktopHelper | None = None
    display: str = ""
    apps: list[RunningApp] = field(default_factory=list)

    @classmethod
    def open(cls, client: DockerClient, limits: SandboxLimits, run_label: str = "") -> DesktopSession:
        """A started session in a fresh sandbox (removed again if the desktop fails to start)."""
        session = cls(desktop_sandbox(client, limits, run_label))
        try:
            return session.start()
        except BaseException:
            session.close()
            raise

    def start(self) -> DesktopSession:
        self.helper = DesktopHelper(self.sandbox)
        reply = self.helper.call("start", timeout_s=45, screen=list(SCREEN))
        if not reply.get("ok"):
            raise EnvFailure(
                f"sandbox {self.sandbox.name} ({self.sandbox.image}): the desktop did not start: "
                f"{reply.get('error')}; rebuild the image with infra/build-desktop-image.sh"
            )
        self.display = str(reply.get("display", ""))
        return self

    def put_files(self, files: dict[str, str]) -> None:
        """The task's files into the desktop's home, the sandbox's /work."""
        if files:
            self.sandbox.put_files(files, base=WORK_DIR)

    def launch(self, command: list[str], timeout_s: float = APP_START_TIMEOUT_S) -> RunningApp:
        """Start an application and wait until it shows a window on the accessibility bus."""
        helper = self._helper()
        reply = helper.call("launch", command=command)
        if reply.get("missing"):
            raise EnvFailure(
                f"the application {command[0]!r} is not installed in the desktop image {self.sandbox.image} "
                "(no such command on its PATH)"
            )
        if not reply.get("ok") or not isinstance(reply.get("pid"), int):
            raise EnvFailure(f"the application {command[0]!r} could not be started: {reply.get('error')}")
        app = RunningApp(command=command, pid=reply["pid"])
        self.apps.append(app)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            reason = self.exit_reasons([app]).get(app.pid)
            if reason:
                raise EnvFailure(reason)
            for entry in helper.call("apps").get("apps", []):
                if isinstance(entry, dict) and entry.get("pid") == app.pid and entry.get("windows"):
                    app.name = str(entry.get("name") or Path(command[0]).name)
                    self.focus_app(app)
                    return app
            time.sleep(0.2)
        raise EnvFailure(
            f"the application {command[0]} showed no window on the accessibility bus within {timeout_s:.0f} s"
        )

    def exit_reasons(self, apps: list[RunningApp] | None = None) -> dict[int, str]:
        """Why each of `apps` (default: all) is gone, by pid; a dead X server counts for every app."""
        apps = self.apps if apps is None else apps
        if not apps:
            return {}
        reply = self._helper().call("status", pids=[a.pid for a in apps])
        exited = reply.get("exited")
        if not isinstance(exited, dict):
            raise HelperError(f"the desktop helper's status reply has no 'exited' object: {str(reply)[:200]}")
        reasons = {a.pid: str(exited[str(a.pid)]) for a in apps if str(a.pid) in exited}
        if reply.get("xvfb"):
            reasons = {
                a.pid: reasons.get(a.pid, f"the X server of the desktop is gone: {reply['xvfb']}")
                for a in apps
            }
        return reasons

    def xdotool(self, *args: str) -> str:
        reply = self._helper().call("xdotool", args=list(args), timeout_s=30)
        if not reply.get("ok"):
            raise HelperError(f"xdotool {' '.join(args[:3])} failed: {reply.get('error')}")
        unknown = re.search(r"No such key name '([^']*)'", str(reply.get("stderr", "")))
        if unknown:
            raise ActionSyntaxError(
                f"unknown key {unknown.group(1)!r}; use pyautogui names such as 'enter', 'ctrl', 'f5'"
            )
        return str(reply.get("stdout", ""))

    def atspi(self, cmd: str, **request: Any) -> dict[str, Any]:
        """One AT-SPI request (apps, tree, find, do_action) to the helper."""
        return self._helper().call(cmd, **request)

    def windows_of(self, app: RunningApp) -> list[str]:
        return self.xdotool("search", "--onlyvisible", "--pid", str(app.pid)).split()

    def focus_app(self, app: RunningApp) -> None:
        """Give the keyboard to the app's newest visible window (there is no window manager to do it)."""
        windows = self.windows_of(app)
        if windows:
            self.xdotool("windowfocus", "--sync", windows[-1])

    def _helper(self) -> DesktopHelper:
        if self.helper is None:
            raise HelperError(f"sandbox {self.sandbox.name}: the desktop is not started")
        return self.helper

    def interrupt(self) -> None:
        """Unblock a call from another thread: the helper's socket is shut down, the sandbox removed."""
        if self.helper is not None:
            self.helper.shutdown()
        self.sandbox.close()

    def close(self) -> None:
        if self.helper is not None:
            self.helper.close()
            self.helper = None
        self.apps.clear()
        self.sandbox.close()


# --------------------------------------------------------------------------------------------------
# The tree as text
# --------------------------------------------------------------------------------------------------


_WIDGET_CLASS_NAME = re.compile(r"(?:Gtk|Adw|Gdk|Hdy)[A-Z]\w*")


def render_tree(nodes: list[dict[str, Any]]) -> tuple[str, dict[str, dict[str, Any]]]:
    """Text lines for the helper's flat node list and the id -> node map; layout-only containers
    without a name or interesting state are folded (their children move up)."""
    lines: list[str] = []
    by_id: dict[str, dict[str, Any]] = {}
    shown_depth: list[tuple[int, int]] = []  # (helper depth, printed depth) of the ancestors kept
    for node in nodes:
        if _WIDGET_CLASS_NAME.fullmatch(node["name"]):
            node = {**node, "name": ""}  # a toolkit class name (GtkScrollbar), not an accessible name
        depth = node["depth"]
        while shown_depth and shown_depth[-1][0] >= depth:
            shown_depth.pop()
        printed = shown_depth[-1][1] + 1 if shown_depth else 0
        foldable = (
            node["role"] in LAYOUT_ROLES
            and not node["name"]
            and not node.get("value")
            and not (set(node.get("states", [])) & {"focused", "selected", "checked", "modal"})
        )
        if foldable:
            continue
        element_id = str(len(by_id) + 1)
        by_id[element_id] = node
        shown_depth.append((depth, printed))
        lines.append("  " * printed + node_line(element_id, node))
    return "\n".join(lines), by_id


def tree_observation(
    tree: dict[str, Any], max_nodes: int, metadata: dict[str, Any]
) -> tuple[str, dict[str, dict[str, Any]]]:
    """The observation body for the helper's `tree` reply and its id -> node map. A tree the helper
    cut at `max_nodes` lists the nodes it read and records the cut in `metadata` as a harness fact
    (turn_facts.NODES_TRUNCATED), never as text."""
    if not tree.get("ok"):
        return f"(the accessibility tree could not be read: {tree.get('error')})", {}
    try:
        body, elements = render_tree(tree["nodes"])
    except (KeyError, TypeError) as exc:
        raise HelperError(f"the desktop helper sent a malformed tree ({type(exc).__name__}: {exc})") from exc
    if tree.get("truncated"):
        turn_facts.record(
            metadata, turn_facts.NODES_TRUNCATED, {"max_nodes": max_nodes, "nodes_shown": len(elements)}
        )
    return body, elements


def node_line(element_id: str, node: dict[str, Any]) -> str:
    parts = [f"[{element_id}] {node['role']}"]
    if node["name"]:
        parts.append(json.dumps(node["name"], ensure_ascii=False))
    if node.get("states"):
        parts.append(f"({', '.join(node['states'])})")
    value = node.get("value")
    if value:
        parts.append(f"value={json.dumps(value[:2000], ensure_ascii=False)}")
    bounds = node.get("bounds")
    if bounds:
        x, y, w, h = bounds
        parts.append(f"@{x},{y} {w}x{h}")
    return " ".join(parts)


def xdotool_key(name: str) -> str:
    key = str(name)
    if len(key) == 1:
        return key
    mapped = KEY_NAMES.get(key.lower())
    if mapped is None:
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key):
            return key  # an X keysym name (Return, KP_Add, ...)
        raise ActionSyntaxError(f"unknown key {key!r}; use pyautogui names such as 'enter', 'ctrl', 'f5'")
    return mapped


class DesktopEnvironment(GuiEnvironment):
    """One private desktop session per task with the task's GTK applications."""

    domain = Domain.OS
    default_image = DESKTOP_IMAGE  # the collection job checks it is built before the run starts
    action_space = ACTION_SPACE
    config_fields = frozenset({"apps", "settle_s"})

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.session: DesktopSession | None = None
        self.tracker = StateTracker()
        self.elements: dict[str, dict[str, Any]] = {}
        self.observed: dict[str, Any] = {}  # harness facts about the latest observation (turn_facts)
        self.focused_pid: int | None = None
        self.last_error = ""
        self.mouse = (SCREEN[0] // 2, SCREEN[1] // 2)
        self.known_windows: list[str] = []  # the focused app's mapped X windows at the last look
        self.shown_windows = 0  # its windows on the accessibility bus at the last observation

    @classmethod
    def validate_task(cls, task: Task, where: str = "task") -> None:
        config = cls.checked_config(task, where)
        apps = config.get("apps")
        if (
            not isinstance(apps, list)
            or not apps
            or not all(
                (isinstance(a, str) and a)
                or (isinstance(a, list) and a and all(isinstance(x, str) for x in a))
                for a in apps
            )
        ):
            raise TaskError(
                f"{where} (id {task.id}): field 'os.apps' must be a non-empty list of commands, e.g. "
                '["gedit"] or [["gedit", "notes.txt"]]'
            )
        cls._check_sandbox_fields(task, where)

    @classmethod
    def needs_engine(cls, task: Task | None = None) -> bool:
        return True

    @classmethod
    def _check_sandbox_fields(cls, task: Task, where: str) -> None:
        """The task's sandbox fields: no network ever (a task asking for one is refused, not run without
        it), `limits` the sandbox knows, and files that stay inside the desktop's home."""
        if task.network or (task.limits or {}).get("network"):
            raise TaskError(
                f"{where} (id {task.id}): field 'network' (or 'limits.network'): the os domain's desktop "
                "sandbox has no network; drop the field"
            )
        try:
            SandboxLimits().with_overrides(task.limits)
        except ValueError as exc:
            raise TaskError(f"{where} (id {task.id}): {exc}") from exc
        for rel in task.files:
            path = PurePosixPath(rel)
            if not rel or path.is_absolute() or ".." in path.parts:
                raise TaskError(
                    f"{where} (id {task.id}): field 'files' key {rel!r}: a file of the desktop's home must "
                    "be a relative path that stays inside it (no leading / and no ..)"
                )

    @classmethod
    def doctor_checks(cls) -> list[Check]:
        """The desktop image; everything else the domain needs is inside it."""
        name = f"image {DESKTOP_IMAGE} (the desktop sandbox: Xvfb, AT-SPI, xdotool, gedit, gnome-calculator)"
        fix = f"{BUILD_SCRIPT}   (part of `make setup`)"
        try:
            ref = engine.image_reference(engine.connect(), DESKTOP_IMAGE)
        except engine.EngineUnavailable:
            return []  # the engine's own check says so
        except docker.errors.DockerException as exc:
            return [Check(name, False, f"missing: {exc}", fix, "os")]
        return [Check(name, True, ref, domain="os")]

    def reset(self, task: Task) -> ResetResult:
        self.task = task
        self._check_sandbox_fields(task, "task")
        config = task.domain_config("os")
        limits = self.options.limits.with_overrides(task.limits)
        client = self.options.client or engine.shared_client()
        sandbox = desktop_sandbox(client, limits, self.options.run_label)
        self.session = session = DesktopSession(sandbox)  # assigned first: close() removes a half-started one
        session.start()
        session.put_files(task.files)
        for app in config.get("apps", []):
            session.launch([app] if isinstance(app, str) else list(app))
        self.focused_pid = session.apps[0].pid
        session.focus_app(session.apps[0])
        self.known_windows = session.windows_of(session.apps[0])
        time.sleep(float(config.get("settle_s", 0.5)))
        text = self._observe()
        self.tracker.reset(state_text(text))
        running = "\n".join(f"- {a.name} (pid {a.pid}): {' '.join(a.command)}" for a in session.apps)
        files = "\n".join(f"- ~/{rel}" for rel in sorted(task.files)) or "- (none)"
        initial_state = (
            f"## Desktop\nXvfb {SCREEN[0]}x{SCREEN[1]}, no window manager, AT-SPI accessibility bus\n\n"
            f"## Running applications\n{running}\n\n## Home files\n{files}\n\n## Screen\n{text}"
        )
        return ResetResult(
            observation=Observation(text=text, format=ObservationFormat.AXTREE),
            initial_state=initial_state,
            action_space=ACTION_SPACE,
            info={
                "display": session.display,
                "apps": [a.name for a in session.apps],
                **({turn_facts.INITIAL: turn_facts.facts(self.observed)} if self.observed else {}),
            },
        )

    def step(self, action: Action) -> StepResult:
        if self.session is None:
            raise EnvFailure("step() before reset(): call reset(task) first")
        self.last_error = ""
        info: dict[str, Any] = {}
        with self.agent_mistakes(info):
            if self.shown_windows != len(self.known_windows):  # a window came or went since the last look
                self._refresh_focus()
            call = gui_call_from_action(action)
            kind = ActionKind.GUI if call.target is not None else ActionKind.CODE
            action = Action(kind=kind, text=call.text(), tool_name=action.tool_name)
            info.update(self._apply(call))
        failure = self._app_failure()
        text = self._observe() if failure is None else f"Error: {failure}"
        if failure is None:
            for fact, detail in turn_facts.facts(self.observed).items():
                turn_facts.record(info, fact, detail)
        changed = self.tracker.changed(state_text(text))
        return StepResult(
            action=action,
            observation=Observation(
                text=text, format=ObservationFormat.AXTREE, is_error=bool(self.last_error or failure) or None
            ),
            info=info,
            state_changed=changed,
            env_failure=failure,
        )

    def interrupt(self) -> None:
        if self.session is not None:
            self.session.interrupt()

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    # -- observation --------------------------------------------------------------------------------
    def _observe(self) -> str:
        session = self.session
        assert session is not None
        apps = [e for e in session.atspi("apps").get("apps", []) if isinstance(e, dict)]
        ours = {a.pid: a for a in session.apps}
        window_parts = []
        focused_pid = None
        for entry in apps:
            if entry.get("pid") not in ours:
                continue
            for win in entry.get("windows", []):
                states = win.get("states", [])
                window_parts.append(
                    f"{entry.get('name', '')}: {win.get('role', '')} {json.dumps(win.get('name', ''), ensure_ascii=False)}"
                    + (" (active)" if "active" in states else "")
                )
                if "active" in states:
                    focused_pid = entry["pid"]
        if focused_pid is None:
            focused_pid = self.focused_pid
        self.focused_pid = focused_pid
        self.shown_windows = sum(len(e.get("windows", [])) for e in apps if e.get("pid") == focused_pid)
        tree = session.atspi("tree", pid=focused_pid, max_nodes=MAX_NODES)
        self.observed = {}
        body, self.elements = tree_observation(tree, MAX_NODES, self.observed)
        name = ours[focused_pid].name if focused_pid in ours else "?"
        lines = [
            f"Windows: {' | '.join(window_parts) or '(none)'}",
            f"Focused application: {name}",
        ]
        if self.last_error:
            lines.append(f"Last action error: {self.last_error}")
        return "\n".join(lines + ["", body])

    def _app_failure(self) -> str | None:
        assert self.session is not None
        reasons = self.session.exit_reasons()
        return next((reasons[a.pid] for a in self.session.apps if a.pid in reasons), None)

    # -- actions ------------------------------------------------------------------------------------
    def _point(self, a: dict[str, Any]) -> tuple[int, int]:
        element = a.get("element")
        if element is not None:
            node = self.elements.get(str(element).strip("[]"))
            if node is None:
                raise ActionSyntaxError(f"no element [{element}] in the latest tree")
            if not node.get("bounds"):
                raise ActionSyntaxError(f"element [{element}] has no position on screen")
            x, y, w, h = node["bounds"]
            return x + w // 2, y + h // 2
        if "x" in a and "y" in a:
            return int(a["x"]), int(a["y"])
        if "x" in a or "y" in a:
            raise ActionSyntaxError("give both x and y, or an element id")
        return self.mouse

    def _click(self, point: tuple[int, int], button: str = "left", clicks: int = 1) -> None:
        assert self.session is not None
        x, y = point
        if not (0 <= x < SCREEN[0] and 0 <= y < SCREEN[1]):
            raise ActionSyntaxError(f"({x}, {y}) is off the {SCREEN[0]}x{SCREEN[1]} screen")
        if button not in BUTTONS:
            raise ActionSyntaxError(f"unknown button {button!r}; use left, middle or right")
        self.session.xdotool(
            "mousemove",
            "--sync",
            str(x),
            str(y),
            "click",
            "--repeat",
            str(clicks),
            "--delay",
            "60",
            BUTTONS[button],
        )
        self.mouse = point

    def _type(self, text: str) -> None:
        assert self.session is not None
        self.session.xdotool("type", "--delay", "8", "--", text)

    def _apply(self, call: GuiCall) -> dict[str, Any]:
        session = self.session
        assert session is not None
        if call.target is not None:
            return self._apply_target(call)
        name = call.name
        spec = OS_ACTIONS.get(name)
        if spec is None:
            raise ActionSyntaxError(f"unknown os action {name!r}; available: {', '.join(OS_ACTIONS)}")
        params = list(spec[1])
        if name == "hotkey":
            keys = call.args or call.kwargs.get("keys") or []
            if not keys:
                raise ActionSyntaxError("hotkey() needs keys, e.g. hotkey('ctrl', 's')")
            session.xdotool("key", "--clearmodifiers", "+".join(xdotool_key(k) for k in keys))
            return self._settle()
        if (
            call.args
            and isinstance(call.args[0], str)
            and name in ("click", "doubleClick", "tripleClick", "rightClick", "middleClick")
        ):
            call = GuiCall(name, [], {**call.kwargs, "element": call.args[0]})
        a = bind_arguments(call, params, name)
        missing = [p for p in spec[2] if p not in a]
        if missing:
            raise ActionSyntaxError(f"{name}() needs {', '.join(missing)}")
        if name == "click":
            self._click(self._point(a), str(a.get("button", "left")), int(a.get("clicks", 1)))
        elif name in ("doubleClick", "tripleClick"):
            self._click(self._point(a), str(a.get("button", "left")), 2 if name == "doubleClick" else 3)
        elif name in ("rightClick", "middleClick"):
            self._click(self._point(a), "right" if name == "rightClick" else "middle")
        elif name == "moveTo":
            x, y = self._point(a)
            session.xdotool("mousemove", "--sync", str(x), str(y))
            self.mouse = (x, y)
        elif name in ("dragTo", "drag"):
            start = self.mouse
            end = (
                (int(a["x"]), int(a["y"]))
                if name == "dragTo"
                else (start[0] + int(a["xOffset"]), start[1] + int(a["yOffset"]))
            )
            button = BUTTONS.get(str(a.get("button", "left")), "1")
            session.xdotool(
                "mousemove",
                "--sync",
                str(start[0]),
                str(start[1]),
                "mousedown",
                button,
                "mousemove",
                "--sync",
                str(end[0]),
                str(end[1]),
                "mouseup",
                button,
            )
            self.mouse = end
        elif name == "scroll":
            clicks = int(a["clicks"])
            if "x" in a and "y" in a:
                self.mouse = (int(a["x"]), int(a["y"]))
                session.xdotool("mousemove", "--sync", str(self.mouse[0]), str(self.mouse[1]))
            session.xdotool("click", "--repeat", str(min(abs(clicks), 50)), "4" if clicks > 0 else "5")
        elif name in ("typewrite", "write"):
            message = a["message"]
            if isinstance(message, list):  # pyautogui also accepts a list of key names
                for key in message:
                    session.xdotool("key", xdotool_key(str(key)))
            else:
                self._type(str(message))
        elif name == "press":
            keys = a["keys"] if isinstance(a["keys"], list) else [a["keys"]]
            for _ in range(max(1, min(int(a.get("presses", 1)), 100))):
                session.xdotool("key", *[xdotool_key(str(k)) for k in keys])
        elif name in ("keyDown", "keyUp"):
            session.xdotool("keydown" if name == "keyDown" else "keyup", xdotool_key(str(a["key"])))
        elif name == "wait":
            time.sleep(min(float(a.get("seconds", 1.0)), 30.0))
            return {}
        elif name == "done":
            return {"done": True}
        elif name == "fail":
            return {"infeasible": str(a.get("reason", ""))}
        return self._settle()

    def _apply_target(self, call: GuiCall) -> dict[str, Any]:
        session = self.session
        assert session is not None and call.target is not None
        if call.name not in TARGET_ACTIONS:
            raise ActionSyntaxError(
                f"the object form supports {', '.join(sorted(TARGET_ACTIONS))}; got {call.name!r}"
            )
        role = call.target.get("role")
        name = call.target.get("name", call.target.get("text"))
        reply = session.atspi("find", pid=self.focused_pid, role=role, name=name, hidden=True)
        matches = reply.get("matches", []) if reply.get("ok") else []
        if not matches:
            raise ActionSyntaxError(f"no element with role={role!r} name={name!r} in {self._focused_name()}")
        showing = [m for m in matches if m.get("showing") and m.get("bounds")]
        chosen = showing[0] if showing else matches[0]
        if chosen.get("bounds") and chosen.get("showing"):
            x, y, w, h = chosen["bounds"]
            point = (x + w // 2, y + h // 2)
            if call.name == "focus":
                self._click(point)
            else:
                clicks = 2 if call.name == "doubleClick" else 1
                self._click(point, "right" if call.name == "rightClick" else "left", clicks)
            how = "clicked at its centre"
        else:
            if call.name not in ("click", "focus"):
                raise ActionSyntaxError(
                    f"{role} {name!r} is not showing; only click can activate a hidden element"
                )
            done = session.atspi("do_action", pid=self.focused_pid, path=chosen["path"], action="click")
            if not done.get("ok"):
                raise ActionSyntaxError(
                    f"{role} {name!r} could not be activated: {done.get('error', 'refused')}"
                )
            how = f"activated through its AT-SPI action {done.get('action')!r}"
        if call.name in ("typewrite", "write"):
            self._type(str(call.kwargs.get("message", call.kwargs.get("value", ""))))
        self._settle()
        return {"resolved": {"role": chosen["role"], "name": chosen["name"], "how": how}}

    def _focused_name(self) -> str:
        assert self.session is not None
        return next(
            (a.name for a in self.session.apps if a.pid == self.focused_pid), "the focused application"
        )

    def _settle(self) -> dict[str, Any]:
        """Let the app react, then hand the keyboard to a window the action opened."""
        time.sleep(0.15)
        self._refresh_focus()
        return {}

    def _refresh_focus(self) -> None:
        """Give the keyboard to a window that appeared since the last look (a dialog), or back to the
        remaining one when one closed: with no window manager nobody else does. Runs after each action
        and again before the next, so a dialog that maps late still gets the keys meant for it."""
        assert self.session is not None
        app = next((a for a in self.session.apps if a.pid == self.focused_pid), None)
        if app is None:
            return
        windows = self.session.windows_of(app)
        new = [w for w in windows if w not in self.known_windows]
        if new:
            self.session.xdotool("windowfocus", new[-1])
        elif windows and set(self.known_windows) - set(windows):
            self.session.xdotool("windowfocus", windows[-1])
        self.known_windows = windows


ENVIRONMENT = DesktopEnvironment
