#!/usr/bin/python3
"""The os domain's desktop, run inside its sandbox by Debian's system python3 (pyatspi is packaged only
there): it starts the desktop, launches the applications, types and clicks with xdotool and reads the
AT-SPI tree. The collector starts it with `python3 -c SOURCE` in an exec of the sandbox and speaks one
JSON object per line on its stdin/stdout; that JSON is all that leaves the sandbox.

    {"cmd": "start", "screen": [1280, 800]}        -> {"ok": true, "display": ":0"}
    {"cmd": "launch", "command": ["gedit", "a.txt"]} -> {"ok": true, "pid": 42} | {"ok": false, "missing": true}
    {"cmd": "status", "pids": [42]}               -> {"ok": true, "exited": {"42": "the application gedit ..."}}
    {"cmd": "xdotool", "args": ["key", "Return"]} -> {"ok": true, "rc": 0, "stdout": "", "stderr": ""}
    {"cmd": "apps"}                               -> {"ok": true, "apps": [{"name", "pid", "windows": [...]}]}
    {"cmd": "tree", "pid": 123, "max_nodes": 800} -> {"ok": true, "app": {...}, "nodes": [...], "truncated": false}
    {"cmd": "find", "pid": 123, "role": "menu item", "name": "Save", "hidden": true}
                                                  -> {"ok": true, "matches": [{"path", "role", "name", "bounds", "showing", "actions"}]}
    {"cmd": "do_action", "pid": 123, "path": [0, 2, 1], "action": "click"} -> {"ok": true}
    {"cmd": "quit"}                               (also on end of input: every process started is stopped)

Every request may carry an "id", echoed in its reply. `start` runs Xvfb (it picks a free display with
-displayfd), a private session bus and the AT-SPI bus launcher; applications run with HOME (the task's
files) as their working directory, their output in a log whose tail explains an exit. Nodes are a flat
pre-order list with `depth`; subtrees that are not showing are skipped, so the tree is what is on screen.
`path` is the child-index path from the application, used to act on a node. This file imports nothing
from the project: it must run on the system interpreter alone.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

import pyatspi  # connects lazily: the bus address is set by `start` before the first use

# A password field's text is shown as GTK draws it, one mask character per character (its default
# invisible char), whatever the toolkit hands to AT-SPI: some toolkits expose the clear text.
PASSWORD_ROLES = ("password text",)
PASSWORD_MASK = "\u25cf"
STATE_DIR = "/tmp/.desktop"  # runtime dir, config, caches and logs of the session, never the task's files
AT_SPI_LAUNCHER = "/usr/libexec/at-spi-bus-launcher"

INTERESTING_STATES = (
    "active",
    "focused",
    "selected",
    "checked",
    "pressed",
    "expanded",
    "collapsed",
    "editable",
    "modal",
    "indeterminate",
)


class Desktop:
    """The processes of one session: Xvfb, the bus, the AT-SPI launcher and the applications."""

    def __init__(self) -> None:
        self.services: list[subprocess.Popen[Any]] = []
        self.apps: dict[int, tuple[list[str], subprocess.Popen[Any], str]] = {}  # pid -> (command, proc, log)

    def start(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.services:
            return {"ok": False, "error": "the desktop is already started"}
        for tool in ("Xvfb", "dbus-daemon", "xdotool"):
            if shutil.which(tool) is None:
                return {"ok": False, "error": f"{tool} is not in the sandbox image"}
        width, height = (int(v) for v in req.get("screen", (1280, 800)))
        for sub in ("runtime", "config", "cache", "data", "logs"):
            os.makedirs(f"{STATE_DIR}/{sub}", mode=0o700, exist_ok=True)
        os.environ.update(
            {
                "XDG_RUNTIME_DIR": f"{STATE_DIR}/runtime",
                "XDG_CONFIG_HOME": f"{STATE_DIR}/config",
                "XDG_CACHE_HOME": f"{STATE_DIR}/cache",
                "XDG_DATA_HOME": f"{STATE_DIR}/data",
                "LANG": "C.UTF-8",
                "TZ": "UTC",
                "NO_AT_BRIDGE": "0",
                "GTK_MODULES": "gail:atk-bridge",
                "GNOME_ACCESSIBILITY": "1",
                "GSK_RENDERER": "cairo",
                "GDK_BACKEND": "x11",
                "LIBGL_ALWAYS_SOFTWARE": "1",
            }
        )
        read_fd, write_fd = os.pipe()
        with open(f"{STATE_DIR}/logs/xvfb.log", "wb") as log:
            xvfb = subprocess.Popen(
                ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", f"{width}x{height}x24"]
                + ["-nolisten", "tcp", "-noreset"],
                pass_fds=(write_fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        self.services.append(xvfb)
        os.close(write_fd)
        # -noreset: an X server resets when its last client disconnects, and a client connecting during
        # the reset fails. Xvfb writes "N\n", possibly in two writes: read to the newline before closing
        # the pipe, or its second write hits a closed pipe and it exits.
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
            return {"ok": False, "error": f"Xvfb did not report a display within 15 s: {_tail('xvfb.log')}"}
        os.environ["DISPLAY"] = f":{number}"
        deadline = time.monotonic() + 15
        while _run(["xdotool", "getdisplaygeometry"]).returncode != 0:
            if time.monotonic() > deadline or xvfb.poll() is not None:
                return {
                    "ok": False,
                    "error": f"the X display does not accept connections: {_tail('xvfb.log')}",
                }
            time.sleep(0.05)
        bus = subprocess.Popen(
            ["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
        )
        self.services.append(bus)
        assert bus.stdout is not None
        ready, _, _ = select.select([bus.stdout.fileno()], [], [], 10)
        address = bus.stdout.readline().strip() if ready else ""
        if not address:
            return {"ok": False, "error": "the D-Bus session bus did not start"}
        os.environ["DBUS_SESSION_BUS_ADDRESS"] = address
        self.services.append(
            subprocess.Popen(
                [AT_SPI_LAUNCHER, "--launch-immediately"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        return {"ok": True, "display": os.environ["DISPLAY"]}

    def launch(self, req: dict[str, Any]) -> dict[str, Any]:
        command = [str(part) for part in req.get("command") or []]
        if not command:
            return {"ok": False, "error": "launch needs a command"}
        if not self.services:
            return {"ok": False, "error": "the desktop is not started"}
        if shutil.which(command[0]) is None:
            return {"ok": False, "missing": True, "error": f"no command {command[0]!r} on the sandbox's PATH"}
        log = f"{STATE_DIR}/logs/{os.path.basename(command[0])}-{len(self.apps)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                command,
                cwd=os.environ.get("HOME", "/"),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        self.apps[proc.pid] = (command, proc, log)
        return {"ok": True, "pid": proc.pid}

    def status(self, req: dict[str, Any]) -> dict[str, Any]:
        """Why each of the given applications is gone; running ones are not listed."""
        exited: dict[str, str] = {}
        for pid in req.get("pids") or list(self.apps):
            entry = self.apps.get(int(pid))
            if entry is None:
                exited[str(pid)] = f"no application with pid {pid} was started"
                continue
            command, proc, log = entry
            code = proc.poll()
            if code is None:
                continue
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            tail = _tail(os.path.basename(log), 300)
            exited[str(pid)] = f"the application {command[0]} {how}" + (f": {tail}" if tail else "")
        xvfb = self.services[0].poll() if self.services else None
        reply: dict[str, Any] = {"ok": True, "exited": exited}
        if xvfb is not None:
            reply["xvfb"] = f"Xvfb exited with code {xvfb}: {_tail('xvfb.log')}"
        return reply

    def xdotool(self, req: dict[str, Any]) -> dict[str, Any]:
        try:
            result = _run(["xdotool", *[str(a) for a in req.get("args", [])]], timeout=20)
        except subprocess.TimeoutExpired:
            return {"ok": False, "error": "xdotool did not finish within 20 s"}
        return {"ok": True, "rc": result.returncode, "stdout": result.stdout, "stderr": result.stderr}

    def stop(self) -> None:
        """Stop every application and service, each with the processes it started."""
        for proc in [p for _, p, _ in self.apps.values()] + list(reversed(self.services)):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    proc.wait(timeout=2)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.apps.clear()
        self.services.clear()


def _run(args: list[str], timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _tail(log_name: str, size: int = 800) -> str:
    try:
        with open(f"{STATE_DIR}/logs/{log_name}", "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _not_dumpable() -> None:
    """PR_SET_DUMPABLE 0: other processes of the same user (the task's applications) cannot open this
    one's /proc entries, so none can write forged replies into its stdout or read its requests."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _states(obj: Any, lenient: bool = False) -> tuple[list[str], bool]:
    """(interesting states, on screen). GTK 4 marks only toplevels `showing`: with `lenient` a
    `visible` node counts as on screen too (its parent already is)."""
    try:
        state_set = obj.getState()
    except Exception:
        return [], False
    names = [pyatspi.stateToString(s) for s in state_set.getStates()]
    out = [n for n in names if n in INTERESTING_STATES]
    if "sensitive" not in names and "enabled" not in names:
        out.append("disabled")
    return out, "showing" in names or (lenient and "visible" in names)


def _lenient(app: Any) -> bool:
    """Whether the application's toolkit marks visibility the GTK 4 way."""
    try:
        return (app.toolkitName or "").upper().startswith("GTK") and (app.toolkitVersion or "").startswith(
            "4"
        )
    except Exception:
        return False


def _bounds(obj: Any) -> list[int] | None:
    try:
        ext = obj.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
    except Exception:
        return None
    if ext.width <= 0 or ext.height <= 0:
        return None
    return [int(ext.x), int(ext.y), int(ext.width), int(ext.height)]


def _value(obj: Any, role: str) -> str | None:
    try:
        text = obj.queryText()
        if role in (
            "text",
            "entry",
            "password text",
            "terminal",
            "document text",
            "paragraph",
            "spin button",
        ):
            count = text.characterCount
            content = text.getText(0, min(count, 4000))
            return str(content) + ("…" if count > 4000 else "")
    except Exception:
        pass
    try:
        value = obj.queryValue()
        return str(value.currentValue)
    except Exception:
        return None


def _actions(obj: Any) -> list[str]:
    try:
        action = obj.queryAction()
        return [str(action.getName(i)) for i in range(action.nActions)]
    except Exception:
        return []


def _app_for(pid: int) -> Any:
    desktop = pyatspi.Registry.getDesktop(0)
    for app in desktop:
        try:
            if app is not None and app.get_process_id() == pid:
                return app
        except Exception:
            continue
    return None


def cmd_apps(req: dict[str, Any]) -> dict[str, Any]:
    apps: list[dict[str, Any]] = []
    desktop = pyatspi.Registry.getDesktop(0)
    for app in desktop:
        if app is None:
            continue
        try:
            windows: list[dict[str, Any]] = []
            for win in app:
                states, showing = _states(win)
                if not showing:
                    continue
                windows.append({"role": win.getRoleName(), "name": win.name or "", "states": states})
            apps.append({"name": app.name or "", "pid": app.get_process_id(), "windows": windows})
        except Exception:
            continue
    return {"ok": True, "apps": apps}


def cmd_tree(req: dict[str, Any]) -> dict[str, Any]:
    app = _app_for(req["pid"])
    if app is None:
        return {"ok": False, "error": f"no application with pid {req['pid']} on the accessibility bus"}
    max_nodes = int(req.get("max_nodes", 800))
    lenient = _lenient(app)
    nodes: list[dict[str, Any]] = []
    truncated = False

    def walk(obj: Any, depth: int, path: list[int]) -> None:
        nonlocal truncated
        if len(nodes) >= max_nodes:
            truncated = True
            return
        try:
            role = obj.getRoleName()
        except Exception:
            return
        states, showing = _states(obj, lenient)
        if depth > 0 and not showing:
            return
        node = {"depth": depth, "path": path, "role": role, "name": obj.name or "", "states": states}
        bounds = _bounds(obj)
        if bounds:
            node["bounds"] = bounds
        value = _value(obj, role)
        if value is not None and role in PASSWORD_ROLES:
            value = PASSWORD_MASK * len(value.rstrip("…"))
        if value is not None:
            node["value"] = value
        nodes.append(node)
        try:
            children = list(obj)
        except Exception:
            children = []
        for i, child in enumerate(children):
            if child is not None:
                walk(child, depth + 1, path + [i])

    for i, win in enumerate(app):
        if win is not None:
            walk(win, 0, [i])
    app_info = {"name": app.name or "", "pid": req["pid"], "toolkit": _toolkit(app)}
    return {"ok": True, "app": app_info, "nodes": nodes, "truncated": truncated}


def _toolkit(app: Any) -> str:
    try:
        return f"{app.toolkitName} {app.toolkitVersion}"
    except Exception:
        return ""


def _resolve(app: Any, path: list[int]) -> Any:
    obj = app
    for i in path:
        obj = obj.getChildAtIndex(i)
        if obj is None:
            return None
    return obj


def cmd_find(req: dict[str, Any]) -> dict[str, Any]:
    app = _app_for(req["pid"])
    if app is None:
        return {"ok": False, "error": f"no application with pid {req['pid']} on the accessibility bus"}
    role = req.get("role")
    name = req.get("name")
    hidden = bool(req.get("hidden", True))
    lenient = _lenient(app)
    matches: list[dict[str, Any]] = []

    def walk(obj: Any, path: list[int], depth: int) -> None:
        if len(matches) >= 20 or depth > 60:
            return
        try:
            obj_role = obj.getRoleName()
            obj_name = obj.name or ""
        except Exception:
            return
        states, showing = _states(obj, lenient)
        if path and not showing and not hidden:
            return
        if (role is None or obj_role == role) and (name is None or obj_name == name):
            matches.append(
                {
                    "path": path,
                    "role": obj_role,
                    "name": obj_name,
                    "bounds": _bounds(obj) if showing else None,
                    "showing": showing,
                    "actions": _actions(obj),
                    "states": states,
                }
            )
        try:
            children = list(obj)
        except Exception:
            return
        for i, child in enumerate(children):
            if child is not None:
                walk(child, path + [i], depth + 1)

    walk(app, [], 0)
    return {"ok": True, "matches": matches}


def cmd_do_action(req: dict[str, Any]) -> dict[str, Any]:
    app = _app_for(req["pid"])
    if app is None:
        return {"ok": False, "error": f"no application with pid {req['pid']} on the accessibility bus"}
    obj = _resolve(app, req["path"])
    if obj is None:
        return {"ok": False, "error": "the element is gone"}
    wanted = req.get("action")
    try:
        action = obj.queryAction()
    except Exception:
        return {"ok": False, "error": "the element has no actions"}
    names = [action.getName(i) for i in range(action.nActions)]
    index = names.index(wanted) if wanted in names else 0 if names else -1
    if index < 0:
        return {"ok": False, "error": "the element has no actions"}
    return {"ok": bool(action.doAction(index)), "action": names[index]}


def main() -> None:
    _not_dumpable()
    desktop = Desktop()
    commands: dict[str, Any] = {
        "start": desktop.start,
        "launch": desktop.launch,
        "status": desktop.status,
        "xdotool": desktop.xdotool,
        "apps": cmd_apps,
        "tree": cmd_tree,
        "find": cmd_find,
        "do_action": cmd_do_action,
    }
    try:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            req: dict[str, Any] = {}
            try:
                req = json.loads(line)
                if req.get("cmd") == "quit":
                    break
                handler = commands.get(str(req.get("cmd")))
                reply = (
                    handler(req) if handler else {"ok": False, "error": f"unknown command {req.get('cmd')!r}"}
                )
            except Exception as exc:  # report every failure to the collector; never die on one request
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            if isinstance(req, dict) and "id" in req:
                reply["id"] = req["id"]
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    finally:
        desktop.stop()


if __name__ == "__main__":
    main()
