"""OSWorld task JSON (evaluation_examples/examples/<app>/<id>.json) as os tasks.

An OSWorld task names the applications it needs (`related_apps`) and prepares a virtual machine
(`config`: downloads, launches, commands). The desktop here (worldline/desktop) has gedit and
gnome-calculator only and no network, so a task is imported when every related application is one of
those and every `config` step is a launch of one of them; any other is skipped with the reason (the
application missing, or the step that needs the network or the VM). PATH is one JSON file or a
folder searched for them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collectors.task_import import Item, Skip, SuiteError, with_provenance

SUITE = "osworld"
# OSWorld application names -> the desktop's commands.
APPS = {"gedit": "gedit", "gnome-calculator": "gnome-calculator", "calculator": "gnome-calculator"}


def task_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(path.rglob("*.json"))
        if found:
            return found
    raise SuiteError(f"{path}: no OSWorld task JSON here (evaluation_examples/examples/<app>/<id>.json)")


def _launches(config: list[Any]) -> tuple[list[list[str]], str]:
    """The apps the config steps launch, or ([], why a step cannot run here)."""
    apps: list[list[str]] = []
    for step in config:
        kind = step.get("type") if isinstance(step, dict) else None
        params = step.get("parameters") or {} if isinstance(step, dict) else {}
        if kind == "launch":
            command = params.get("command")
            argv = command if isinstance(command, list) else str(command or "").split()
            if argv and argv[0] in APPS:
                apps.append([APPS[argv[0]], *[str(a) for a in argv[1:]]])
                continue
            return [], f"config launches {argv[0] if argv else '?'}, not on this desktop"
        return [], f"config step {kind!r} needs the OSWorld VM or the network"
    return apps, ""


def read_task(path: Path) -> Item:
    try:
        obj = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise SuiteError(f"{path}: not an OSWorld task JSON ({exc})") from exc
    if not isinstance(obj, dict) or "instruction" not in obj or "id" not in obj:
        raise SuiteError(f"{path}: not an OSWorld task (needs 'id' and 'instruction')")
    suite_id = str(obj["id"])
    related = [str(a) for a in obj.get("related_apps") or []]
    missing = [a for a in related if a not in APPS]
    if missing or not related:
        return Skip(suite_id, f"application not on this desktop: {', '.join(missing) or 'none named'}")
    apps, why = _launches(obj.get("config") or [])
    if why:
        return Skip(suite_id, why)
    if not apps:
        apps = [[APPS[a]] for a in related]
    task = {
        "id": f"osworld-{suite_id}",
        "instruction": str(obj["instruction"]),
        "os": {"apps": apps},
        "metadata": {
            "osworld_snapshot": obj.get("snapshot"),
            "osworld_related_apps": related,
            "osworld_evaluator": obj.get("evaluator"),
            "osworld_source": obj.get("source"),
        },
    }
    return with_provenance("os", SUITE, suite_id, str(path), task)


def read(path: str | Path, **_: Any) -> Iterator[Item]:
    for file in task_files(Path(path)):
        yield read_task(file)
