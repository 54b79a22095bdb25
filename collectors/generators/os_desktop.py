"""OS desktop tasks: documents in gedit (a seeded file to extend, correct or save under another name,
a new document saved through the menu) and calculations in gnome-calculator. The seeded files are the
varied initial state; the calculator starts blank, so its tasks vary in the goal only."""

from __future__ import annotations

import random
from typing import Any

from collectors.generators import vocab


def _quote(text: str) -> str:
    return repr(text)


def _document(rng: random.Random) -> tuple[str, str, list[str]]:
    name = (
        f"{rng.choice(('notes', 'todo', 'draft', 'letter', 'minutes', 'plan'))}-{rng.choice(vocab.WORDS)}.txt"
    )
    lines = [vocab.sentence(rng, rng.randint(3, 9)) for _ in range(rng.randint(2, 12))]
    return name, "\n".join(lines) + "\n", lines


def _gedit_append(rng: random.Random) -> dict[str, Any]:
    name, text, _ = _document(rng)
    line = f"{rng.choice(('Call', 'Email', 'Ask', 'Thank'))} {vocab.full_name(rng)} about {rng.choice(vocab.PRODUCTS)}"
    at_top = rng.random() < 0.5
    plan = ["wait(0.3)", "hotkey('ctrl', 'home')" if at_top else "hotkey('ctrl', 'end')"]
    plan += (
        [f"typewrite({_quote(line)})", "press('enter')"]
        if at_top
        else ["press('enter')", f"typewrite({_quote(line)})"]
    )
    plan += ["hotkey('ctrl', 's')", "wait(0.5)", "done()"]
    return {
        "instruction": f"Add the line \u201c{line}\u201d at the {'top' if at_top else 'end'} of {name} in gedit and save it.",
        "files": {name: text},
        "os": {"apps": [["gedit", name]]},
        "actions": plan,
        "goal": {"kind": "gedit-append", "answer": line, "file": name},
    }


def _gedit_replace_line(rng: random.Random) -> dict[str, Any]:
    name, text, lines = _document(rng)
    index = rng.randrange(len(lines))
    new = vocab.sentence(rng, rng.randint(3, 7))
    plan = ["wait(0.3)", "hotkey('ctrl', 'home')"]
    plan += ["press('down')"] * index
    plan += ["hotkey('shift', 'end')", f"typewrite({_quote(new)})", "hotkey('ctrl', 's')", "wait(0.5)"]
    return {
        "instruction": f"In {name}, replace line {index + 1} (\u201c{lines[index]}\u201d) with \u201c{new}\u201d and save.",
        "files": {name: text},
        "os": {"apps": [["gedit", name]]},
        "actions": plan,
        "goal": {"kind": "gedit-replace", "answer": new, "line": index + 1, "file": name},
    }


def _gedit_save_as(rng: random.Random) -> dict[str, Any]:
    target = f"{vocab.slug(rng)}.txt"
    body = vocab.sentence(rng, rng.randint(4, 10))
    files: dict[str, str] = {}
    apps: list[Any] = ["gedit"]
    if rng.random() < 0.5:  # start from an existing document and save a copy
        name, text, _ = _document(rng)
        files[name] = text
        apps = [["gedit", name]]
    return {
        "instruction": f"Write \u201c{body}\u201d in a gedit document and save it as {target} through the menu.",
        "files": files,
        "os": {"apps": apps},
        "actions": [
            "wait(0.3)",
            "hotkey('ctrl', 'end')",
            f"typewrite({_quote(body)})",
            _menu("Menu"),
            {"action": "click", "role": "push button", "name": "Save As…"},
            "hotkey('ctrl', 'a')",
            f"typewrite({_quote(target)})",
            "press('enter')",
            "wait(0.5)",
        ],
        "goal": {"kind": "gedit-save-as", "answer": target},
    }


def _menu(name: str) -> dict[str, Any]:
    return {"action": "click", "role": "toggle button", "name": name}


def _calculator(rng: random.Random) -> dict[str, Any]:
    ops = rng.randint(1, 3)
    expression = str(rng.randint(1, 999))
    for _ in range(ops):
        expression += rng.choice(("+", "-", "*", "/")) + str(rng.randint(1, 99))
    value = eval(expression, {"__builtins__": {}})
    return {
        "instruction": f"Compute {expression} in the calculator.",
        "os": {"apps": ["gnome-calculator"]},
        "actions": ["wait(0.3)", f"typewrite({_quote(expression)})", "press('enter')", "wait(0.3)"],
        "goal": {"kind": "calculate", "answer": f"{value:.6g}"},
    }


FAMILIES = {
    "gedit-append": _gedit_append,
    "gedit-replace-line": _gedit_replace_line,
    "gedit-save-as": _gedit_save_as,
    "calculator": _calculator,
}
