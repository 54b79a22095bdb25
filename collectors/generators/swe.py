"""SWE tasks: a small Python package in a git repository with a planted bug and failing tests, a
missing function that its tests already call, or a behaviour change the tests pin. The plan in
`actions` uses the domain's tools (Bash, Read, Edit) the way a careful agent would."""

from __future__ import annotations

import random
from typing import Any

from collectors.generators import programs, vocab

# `-B`: no bytecode cache. An edit that keeps a file's size within the second of the previous test run
# (a one-character fix such as `-` to `+`) would otherwise leave a stale .pyc that Python still trusts.
TEST_CMD = "python3 -B -m unittest -q 2>&1 | tail -n 15"
CHECK_CMD = "python3 -B -m unittest -q 2>&1 | tail -n 1"


def _package(rng: random.Random) -> tuple[str, str, dict[str, str]]:
    package = vocab.ident(rng, 1)
    module = rng.choice(("core", "util", "ops", "helpers", "lib"))
    files = {
        "README.md": f"# {package}\n\n{vocab.sentence(rng, 10)}\n\nRun the tests: `python3 -m unittest`.\n",
        f"{package}/__init__.py": "",
        "tests/__init__.py": "",
    }
    if rng.random() < 0.5:
        files["setup.cfg"] = (
            f"[metadata]\nname = {package}\nversion = 0.{rng.randint(1, 9)}.{rng.randint(0, 20)}\n"
        )
    return package, module, files


def _bug_fix(rng: random.Random) -> dict[str, Any]:
    package, module, files = _package(rng)
    program = programs.planted_program(rng, f"{package}.{module}")
    path = f"{package}/{module}.py"
    files[path] = program["source"]
    files[f"tests/test_{module}.py"] = program["tests"]
    return {
        "instruction": f"The tests of {package} fail. Find the bug in {path} and fix it; the test suite must pass.",
        "repo": {"files": files, "commit_message": f"{package}: {', '.join(program['functions'])}"},
        "actions": [
            {"name": "Bash", "arguments": {"command": TEST_CMD}},
            {"name": "Read", "arguments": {"path": path}},
            {
                "name": "Edit",
                "arguments": {
                    "path": path,
                    "old_string": program["buggy_function"],
                    "new_string": program["fixed_function"],
                },
            },
            {"name": "Bash", "arguments": {"command": CHECK_CMD}},
            {"name": "Bash", "arguments": {"command": "git diff --stat"}},
        ],
        "goal": {"answer": program["buggy"], "kind": "planted-bug", "functions": program["functions"]},
    }


def _missing_function(rng: random.Random) -> dict[str, Any]:
    package, module, files = _package(rng)
    chosen = rng.sample(programs.TEMPLATES, rng.randint(2, 4))
    missing = chosen[-1]
    path = f"{package}/{module}.py"
    files[path] = "\n\n".join(t.source for t in chosen[:-1])
    files[f"tests/test_{module}.py"] = programs.unittest_module(
        f"{package}.{module}", [(t, t.inputs(rng)) for t in chosen]
    )
    return {
        "instruction": f"The tests call {package}.{module}.{missing.name}, which does not exist yet. Implement it ({missing.doc}).",
        "repo": {"files": files, "commit_message": f"{package}: tests for {missing.name}"},
        "actions": [
            {"name": "Bash", "arguments": {"command": TEST_CMD}},
            {"name": "Read", "arguments": {"path": f"tests/test_{module}.py"}},
            {"name": "Bash", "arguments": {"command": f"cat >> {path} <<'PY'\n\n\n{missing.source}PY"}},
            {"name": "Bash", "arguments": {"command": CHECK_CMD}},
        ],
        "goal": {"answer": missing.name, "kind": "missing-function"},
    }


def _changed_constant(rng: random.Random) -> dict[str, Any]:
    package, module, files = _package(rng)
    name = vocab.ident(rng).upper()
    old, new = rng.sample(range(2, 500), 2)
    path = f"{package}/settings.py"
    files[path] = f'"""Settings of {package}."""\n\n{name} = {old}\nTIMEOUT_S = {rng.randint(1, 60)}\n'
    files[f"{package}/{module}.py"] = (
        f"from {package}.settings import {name}\n\n\ndef limit():\n    return {name} * 2\n"
    )
    files[f"tests/test_{module}.py"] = (
        f"import unittest\n\nfrom {package}.{module} import limit\n\n\nclass LimitTest(unittest.TestCase):\n"
        f'    def test_limit(self):\n        self.assertEqual(limit(), {new * 2})\n\n\nif __name__ == "__main__":\n    unittest.main()\n'
    )
    return {
        "instruction": f"The product decision is that {name} is now {new}. Update the code so the tests pass, and nothing else.",
        "repo": {"files": files, "commit_message": f"{package}: settings"},
        "actions": [
            {"name": "Bash", "arguments": {"command": f"grep -rn {name} ."}},
            {
                "name": "Edit",
                "arguments": {"path": path, "old_string": f"{name} = {old}", "new_string": f"{name} = {new}"},
            },
            {"name": "Bash", "arguments": {"command": CHECK_CMD}},
        ],
        "goal": {"answer": f"{name} = {new}", "kind": "changed-constant"},
    }


FAMILIES = {"bug-fix": _bug_fix, "missing-function": _missing_function, "changed-constant": _changed_constant}
