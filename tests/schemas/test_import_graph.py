"""The import graph of our packages: no cycles between modules, and the layer rules of STYLE.md.

The graph is built statically with `ast` from every `.py` file of the packages below. Every import
statement counts wherever it sits: at module level, inside functions and methods (lazy imports), and
under `if TYPE_CHECKING:`, since a lazy import still ties the two modules together. An edge goes to
the module imported (`from pkg import sub` to `pkg.sub` when that is a module, else to `pkg`);
importing a submodule does not add an edge to its parent package's `__init__`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schemas", "collectors", "curation_agents", "prompt_autoresearch", "pipelines", "worldline")

ALLOWED_CYCLE_EDGES: set[tuple[str, str]] = set()
"""Edges left out of the cycle check, each a deliberate lazy import inside one package."""


def _modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _ours(name: str) -> str | None:
    """The module of ours that `name` (a module, or a name inside one) resolves to; None if not ours."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """(module of ours imported, line) for every import statement in the file."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _ours(alias.name)
                if target:
                    yield target, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                target = _ours(f"{source}.{alias.name}")
                if target is None or target == module:
                    target = _ours(source)
                if target:
                    yield target, node.lineno


def _graph() -> dict[str, dict[str, int]]:
    """module -> {imported module -> first line importing it}."""
    graph: dict[str, dict[str, int]] = {}
    for module, path in MODULES.items():
        edges: dict[str, int] = {}
        for target, line in _imported(module, path):
            if target != module:
                edges.setdefault(target, line)
        graph[module] = edges
    return graph


GRAPH = _graph()


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path that returns to its start) per strongly connected component (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(graph, set(c)) for c in components]


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module, found breadth first."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & component):
            if w == start:
                return [*paths[v], start]
            if w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    raise AssertionError(f"no cycle through {start}")


def _package(module: str) -> str:
    return module.split(".")[0]


def _crossings(importer: str, imported: str) -> list[str]:
    """`importer -> imported (file:line)` for every edge from package `importer` to package `imported`."""
    return [
        f"{m} -> {t} ({MODULES[m].relative_to(ROOT)}:{line})"
        for m, edges in sorted(GRAPH.items())
        for t, line in sorted(edges.items())
        if _package(m) == importer and _package(t) == imported
    ]


def test_the_graph_sees_every_package_and_lazy_imports() -> None:
    assert {_package(m) for m in MODULES} == set(PACKAGES)
    # A function-level import is an edge: pipelines.verify runs the Beam job only when asked.
    assert "pipelines.verify_beam" in GRAPH["pipelines.verify"]


def test_no_import_cycles() -> None:
    graph = {m: {t for t in edges if (m, t) not in ALLOWED_CYCLE_EDGES} for m, edges in GRAPH.items()}
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(
        " -> ".join(f"{a} (line {GRAPH[a][b]})" for a, b in zip(c, c[1:], strict=False)) + f" -> {c[-1]}"
        for c in cycles
    )


def test_allowed_cycle_edges_still_exist() -> None:
    """An allow-list entry whose import is gone must be removed, so the list cannot hide a new cycle."""
    stale = sorted((m, t) for m, t in ALLOWED_CYCLE_EDGES if t not in GRAPH.get(m, {}))
    assert not stale, f"allow-listed imports that no longer exist: {stale}"


def test_schemas_import_nothing_of_ours() -> None:
    outside = [c for p in PACKAGES if p != "schemas" for c in _crossings("schemas", p)]
    assert not outside, "schemas/ is the centre and imports nothing of ours:\n" + "\n".join(outside)


def test_collectors_and_curation_never_import_each_other() -> None:
    crossing = _crossings("collectors", "curation_agents") + _crossings("curation_agents", "collectors")
    assert not crossing, "collectors/ and curation_agents/ never import each other:\n" + "\n".join(crossing)


def test_pipelines_never_import_collectors() -> None:
    crossing = _crossings("pipelines", "collectors")
    assert not crossing, "pipelines/ never imports collectors/:\n" + "\n".join(crossing)


def test_pipelines_and_autoresearch_never_import_each_other() -> None:
    """Both read the template set from schemas.templates, so neither depends on the other."""
    crossing = _crossings("pipelines", "prompt_autoresearch") + _crossings("prompt_autoresearch", "pipelines")
    assert not crossing, "pipelines/ and prompt_autoresearch/ never import each other:\n" + "\n".join(
        crossing
    )
