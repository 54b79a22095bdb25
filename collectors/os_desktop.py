"""OS domain: real GTK applications on a private X display, observed through the AT-SPI tree.

Every task gets its own desktop session, started and stopped here: Xvfb on a free display (it picks
one itself with -displayfd), a private D-Bus session bus, the AT-SPI bus launcher, and the task's
applications (gedit, gnome-calculator, ...) with a throw-away HOME. The accessibility tree is read by
collectors/atspi_helper.py under Debian's /usr/bin/python3 (pyatspi exists only there), a long-lived
child process speaking JSON lines; the collector itself stays in the venv. Input goes through xdotool.

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
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from schemas import Action, ActionKind, ActionSpace, Domain, Observation, ObservationFormat

SYSTEM_PYTHON = "/usr/bin/python3"
HELPER = Path(__file__).with_name("atspi_helper.py")
AT_SPI_LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
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
    """The AT-SPI helper process failed (not installed, crashed, timed out)."""


class AtspiClient:
    """The JSON-lines client of atspi_helper.py; one request at a time."""

    def __init__(self, env: dict[str, str], timeout_s: float = 20.0) -> None:
        self.timeout_s = timeout_s
        self.proc = subprocess.Popen(
            [SYSTEM_PYTHON, str(HELPER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
        )
        self._lock = threading.Lock()

    def call(self, **request: Any) -> dict[str, Any]:
        with self._lock:
            if self.proc.poll() is not None or self.proc.stdin is None or self.proc.stdout is None:
                raise HelperError(f"the AT-SPI helper exited ({self.proc.returncode}): {self._stderr()}")
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout_s)
            if not ready:
                raise HelperError(
                    f"the AT-SPI helper did not answer {request.get('cmd')!r} within {self.timeout_s:.0f} s"
                )
            line = self.proc.stdout.readline()
        if not line:
            raise HelperError(f"the AT-SPI helper exited: {self._stderr()}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _stderr(self) -> str:
        try:
            if self.proc.poll() is not None and self.proc.stderr is not None:
                return self.proc.stderr.read()[-500:].strip()
        except Exception:
            pass
        return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.write('{"cmd": "quit"}\n')
                    self.proc.stdin.flush()
                self.proc.wait(timeout=2)
            except Exception:
                self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except Exception:
                pass


@dataclass
class RunningApp:
    command: list[str]
    proc: subprocess.Popen[bytes]
    name: str = ""
    log: Path | None = None

    def exit_reason(self) -> str | None:
        code = self.proc.poll()
        if code is None:
            return None
        tail = self.log.read_text("utf-8", "replace")[-300:].strip() if self.log and self.log.exists() else ""
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return f"the application {self.command[0]} {how}" + (f": {tail}" if tail else "")


@dataclass
class DesktopSession:
    """Xvfb + a session bus + the AT-SPI bus, and the applications started in it. Every process is
    ours (its own process group) and `close` stops them all."""

    home: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="worldline-desktop-")))
    display: str = ""
    env: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[Any]] = field(default_factory=list)
    apps: list[RunningApp] = field(default_factory=list)
    atspi: AtspiClient | None = None

    def start(self) -> DesktopSession:
        for tool in ("Xvfb", "dbus-daemon", "xdotool"):
            if shutil.which(tool) is None:
                raise EnvFailure(f"{tool} is not installed (run infra/install-system.sh)")
        if not os.path.exists(AT_SPI_LAUNCHER) or not os.path.exists(SYSTEM_PYTHON):
            raise EnvFailure(f"{AT_SPI_LAUNCHER} or {SYSTEM_PYTHON} is missing (run infra/install-system.sh)")
        read_fd, write_fd = os.pipe()
        with (self.home / "xvfb.log").open("wb") as xvfb_log:
            xvfb = subprocess.Popen(
                [
                    "Xvfb",
                    "-displayfd",
                    str(write_fd),
                    "-screen",
                    "0",
                    f"{SCREEN[0]}x{SCREEN[1]}x24",
                    "-nolisten",
                    "tcp",
                    "-noreset",
                ],
                pass_fds=(write_fd,),
                stdout=subprocess.DEVNULL,
                stderr=xvfb_log,
                start_new_session=True,
            )
        self.procs.append(xvfb)
        os.close(write_fd)
        # -noreset: an X server resets when its last client disconnects, and a client connecting
        # during the reset fails ("cannot open display"). Xvfb writes "N\n", possibly in two writes:
        # read to the newline before closing the pipe, or its second write hits a closed pipe and it exits.
        data = b""
        deadline = time.monotonic() + 15
        while not data.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([read_fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(read_fd, 64) if ready else b""
            if not chunk:
                break
            data += chunk
        os.close(read_fd)
        number = data.decode().strip()
        if not number.isdigit():
            raise EnvFailure("Xvfb did not report a display within 15 s")
        self.display = f":{number}"
        runtime = self.home / "runtime"
        runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "DISPLAY": self.display,
            "XDG_RUNTIME_DIR": str(runtime),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local/share"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "LANG": "C.UTF-8",
            "TZ": "UTC",
            "NO_AT_BRIDGE": "0",
            "GTK_MODULES": "gail:atk-bridge",
            "GNOME_ACCESSIBILITY": "1",
            "GSK_RENDERER": "cairo",
            "GDK_BACKEND": "x11",
            "LIBGL_ALWAYS_SOFTWARE": "1",
        }
        deadline = time.monotonic() + 15
        while (
            subprocess.run(["xdotool", "getdisplaygeometry"], env=self.env, capture_output=True).returncode
            != 0
        ):
            if time.monotonic() > deadline or xvfb.poll() is not None:
                raise EnvFailure(f"the X display {self.display} does not accept connections")
            time.sleep(0.05)
        bus = subprocess.Popen(
            ["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,
            text=True,
        )
        self.procs.append(bus)
        assert bus.stdout is not None
        ready, _, _ = select.select([bus.stdout.fileno()], [], [], 10)
        address = bus.stdout.readline().strip() if ready else ""
        if not address:
            raise EnvFailure("the D-Bus session bus did not start")
        self.env["DBUS_SESSION_BUS_ADDRESS"] = address
        self.procs.append(
            subprocess.Popen(
                [AT_SPI_LAUNCHER, "--launch-immediately"],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        self.atspi = AtspiClient(self.env)
        return self

    def launch(self, command: list[str], timeout_s: float = APP_START_TIMEOUT_S) -> RunningApp:
        """Start an application and wait until it shows a window on the accessibility bus."""
        if shutil.which(command[0]) is None:
            raise EnvFailure(f"the application {command[0]!r} is not installed (no such command on PATH)")
        log = self.home / f"{Path(command[0]).name}-{len(self.apps)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                command, cwd=self.home, env=self.env, stdout=out, stderr=out, start_new_session=True
            )
        app = RunningApp(command=command, proc=proc, log=log)
        self.apps.append(app)
        assert self.atspi is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            reason = app.exit_reason()
            if reason:
                xvfb = self.procs[0].poll() if self.procs else None
                raise EnvFailure(f"{reason} [xvfb {xvfb}: {(self.home / 'xvfb.log').read_text()[-800:]}]")
            for entry in self.atspi.call(cmd="apps").get("apps", []):
                if entry.get("pid") == proc.pid and entry.get("windows"):
                    app.name = entry.get("name") or Path(command[0]).name
                    self.focus_app(app)
                    return app
            time.sleep(0.2)
        raise EnvFailure(
            f"the application {command[0]} showed no window on the accessibility bus within {timeout_s:.0f} s"
        )

    def xdotool(self, *args: str) -> str:
        result = subprocess.run(["xdotool", *args], env=self.env, capture_output=True, text=True, timeout=20)
        unknown = re.search(r"No such key name '([^']*)'", result.stderr)
        if unknown:
            raise ActionSyntaxError(
                f"unknown key {unknown.group(1)!r}; use pyautogui names such as 'enter', 'ctrl', 'f5'"
            )
        return result.stdout

    def windows_of(self, app: RunningApp) -> list[str]:
        return self.xdotool("search", "--onlyvisible", "--pid", str(app.proc.pid)).split()

    def focus_app(self, app: RunningApp) -> None:
        """Give the keyboard to the app's newest visible window (there is no window manager to do it)."""
        windows = self.windows_of(app)
        if windows:
            self.xdotool("windowfocus", "--sync", windows[-1])

    def close(self) -> None:
        if self.atspi is not None:
            self.atspi.close()
            self.atspi = None
        for proc in [a.proc for a in self.apps] + list(reversed(self.procs)):
            _stop_group(proc)
        self.apps.clear()
        self.procs.clear()
        shutil.rmtree(self.home, ignore_errors=True)


def _stop_group(proc: subprocess.Popen[Any]) -> None:
    """Stop a process we started in its own session, and everything it started."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait(timeout=3)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


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
    action_space = ACTION_SPACE
    config_fields = frozenset({"apps", "settle_s"})

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.session: DesktopSession | None = None
        self.tracker = StateTracker()
        self.elements: dict[str, dict[str, Any]] = {}
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

    @classmethod
    def doctor_checks(cls) -> list[Check]:
        checks = []
        for tool, what in (
            ("Xvfb", "virtual X display"),
            ("dbus-daemon", "session bus"),
            ("xdotool", "input"),
            ("gedit", "GTK text editor"),
            ("gnome-calculator", "GTK calculator"),
        ):
            path = shutil.which(tool)
            checks.append(
                Check(
                    f"{tool} installed ({what})",
                    path is not None,
                    path or "not found on PATH",
                    "sudo infra/install-system.sh",
                )
            )
        checks.append(
            Check(
                "AT-SPI bus launcher",
                os.path.exists(AT_SPI_LAUNCHER),
                AT_SPI_LAUNCHER,
                "sudo infra/install-system.sh",
            )
        )
        try:
            probe = subprocess.run(
                [SYSTEM_PYTHON, "-c", "import pyatspi"], capture_output=True, text=True, timeout=30
            )
            ok, detail = (
                probe.returncode == 0,
                (probe.stderr.strip().splitlines() or ["import pyatspi works"])[-1],
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            ok, detail = False, str(exc)
        checks.append(Check("pyatspi in the system python3", ok, detail, "sudo infra/install-system.sh"))
        return checks

    def reset(self, task: Task) -> ResetResult:
        self.task = task
        config = task.domain_config("os")
        self.session = session = DesktopSession()  # assigned first: close() cleans up a half-started one
        session.start()
        for rel, content in task.files.items():
            path = session.home / rel
            if not path.resolve().is_relative_to(session.home.resolve()):
                raise TaskError(f"task {task.id}: file {rel!r} must stay inside the home directory")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, "utf-8")
        for app in config.get("apps", []):
            session.launch([app] if isinstance(app, str) else list(app))
        self.focused_pid = session.apps[0].proc.pid
        session.focus_app(session.apps[0])
        self.known_windows = session.windows_of(session.apps[0])
        time.sleep(float(config.get("settle_s", 0.5)))
        text = self._observe()
        self.tracker.reset(state_text(text))
        running = "\n".join(f"- {a.name} (pid {a.proc.pid}): {' '.join(a.command)}" for a in session.apps)
        files = "\n".join(f"- ~/{rel}" for rel in sorted(task.files)) or "- (none)"
        initial_state = (
            f"## Desktop\nXvfb {SCREEN[0]}x{SCREEN[1]}, no window manager, AT-SPI accessibility bus\n\n"
            f"## Running applications\n{running}\n\n## Home files\n{files}\n\n## Screen\n{text}"
        )
        return ResetResult(
            observation=Observation(text=text, format=ObservationFormat.AXTREE),
            initial_state=initial_state,
            action_space=ACTION_SPACE,
            info={"display": session.display, "apps": [a.name for a in session.apps]},
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

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    # -- observation --------------------------------------------------------------------------------
    def _observe(self) -> str:
        session = self.session
        assert session is not None and session.atspi is not None
        apps = session.atspi.call(cmd="apps").get("apps", [])
        ours = {a.proc.pid: a for a in session.apps}
        window_parts = []
        focused_pid = None
        for entry in apps:
            if entry.get("pid") not in ours:
                continue
            for win in entry.get("windows", []):
                window_parts.append(
                    f"{entry['name']}: {win['role']} {json.dumps(win['name'], ensure_ascii=False)}"
                    + (" (active)" if "active" in win.get("states", []) else "")
                )
                if "active" in win.get("states", []):
                    focused_pid = entry["pid"]
        if focused_pid is None:
            focused_pid = self.focused_pid
        self.focused_pid = focused_pid
        self.shown_windows = sum(len(e.get("windows", [])) for e in apps if e.get("pid") == focused_pid)
        tree = session.atspi.call(cmd="tree", pid=focused_pid, max_nodes=MAX_NODES)
        if not tree.get("ok"):
            body, self.elements = f"(the accessibility tree could not be read: {tree.get('error')})", {}
        else:
            body, self.elements = render_tree(tree["nodes"])
            if tree.get("truncated"):
                body += f"\n[worldline: tree truncated at {MAX_NODES} nodes]"
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
        for app in self.session.apps:
            reason = app.exit_reason()
            if reason:
                return reason
        return None

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
        assert session is not None and session.atspi is not None and call.target is not None
        if call.name not in TARGET_ACTIONS:
            raise ActionSyntaxError(
                f"the object form supports {', '.join(sorted(TARGET_ACTIONS))}; got {call.name!r}"
            )
        role = call.target.get("role")
        name = call.target.get("name", call.target.get("text"))
        reply = session.atspi.call(cmd="find", pid=self.focused_pid, role=role, name=name, hidden=True)
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
            done = session.atspi.call(
                cmd="do_action", pid=self.focused_pid, path=chosen["path"], action="click"
            )
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
            (a.name for a in self.session.apps if a.proc.pid == self.focused_pid), "the focused application"
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
        app = next((a for a in self.session.apps if a.proc.pid == self.focused_pid), None)
        if app is None or app.exit_reason() is not None:
            return
        windows = self.session.windows_of(app)
        new = [w for w in windows if w not in self.known_windows]
        if new:
            self.session.xdotool("windowfocus", new[-1])
        elif windows and set(self.known_windows) - set(windows):
            self.session.xdotool("windowfocus", windows[-1])
        self.known_windows = windows


ENVIRONMENT = DesktopEnvironment
