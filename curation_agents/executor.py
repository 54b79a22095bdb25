"""A direct executor for the compiled cleaner graph: walks the same nodes, edges and conditional edges as
LangGraph's Pregel loop, without its per-step task, channel and callback machinery.

Pregel costs a few milliseconds per record (seven supersteps of task preparation, writes and callback
managers), which is more than the deterministic stages themselves cost on most records. The
StateGraph stays the single definition of the flow: this executor reads the compiled graph's
structure and refuses any graph that uses something it does not reproduce exactly (reducers, parallel
fan-out, `Send`, retry or cache policies, nodes that take a config), so it cannot drift from it.
Checkpointed runs keep using LangGraph itself, because resuming is what Pregel's checkpoints are for.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from langgraph.channels.last_value import LastValue
from langgraph.graph import END, START

StateUpdate = dict[str, Any]


class UnsupportedGraph(ValueError):
    """The compiled graph uses a feature the direct executor does not reproduce; use graph.invoke."""


def _plain_function(runnable: Any, where: str) -> Callable[..., Any]:
    """The Python function a LangGraph RunnableCallable wraps, when it takes the state alone."""
    func = getattr(runnable, "func", None)
    if not callable(func) or getattr(runnable, "func_accepts", None):
        raise UnsupportedGraph(f"{where}: only plain state -> update functions run directly")
    return func  # type: ignore[no-any-return]


def _edge_to(target: str) -> Callable[[dict[str, Any]], str]:
    def route(_state: dict[str, Any]) -> str:
        return target

    return route


class DirectGraphExecutor:
    """Runs one state through a compiled StateGraph whose channels are all last-value channels and whose
    every node has exactly one way out (a plain edge or one conditional edge).

    Semantics reproduced from Pregel for such graphs: a node sees the channels that hold a value; its
    returned dict overwrites those channels; a conditional edge reads the state after the node's
    writes; the run ends at END and returns every channel that holds a value.
    """

    def __init__(self, compiled: Any) -> None:
        builder = getattr(compiled, "builder", None)
        if builder is None:
            raise UnsupportedGraph("not a compiled StateGraph")
        if getattr(compiled, "interrupt_before_nodes", None) or getattr(
            compiled, "interrupt_after_nodes", None
        ):
            raise UnsupportedGraph("interrupts pause a run between steps; only Pregel can resume one")
        self.channels: frozenset[str] = frozenset(builder.channels)
        for name, channel in builder.channels.items():
            if type(channel) is not LastValue:
                raise UnsupportedGraph(f"state key {name!r} has a reducer ({type(channel).__name__})")
        if getattr(builder, "waiting_edges", None):
            raise UnsupportedGraph("edges that wait for several nodes are not supported")
        self.nodes: dict[str, Callable[[dict[str, Any]], StateUpdate | None]] = {}
        for name, spec in builder.nodes.items():
            if spec.retry_policy or spec.cache_policy or spec.defer or spec.ends:
                raise UnsupportedGraph(f"node {name!r}: retry, cache, defer and Command routing need Pregel")
            self.nodes[name] = _plain_function(spec.runnable, f"node {name!r}")
        outgoing: dict[str, list[str]] = {}
        for start, end in builder.edges:
            outgoing.setdefault(start, []).append(end)
        self.routes: dict[str, Callable[[dict[str, Any]], str]] = {}
        for start in {*outgoing, *builder.branches}:
            edges = outgoing.get(start, [])
            branches = list(builder.branches.get(start, {}).values())
            if len(edges) + len(branches) != 1:
                raise UnsupportedGraph(
                    f"{start!r} fans out to several nodes; only linear routing runs directly"
                )
            if edges:
                self.routes[start] = _edge_to(edges[0])
            else:
                self.routes[start] = self._branch_route(start, branches[0])
        if START not in self.routes:
            raise UnsupportedGraph("the graph has no entry edge")

    def _branch_route(self, start: str, branch: Any) -> Callable[[dict[str, Any]], str]:
        path = _plain_function(branch.path, f"conditional edge after {start!r}")
        ends: dict[Hashable, str] | None = branch.ends

        def route(state: dict[str, Any]) -> str:
            choice = path(dict(state))
            if not isinstance(choice, str):
                raise UnsupportedGraph(f"conditional edge after {start!r} returned {choice!r}, not one node")
            return ends[choice] if ends else choice

        return route

    def invoke(self, state: dict[str, Any]) -> dict[str, Any]:
        """The final state of one run, as `compiled.invoke(state)` returns it."""
        values = {k: v for k, v in state.items() if k in self.channels}
        node = self.routes[START](values)
        while node != END:
            update = self.nodes[node](dict(values))
            if update:
                unknown = update.keys() - self.channels
                if unknown:
                    raise UnsupportedGraph(f"node {node!r} wrote keys outside the state: {sorted(unknown)}")
                values.update(update)
            route = self.routes.get(node)
            node = route(values) if route is not None else END  # a node without edges ends the run
        return values
