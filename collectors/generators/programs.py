"""Small Python functions with planted bugs, for the terminal and swe generators.

Each `Template` is a correct function, one or more mutations that break it (the planted bug), and a
way to draw test inputs. The generator runs the correct source here to compute the expected values,
so the tests a task ships pass on the fixed code and fail on the planted bug."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collectors.generators import vocab


@dataclass(frozen=True)
class Template:
    name: str
    source: str  # the correct function
    mutations: tuple[tuple[str, str], ...]  # (correct text, buggy text) pairs; one is planted
    inputs: Callable[[random.Random], list[tuple[Any, ...]]]  # argument tuples for the tests
    doc: str  # what the function should do, for instructions


def _ints(rng: random.Random, k: int, lo: int = -20, hi: int = 60) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(k)]


TEMPLATES: tuple[Template, ...] = (
    Template(
        "clamp",
        "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n",
        (("max(lo, min(x, hi))", "min(lo, max(x, hi))"), ("max(lo, min(x, hi))", "max(lo, min(x, lo))")),
        lambda r: [(r.randint(-50, 50), -10, 10) for _ in range(4)] + [(99, 0, 5), (-99, 0, 5)],
        "clamp x into the closed range [lo, hi]",
    ),
    Template(
        "mean",
        "def mean(values):\n    return sum(values) / len(values)\n",
        (
            ("sum(values) / len(values)", "sum(values) / (len(values) - 1)"),
            ("sum(values)", "sum(values[1:])"),
        ),
        lambda r: [(_ints(r, r.randint(2, 6)),) for _ in range(3)],
        "return the arithmetic mean of a non-empty list",
    ),
    Template(
        "count_words",
        "def count_words(text):\n    return len(text.split())\n",
        (("text.split()", "text.split(' ')"),),
        lambda r: [(f"  {vocab.sentence(r, r.randint(2, 6))}  {r.choice(vocab.WORDS)} ",) for _ in range(3)],
        "count the whitespace-separated words of a string",
    ),
    Template(
        "last_n",
        "def last_n(items, n):\n    if n <= 0:\n        return []\n    return items[-n:]\n",
        (("items[-n:]", "items[-n - 1:]"), ("if n <= 0:", "if n < 0:")),
        lambda r: [(_ints(r, 6), r.randint(1, 5)) for _ in range(3)] + [([1, 2, 3], 0)],
        "return the last n items of a list ([] for n <= 0)",
    ),
    Template(
        "is_leap",
        "def is_leap(year):\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n",
        (("(year % 100 != 0 or year % 400 == 0)", "year % 100 != 0"), ("year % 4 == 0", "year % 4 == 1")),
        lambda r: [(y,) for y in (2000, 1900, r.choice((1996, 2004, 2024)), r.choice((2023, 2019, 2101)))],
        "say whether a year is a Gregorian leap year",
    ),
    Template(
        "median",
        "def median(values):\n    ordered = sorted(values)\n    mid = len(ordered) // 2\n"
        "    if len(ordered) % 2:\n        return ordered[mid]\n    return (ordered[mid - 1] + ordered[mid]) / 2\n",
        (
            ("ordered = sorted(values)", "ordered = list(values)"),
            ("ordered[mid - 1] + ordered[mid]", "ordered[mid] + ordered[mid]"),
        ),
        lambda r: [(_ints(r, r.randint(3, 7)),) for _ in range(3)] + [([9, 1, 5, 3],)],
        "return the median of a non-empty list",
    ),
    Template(
        "dedupe",
        "def dedupe(items):\n    seen = set()\n    out = []\n    for item in items:\n"
        "        if item not in seen:\n            seen.add(item)\n            out.append(item)\n    return out\n",
        (("if item not in seen:", "if item in seen:"), ("            seen.add(item)\n", "")),
        lambda r: [([r.choice(vocab.WORDS[:8]) for _ in range(7)],) for _ in range(3)],
        "drop repeated items, keeping the first occurrence of each in order",
    ),
    Template(
        "range_sum",
        "def range_sum(a, b):\n    return sum(range(a, b + 1))\n",
        (("range(a, b + 1)", "range(a, b)"), ("range(a, b + 1)", "range(a + 1, b + 1)")),
        lambda r: [(a, a + r.randint(1, 30)) for a in _ints(r, 3, 0, 40)],
        "sum the integers from a to b inclusive",
    ),
    Template(
        "to_fahrenheit",
        "def to_fahrenheit(celsius):\n    return celsius * 9 / 5 + 32\n",
        (("celsius * 9 / 5 + 32", "celsius * 5 / 9 + 32"), ("+ 32", "- 32")),
        lambda r: [(c,) for c in (0, 100, r.randint(-40, 40), r.randint(1, 35))],
        "convert degrees Celsius to Fahrenheit",
    ),
    Template(
        "factorial",
        "def factorial(n):\n    result = 1\n    for k in range(2, n + 1):\n        result *= k\n    return result\n",
        (("range(2, n + 1)", "range(2, n)"), ("result = 1", "result = 0")),
        lambda r: [(n,) for n in (0, 1, r.randint(3, 6), r.randint(7, 10))],
        "return n! for n >= 0",
    ),
    Template(
        "chunk",
        "def chunk(items, size):\n    return [items[i:i + size] for i in range(0, len(items), size)]\n",
        (
            ("range(0, len(items), size)", "range(0, len(items) - 1, size)"),
            ("items[i:i + size]", "items[i:i + size - 1]"),
        ),
        lambda r: [(_ints(r, r.randint(4, 9)), r.randint(2, 4)) for _ in range(3)],
        "split a list into consecutive chunks of `size` items (the last may be shorter)",
    ),
    Template(
        "safe_div",
        "def safe_div(a, b, default=0):\n    if b == 0:\n        return default\n    return a / b\n",
        (("if b == 0:", "if a == 0:"), ("return a / b", "return a // b")),
        lambda r: [(r.randint(1, 90), r.randint(2, 9)) for _ in range(3)] + [(5, 0), (7, 0, -1)],
        "divide a by b, returning `default` when b is 0",
    ),
    Template(
        "initials",
        "def initials(name):\n    return ''.join(part[0].upper() for part in name.split())\n",
        (("part[0].upper()", "part[0]"), ("name.split()", "name.split('-')")),
        lambda r: [(f"{vocab.full_name(r).lower()}",) for _ in range(3)],
        "return the upper-case initials of a name",
    ),
)


def expected(template: Template, args: tuple[Any, ...]) -> Any:
    """What the correct function returns for `args` (our own constant source, run here)."""
    namespace: dict[str, Any] = {}
    exec(template.source, namespace)
    return namespace[template.name](*args)


def _run(source: str, name: str, args: tuple[Any, ...]) -> Any:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    try:
        return namespace[name](*args)
    except Exception as exc:  # a planted bug may raise: that fails the test as well
        return f"raised {type(exc).__name__}"


def buggy_source(template: Template, mutation: int) -> str:
    good, bad = template.mutations[mutation]
    assert good in template.source, (template.name, good)
    return template.source.replace(good, bad, 1)


def unittest_module(module: str, chosen: list[tuple[Template, list[tuple[Any, ...]]]]) -> str:
    """A unittest file with one test method per function, asserting the correct outputs."""
    names = ", ".join(t.name for t, _ in chosen)
    lines = [
        "import unittest",
        "",
        f"from {module} import {names}",
        "",
        "",
        "class GeneratedTest(unittest.TestCase):",
    ]
    for template, cases in chosen:
        lines.append(f"    def test_{template.name}(self):")
        for args in cases:
            call = f"{template.name}({', '.join(repr(a) for a in args)})"
            value = expected(template, args)
            if isinstance(value, float):
                lines.append(f"        self.assertAlmostEqual({call}, {value!r})")
            else:
                lines.append(f"        self.assertEqual({call}, {value!r})")
        lines.append("")
    lines += ["", 'if __name__ == "__main__":', "    unittest.main()", ""]
    return "\n".join(lines)


def planted_program(rng: random.Random, module: str) -> dict[str, Any]:
    """A module of 3-5 functions, one with a planted bug, and its tests: files, the bug, the fix."""
    chosen = rng.sample(TEMPLATES, rng.randint(3, 5))
    buggy_index = rng.randrange(len(chosen))
    buggy = chosen[buggy_index]
    mutation = rng.randrange(len(buggy.mutations))
    sources = [buggy_source(t, mutation) if t is buggy else t.source for t in chosen]
    broken = buggy_source(buggy, mutation)
    cases = [(t, t.inputs(rng)) for t in chosen]
    for _ in range(16):  # the tests must catch the planted bug
        if any(_run(broken, buggy.name, a) != expected(buggy, a) for a in cases[buggy_index][1]):
            break
        cases[buggy_index] = (buggy, buggy.inputs(rng))
    return {
        "source": "\n\n".join(sources),
        "tests": unittest_module(module, cases),
        "buggy": buggy.name,
        "doc": buggy.doc,
        "buggy_function": broken,
        "fixed_function": buggy.source,
        "functions": [t.name for t in chosen],
    }
