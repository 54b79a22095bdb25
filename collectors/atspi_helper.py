#!/usr/bin/python3
"""AT-SPI bridge for the os domain, run by Debian's system python3 (pyatspi is packaged only there).

The collector (in the project's venv) starts this script with the desktop session's DISPLAY and
DBUS_SESSION_BUS_ADDRESS and speaks one JSON object per line on stdin/stdout:

    {"cmd": "apps"}                               -> {"ok": true, "apps": [{"name", "pid", "windows": [...]}]}
    {"cmd": "tree", "pid": 123, "max_nodes": 800} -> {"ok": true, "app": {...}, "nodes": [...], "truncated": false}
    {"cmd": "find", "pid": 123, "role": "menu item", "name": "Save", "hidden": true}
                                                  -> {"ok": true, "matches": [{"path", "role", "name", "bounds", "showing", "actions"}]}
    {"cmd": "do_action", "pid": 123, "path": [0, 2, 1], "action": "click"} -> {"ok": true}
    {"cmd": "quit"}

Nodes are a flat pre-order list with `depth`; subtrees that are not showing are skipped, so the tree
is what is on screen. `path` is the child-index path from the application, used to act on a node.
This file imports nothing from the project: it must run on the system interpreter alone.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pyatspi

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


COMMANDS: dict[str, Any] = {"apps": cmd_apps, "tree": cmd_tree, "find": cmd_find, "do_action": cmd_do_action}


def main() -> None:
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            if req.get("cmd") == "quit":
                break
            handler = COMMANDS.get(req.get("cmd"))
            reply = handler(req) if handler else {"ok": False, "error": f"unknown command {req.get('cmd')!r}"}
        except Exception as exc:  # report every failure to the collector; never die on one request
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
