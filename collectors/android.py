"""Android domain: a real device or emulator driven through uiautomator2 (`u2.connect(serial)`).

Observation: the foreground package/activity, then the view hierarchy (`dump_hierarchy()`, the
`uiautomator dump` XML) compacted into one line per meaningful node, indented by nesting:
`[id] Class "text" desc="..." id=resource (clickable, checked, focused, ...) [x1,y1][x2,y2]`. Nodes with
no text, description, resource id or interactive state only lay out their children and are folded. The
same representation is used for every turn of a trajectory (the raw XML is never mixed in). A password
field's text shows as Android draws it, one bullet per character; a screen past MAX_NODES nodes lists
the first ones and the turn records the cut as a harness fact (schemas/turn_facts.py), never as text.

Actions: tap / long_press (x, y or an element id), swipe (x1, y1, x2, y2 or a direction), type(text),
back(), home(), enter(), open_app(package), wait(seconds), done(), fail(reason); and the object form
{"action": "tap", "text": "Network & internet"} (also "description", "resource_id", "class"),
resolved against the current screen at replay time.

Environment failures: no device at the serial, the task's app not installed, an "... has stopped" /
"... keeps stopping" / "... isn't responding" system dialog (the app crashed or hung), or the device
going away mid-trajectory. The device is external: no container engine is involved.
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collectors.environment import (
    INFO_INFRA_FAILURE,
    Check,
    EnvironmentOptions,
    InfrastructureUnavailable,
    ResetResult,
    StepResult,
    Task,
    TaskError,
)
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
from schemas import Action, ActionKind, ActionSpace, Domain, Observation, ObservationFormat, turn_facts

MAX_NODES = 600
# What Android's PasswordTransformationMethod draws for each character of a password field.
PASSWORD_MASK = "\u2022"
_N = {"type": "number"}
_S = {"type": "string"}
_EL = {"type": "string", "description": "an element id from the screen, instead of x/y"}
ANDROID_ACTIONS: dict[str, tuple[str, dict[str, dict[str, Any]], list[str]]] = {
    "tap": ("Tap at x, y or an element's centre.", {"x": _N, "y": _N, "element": _EL}, []),
    "long_press": (
        "Long-press at x, y or an element.",
        {"x": _N, "y": _N, "element": _EL, "duration": _N},
        [],
    ),
    "swipe": (
        "Swipe from (x1, y1) to (x2, y2), or in a direction (up, down, left, right).",
        {"x1": {"anyOf": [_N, _S]}, "y1": _N, "x2": _N, "y2": _N, "duration": _N},
        ["x1"],
    ),
    "type": ("Type text into the focused field.", {"text": _S}, ["text"]),
    "back": ("Press Back.", {}, []),
    "home": ("Press Home.", {}, []),
    "enter": ("Press Enter.", {}, []),
    "open_app": ("Launch an installed app by package name.", {"package": _S}, ["package"]),
    "wait": ("Wait seconds.", {"seconds": _N}, []),
    "done": ("Declare the task done.", {}, []),
    "fail": ("Declare the task infeasible.", {"reason": _S}, []),
}
TARGET_KEYS = ("text", "name", "description", "resource_id", "class")
ACTION_SPACE = ActionSpace(
    description=(
        "You operate an Android device. The observation shows the foreground package and activity and the "
        'screen\'s view hierarchy: [id] Class "text" desc="..." id=resource (states) [x1,y1][x2,y2]. Act '
        "with one call per turn: tap(x, y) or tap('12'), long_press, swipe(x1, y1, x2, y2) or "
        "swipe('up'), type('text'), back(), home(), enter(), open_app('com.android.settings'), "
        "wait(seconds), done(), fail('reason'). An element can also be addressed by its text, description "
        'or resource id: {"action": "tap", "text": "Network & internet"}.'
    ),
    tools=tools_from_signatures(ANDROID_ACTIONS),
)
# A system dialog that *is* the app failing: "Settings has stopped", "Chrome keeps stopping",
# "Maps isn't responding" (AOSP's aerr_* / anr_* strings).
_CRASH_TITLE = re.compile(r"^(?P<app>.{1,80}?) (?:has stopped|keeps stopping|isn.t responding)\.?$")
_CRASH_IDS = (
    "android:id/alertTitle",
    "android:id/aerr_restart",
    "android:id/aerr_close",
    "android:id/aerr_wait",
)
_BATTERY = re.compile(r"\bBattery \d+ percent\b|\b\d{1,3}%")
_STATES = (
    ("clickable", "clickable"),
    ("long-clickable", "long-clickable"),
    ("checkable", None),
    ("checked", "checked"),
    ("focused", "focused"),
    ("selected", "selected"),
    ("scrollable", "scrollable"),
    ("password", "password"),
)


@dataclass
class ViewNode:
    """One node of the hierarchy as the observation shows it."""

    cls: str
    text: str
    desc: str
    resource_id: str
    package: str
    states: list[str]
    bounds: tuple[int, int, int, int]  # x1, y1, x2, y2
    depth: int

    @property
    def centre(self) -> tuple[int, int]:
        x1, y1, x2, y2 = self.bounds
        return (x1 + x2) // 2, (y1 + y2) // 2

    @property
    def visible(self) -> bool:
        x1, y1, x2, y2 = self.bounds
        return x2 > x1 and y2 > y1


@dataclass
class Screen:
    """A parsed hierarchy: the nodes shown (by id), the text and the crash dialog if one is up."""

    text: str
    nodes: dict[str, ViewNode] = field(default_factory=dict)
    crash: str | None = None
    # Set when the hierarchy had more nodes to show than this: the text stops after the first ones.
    max_nodes: int | None = None

    def record_facts(self, metadata: dict[str, Any], key: str = turn_facts.HARNESS) -> None:
        """Record what the harness did to this screen (the node cap) as a fact in `metadata`."""
        if self.max_nodes is not None:
            turn_facts.record(
                metadata,
                turn_facts.NODES_TRUNCATED,
                {"max_nodes": self.max_nodes, "nodes_shown": len(self.nodes)},
                key=key,
            )


_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")


def short_class(cls: str) -> str:
    for prefix in ("android.widget.", "android.view.", "android.webkit."):
        if cls.startswith(prefix):
            return cls[len(prefix) :]
    return cls


def short_resource_id(resource_id: str) -> str:
    return resource_id.split(":id/", 1)[-1] if ":id/" in resource_id else resource_id


def parse_hierarchy(xml: str, max_nodes: int = MAX_NODES) -> Screen:
    """The compact text of a `uiautomator dump` hierarchy and its element map. Layout-only nodes
    (no text, description, resource id or interactive state) are folded into their children."""
    try:
        root = ET.fromstring(xml.encode("utf-8") if isinstance(xml, str) else xml)
    except ET.ParseError as exc:
        raise EnvFailure(f"the device returned an unreadable view hierarchy: {exc}") from exc
    lines: list[str] = []
    nodes: dict[str, ViewNode] = {}
    crash: str | None = None
    truncated = False

    def walk(element: ET.Element, printed_depth: int) -> None:
        nonlocal crash, truncated
        for child in element:
            if child.tag != "node":
                continue
            a = child.attrib
            match = _BOUNDS.match(a.get("bounds", ""))
            bounds = tuple(int(v) for v in match.groups()) if match else (0, 0, 0, 0)
            states = [label for attr, label in _STATES if label and a.get(attr) == "true"]
            if a.get("enabled") == "false":
                states.append("disabled")
            node = ViewNode(
                cls=short_class(a.get("class", "")),
                text=shown_text(a),
                desc=a.get("content-desc", ""),
                resource_id=a.get("resource-id", ""),
                package=a.get("package", ""),
                states=states,
                bounds=bounds,  # type: ignore[arg-type]
                depth=printed_depth,
            )
            if (node.resource_id in _CRASH_IDS or node.package == "android") and _CRASH_TITLE.match(
                node.text
            ):
                crash = node.text
            meaningful = bool(node.text or node.desc or node.resource_id or set(states) - {"disabled"})
            if meaningful and node.visible:
                if len(nodes) >= max_nodes:
                    truncated = True
                    return
                element_id = str(len(nodes) + 1)
                nodes[element_id] = node
                lines.append("  " * printed_depth + node_line(element_id, node))
                walk(child, printed_depth + 1)
            else:
                walk(child, printed_depth)

    walk(root, 0)
    text = "\n".join(lines) if lines else "(empty screen)"
    return Screen(text=text, nodes=nodes, crash=crash, max_nodes=max_nodes if truncated else None)


def shown_text(attrs: dict[str, str]) -> str:
    """A node's text as the screen draws it: a password field (password="true") shows one bullet per
    character whatever the dump holds (a TextView hands uiautomator the bullets it draws, but custom
    views and the "speak passwords" accessibility setting hand it the clear text); its hint, shown
    while the field is empty, stays readable."""
    text = attrs.get("text", "")
    if attrs.get("password") != "true" or not text or text == attrs.get("hint"):
        return text
    return PASSWORD_MASK * (len(text.encode("utf-16-le")) // 2)  # one per UTF-16 unit, as Android counts


def node_line(element_id: str, node: ViewNode) -> str:
    parts = [f"[{element_id}] {node.cls}"]
    if node.text:
        parts.append(_quote(node.text))
    if node.desc and node.desc != node.text:
        parts.append(f"desc={_quote(node.desc)}")
    if node.resource_id:
        parts.append(f"id={short_resource_id(node.resource_id)}")
    if node.states:
        parts.append(f"({', '.join(node.states)})")
    x1, y1, x2, y2 = node.bounds
    parts.append(f"[{x1},{y1}][{x2},{y2}]")
    return " ".join(parts)


def _quote(text: str) -> str:
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text[:300]}"'


class DeviceUnavailable(EnvFailure, InfrastructureUnavailable):
    """No device answers at the serial, or it failed before the episode began: retryable once the
    device is there (an app that is not installed is the task's env_failure: the device answered)."""


def _device_errors() -> tuple[type[BaseException], ...]:
    """uiautomator2's errors (some derive from BaseException, not Exception) plus ordinary failures."""
    try:
        from uiautomator2 import exceptions as u2e

        return (u2e.DeviceError, u2e.RPCError, OSError, RuntimeError, ValueError)
    except ImportError:
        return (OSError, RuntimeError, ValueError)


def _app_not_found() -> tuple[type[BaseException], ...]:
    try:
        from uiautomator2.exceptions import AppNotFoundError

        return (AppNotFoundError,)
    except ImportError:
        return ()


def connect_device(serial: str | None) -> Any:
    """uiautomator2's device for `serial` (the only connected device when None)."""
    import uiautomator2 as u2

    return u2.connect(serial)


class AndroidEnvironment(GuiEnvironment):
    """One device session per task; `device_factory(serial)` makes the device (uiautomator2 by default,
    a stand-in with the same methods in tests)."""

    domain = Domain.ANDROID
    action_space = ACTION_SPACE
    config_fields = frozenset({"serial", "app", "activity", "settle_s"})

    def __init__(
        self, options: EnvironmentOptions, device_factory: Callable[[str | None], Any] | None = None
    ) -> None:
        super().__init__(options)
        self.device_factory = device_factory or connect_device
        self.device: Any = None
        self.screen = Screen(text="")
        self.tracker = StateTracker(extra=(_BATTERY,))
        self.last_error = ""
        self.app: str | None = None

    @classmethod
    def validate_task(cls, task: Task, where: str = "task") -> None:
        config = cls.checked_config(task, where)
        for key in ("serial", "app", "activity"):
            if key in config and (not isinstance(config[key], str) or not config[key]):
                raise TaskError(f"{where} (id {task.id}): field 'android.{key}' must be a non-empty string")
        if "app" in config and not re.fullmatch(r"[A-Za-z][\w]*(\.[A-Za-z_][\w]*)+", config["app"]):
            raise TaskError(
                f"{where} (id {task.id}): field 'android.app' must be a package name such as "
                f"com.android.settings, got {config['app']!r}"
            )

    @classmethod
    def doctor_checks(cls) -> list[Check]:
        checks: list[Check] = []
        try:
            import adbutils
            import uiautomator2  # noqa: F401
        except ImportError as exc:
            return [Check("uiautomator2 importable", False, str(exc), "make setup")]
        checks.append(Check("uiautomator2 importable", True, "uiautomator2 + adbutils"))
        try:
            devices = adbutils.adb.device_list()
        except Exception as exc:  # no adb server: adbutils starts one when an adb binary is available
            checks.append(
                Check(
                    "connected devices (adb)",
                    False,
                    f"adb is not reachable: {type(exc).__name__}: {exc}"[:300],
                    "start an emulator or plug in a phone with USB debugging, then `adb devices`",
                    required=False,
                )
            )
            return checks
        listed = ", ".join(f"{d.serial} ({_safe_prop(d, 'ro.product.model')})" for d in devices)
        checks.append(
            Check(
                "connected devices (adb)",
                bool(devices),
                f"{len(devices)} device(s)" + (f": {listed}" if listed else ""),
                "start an emulator (emulator -avd NAME) or connect a phone (adb connect HOST:PORT); "
                "tasks name it with android.serial",
                required=False,  # a machine without a phone still collects every other domain
            )
        )
        return checks

    # -- episode ------------------------------------------------------------------------------------
    def reset(self, task: Task) -> ResetResult:
        self.task = task
        config = task.domain_config("android")
        serial = config.get("serial")
        errors = _device_errors()
        try:
            self.device = self.device_factory(serial)
        except errors as exc:
            raise DeviceUnavailable(
                f"task {task.id}: no Android device at {serial or 'the default serial'}: {exc}"
            ) from exc
        self.app = config.get("app")
        try:
            if self.app:
                self._start_app(self.app, config.get("activity"))
            time.sleep(float(config.get("settle_s", 0.0)))
            text = self._observe()
            info = _device_info(self.device)
        except EnvFailure:
            raise  # the device answers; what it holds fails the task (the app not installed)
        except errors as exc:
            raise DeviceUnavailable(
                f"task {task.id}: the device failed during setup: {type(exc).__name__}: {exc}"
            ) from exc
        if self.screen.crash:
            raise EnvFailure(f"task {task.id}: the app crashed at start: {self.screen.crash}")
        self.tracker.reset(state_text(text))
        initial_state = (
            f"## Device\n{info}\n\n## Foreground app\n{text.splitlines()[0]}\n\n"
            f"## Launched\n{self.app or '(none: the current screen)'}\n\n## Screen\n{text}"
        )
        reset_info: dict[str, Any] = {"serial": serial or "", "app": self.app or ""}
        self.screen.record_facts(reset_info, key=turn_facts.INITIAL)
        return ResetResult(
            observation=Observation(text=text, format=ObservationFormat.VIEW_HIERARCHY),
            initial_state=initial_state,
            action_space=ACTION_SPACE,
            info=reset_info,
        )

    def step(self, action: Action) -> StepResult:
        if self.device is None:
            raise EnvFailure("step() before reset(): call reset(task) first")
        self.last_error = ""
        info: dict[str, Any] = {}
        failure: str | None = None
        errors = _device_errors()
        try:
            with self.agent_mistakes(info):
                call = gui_call_from_action(action)
                action = Action(kind=ActionKind.GUI, text=call.text(), tool_name=action.tool_name)
                info.update(self._apply(call))
        except EnvFailure as exc:
            failure = str(exc)
        except errors as exc:
            failure = f"the device failed: {type(exc).__name__}: {exc}"
            info[INFO_INFRA_FAILURE] = True  # the device went away: not the task's outcome
        try:
            text = self._observe()
            self.screen.record_facts(info)
        except errors as exc:
            failure = failure or f"the device failed: {type(exc).__name__}: {exc}"
            info[INFO_INFRA_FAILURE] = True
            text = f"Error: {failure}"
        if failure is None and self.screen.crash:
            failure = f"the app crashed: {self.screen.crash}"
        return StepResult(
            action=action,
            observation=Observation(
                text=text,
                format=ObservationFormat.VIEW_HIERARCHY,
                is_error=bool(self.last_error or failure) or None,
            ),
            info=info,
            state_changed=self.tracker.changed(state_text(text)),
            env_failure=failure,
        )

    def close(self) -> None:
        self.device = None

    # -- helpers ------------------------------------------------------------------------------------
    def _start_app(self, package: str, activity: str | None = None) -> None:
        try:
            self.device.app_info(package)
        except _app_not_found() as exc:
            raise EnvFailure(f"the app {package} is not installed on the device") from exc
        self.device.app_start(package, activity, wait=True, stop=True)

    def _observe(self) -> str:
        xml = self.device.dump_hierarchy()
        self.screen = parse_hierarchy(xml)
        try:
            current = self.device.app_current()
            head = f"Package: {current.get('package', '?')}  Activity: {current.get('activity', '?')}"
        except _device_errors():
            head = "Package: ?  Activity: ? (the device reports no focused app)"
        lines = [head]
        if self.last_error:
            lines.append(f"Last action error: {self.last_error}")
        return "\n".join(lines + ["", self.screen.text])

    def _point(self, a: dict[str, Any]) -> tuple[int, int]:
        element = a.get("element")
        if element is not None:
            node = self.screen.nodes.get(str(element).strip("[]"))
            if node is None:
                raise ActionSyntaxError(f"no element [{element}] on the current screen")
            return node.centre
        if "x" in a and "y" in a:
            return int(a["x"]), int(a["y"])
        raise ActionSyntaxError("give x and y, or an element id such as tap('12')")

    def _find(self, target: dict[str, Any]) -> ViewNode:
        """The first visible node matching every given key (text or name: text or description)."""
        for node in self.screen.nodes.values():
            if "text" in target and node.text != target["text"]:
                continue
            if "name" in target and target["name"] not in (node.text, node.desc):
                continue
            if "description" in target and node.desc != target["description"]:
                continue
            if "resource_id" in target and target["resource_id"] not in (
                node.resource_id,
                short_resource_id(node.resource_id),
            ):
                continue
            if "class" in target and target["class"] not in (node.cls, short_class(str(target["class"]))):
                continue
            return node
        described = ", ".join(f"{k}={v!r}" for k, v in target.items())
        raise ActionSyntaxError(f"no element with {described} on the current screen")

    def _apply(self, call: GuiCall) -> dict[str, Any]:
        device = self.device
        if call.target is not None:
            target = {k: v for k, v in call.target.items() if k in TARGET_KEYS}
            if not target:
                raise ActionSyntaxError(f"the object form needs one of {', '.join(TARGET_KEYS)}")
            if call.name not in ("tap", "long_press", "type"):
                raise ActionSyntaxError(
                    f"the object form supports tap, long_press and type; got {call.name!r}"
                )
            node = self._find(target)
            x, y = node.centre
            if call.name == "long_press":
                device.long_click(x, y, float(call.kwargs.get("duration", 1.0)))
            else:
                device.click(x, y)
            if call.name == "type":
                device.send_keys(str(call.kwargs.get("value", call.kwargs.get("message", ""))))
            return {"resolved": {"class": node.cls, "text": node.text, "desc": node.desc, "at": [x, y]}}
        name = call.name
        spec = ANDROID_ACTIONS.get(name)
        if spec is None:
            raise ActionSyntaxError(
                f"unknown android action {name!r}; available: {', '.join(ANDROID_ACTIONS)}"
            )
        if call.args and isinstance(call.args[0], str) and name in ("tap", "long_press"):
            call = GuiCall(name, [], {**call.kwargs, "element": call.args[0]})
        a = bind_arguments(call, list(spec[1]), name)
        missing = [p for p in spec[2] if p not in a]
        if missing:
            raise ActionSyntaxError(f"{name}() needs {', '.join(missing)}")
        if name == "tap":
            device.click(*self._point(a))
        elif name == "long_press":
            device.long_click(*self._point(a), float(a.get("duration", 1.0)))
        elif name == "swipe":
            device.swipe(*self._swipe_points(a), float(a.get("duration", 0.3)))
        elif name == "type":
            device.send_keys(str(a["text"]))
        elif name in ("back", "home", "enter"):
            device.press(name)
        elif name == "open_app":
            package = str(a["package"])
            if not re.fullmatch(r"[A-Za-z][\w]*(\.[A-Za-z_][\w]*)+", package):
                raise ActionSyntaxError(f"{package!r} is not a package name such as com.android.settings")
            self._start_app(package)
        elif name == "wait":
            time.sleep(min(float(a.get("seconds", 1.0)), 30.0))
        elif name == "done":
            return {"done": True}
        elif name == "fail":
            return {"infeasible": str(a.get("reason", ""))}
        return {}

    def _swipe_points(self, a: dict[str, Any]) -> tuple[int, int, int, int]:
        if isinstance(a["x1"], str):
            direction = a["x1"].lower()
            width, height = self.device.window_size()
            cx, cy = width // 2, height // 2
            dx, dy = width * 3 // 10, height * 3 // 10
            vectors = {
                "up": (cx, cy + dy, cx, cy - dy),  # finger moves up: content scrolls down
                "down": (cx, cy - dy, cx, cy + dy),
                "left": (cx + dx, cy, cx - dx, cy),
                "right": (cx - dx, cy, cx + dx, cy),
            }
            if direction not in vectors:
                raise ActionSyntaxError(f"swipe direction must be up, down, left or right, got {direction!r}")
            return vectors[direction]
        try:
            return int(a["x1"]), int(a["y1"]), int(a["x2"]), int(a["y2"])
        except KeyError as exc:
            raise ActionSyntaxError("swipe(x1, y1, x2, y2) needs four coordinates, or swipe('up')") from exc


def _device_info(device: Any) -> str:
    try:
        info = device.info
        width, height = device.window_size()
    except _device_errors() as exc:
        return f"(device info unavailable: {exc})"
    keys = ("productName", "sdkInt", "currentPackageName", "naturalOrientation")
    facts = ", ".join(f"{k}={info[k]}" for k in keys if k in info)
    return f"{facts}, screen {width}x{height}"


def _safe_prop(device: Any, name: str) -> str:
    try:
        return str(device.prop.get(name) or "?")
    except Exception:
        return "?"


ENVIRONMENT = AndroidEnvironment
