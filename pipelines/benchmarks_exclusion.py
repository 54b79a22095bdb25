"""Source-level decontamination: drop every trajectory that comes from a held-out benchmark.

AgentWorldBench (Qwen-AgentWorld, `assets/bench_overview.png` "Source benchmarks") draws its queries
from nine agent benchmarks; by default `pools build` keeps no trajectory of any of them, whatever
its text, because a training trajectory recorded on a benchmark's task is that task's answer even
when no evaluation turn overlaps it word for word.

A trajectory is from benchmark B when B's name appears

- in its provenance: the record id, `source.name`, `source.uri`, `source.group`, and the string
  values of metadata keys that name an origin (benchmark, dataset, source, task id, suite, ...).
  These are identifiers, so matching ignores case and every separator: "Terminal Bench",
  "terminal_bench@2.0", "terminal-bench/hello-world", "TerminalBench2" and "tbench" all name
  Terminal-Bench; the name must cover whole tokens ("visualwebarena" is not WebArena);
- or in its task text, written as one word ("Terminal-Bench", "OSWorld-Verified", "tbench@2.0"):
  a task that says "open a terminal", "the os module" or "Android world clock" is not matched.

A versioned mention ("terminal-bench@2.0", "terminal-bench-core 0.1.1") counts for that version;
an unversioned one ("terminal-bench") for the newest version on the exclusion list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from schemas.trajectory import Trajectory


@dataclass(frozen=True, slots=True)
class Benchmark:
    """One held-out benchmark: its canonical name and how its name is spelled in the wild."""

    name: str
    title: str
    aliases: tuple[str, ...]  # compact spellings (lowercase letters and digits, no separators)
    family: str = ""  # versions of one benchmark share a family; unversioned mentions use it
    version: int = 0


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("mcpmark", "MCPMark", ("mcpmark",)),
    Benchmark("toolathlon", "Tool Decathlon (Toolathlon)", ("toolathlon", "tooldecathlon")),
    Benchmark("widesearch", "WideSearch", ("widesearch",)),
    Benchmark(
        "terminal-bench-1.0",
        "Terminal-Bench 1.0",
        ("terminalbench10", "terminalbench1", "terminalbenchcore", "tbench10", "tbench1", "tbenchcore"),
        family="terminalbench",
        version=1,
    ),
    Benchmark(
        "terminal-bench-2.0",
        "Terminal-Bench 2.0",
        ("terminalbench20", "terminalbench2", "tbench20", "tbench2"),
        family="terminalbench",
        version=2,
    ),
    Benchmark("inhouse-swe-bench", "In-house SWE Bench", ("inhouseswebench", "agentworldswebench")),
    # WebArena-Verified and OSWorld-Verified re-release the WebArena / OSWorld task sets: a
    # trajectory on the original tasks is on the verified ones too.
    Benchmark("webarena-verified", "WebArena-Verified", ("webarenaverified", "webarena")),
    Benchmark("androidworld", "AndroidWorld", ("androidworld",)),
    Benchmark("osworld-verified", "OSWorld-Verified", ("osworldverified", "osworld")),
)
"""The evaluator's nine source benchmarks (AgentWorldBench composition, Qwen-AgentWorld README)."""

FAMILIES = {"terminalbench": ("terminalbench", "tbench")}
"""Unversioned spellings of a benchmark with several versions on the list."""

DEFAULT_EXCLUDED = tuple(b.name for b in BENCHMARKS)

BY_NAME = {b.name: b for b in BENCHMARKS}

ORIGIN_KEYS = ("benchmark", "dataset", "source", "suite", "origin", "collection", "split", "harness")
"""Metadata keys naming where a record is from: any key containing one of these (case and separators
ignored), `env` / `environment`, and task keys naming an identifier (task_id, taskName, task_source,
task_set, task_prefix; not task_description, whose value is prose)."""

_TASK_ID_ENDS = ("id", "name", "source", "set", "prefix", "suite")
MAX_IDENTIFIER = 200
"""Longer provenance values are prose (a description, a log line): matched as task text is."""

_TOKEN = re.compile(r"[a-z0-9]+")
_WORD = re.compile(r"[^\s()\[\]{}<>\"'`,;!?]+")
_MAX_RUN = 5  # tokens one spelling can span ("terminal bench core 0 1")


class UnknownBenchmark(ValueError):
    """A benchmark name that is not on the list; the message lists the known names."""


def compact(text: str) -> str:
    """Lowercase letters and digits only: the separator-free form names are compared in."""
    return "".join(_TOKEN.findall(text.lower()))


def resolve(name: str) -> list[str]:
    """The canonical names a benchmark given in any spelling stands for ("Terminal Bench 2.0" ->
    terminal-bench-2.0; "Terminal-Bench", unversioned, -> both versions)."""
    key = compact(name)
    for b in BENCHMARKS:
        if key == compact(b.name) or key == compact(b.title) or key in b.aliases:
            return [b.name]
    for family, spellings in FAMILIES.items():
        if key in spellings:
            return [b.name for b in BENCHMARKS if b.family == family]
    raise UnknownBenchmark(f"unknown benchmark {name!r}; known: {', '.join(DEFAULT_EXCLUDED)}")


def canonical_list(names: Iterable[str]) -> list[str]:
    """`names` resolved to canonical names, each once, in the list's order."""
    wanted = {c for n in names for c in resolve(n)}
    return [n for n in DEFAULT_EXCLUDED if n in wanted]


class ExclusionMatcher:
    """Which excluded benchmark (if any) a trajectory comes from, with the evidence."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = canonical_list(names)
        # compact spelling -> benchmark name; "" for a version of a family that is not excluded
        # (so "terminal-bench@2.0" is not taken for an excluded 1.0 by its unversioned prefix)
        self.spellings: dict[str, str] = {}
        for b in BENCHMARKS:
            if b.name in self.names or b.family:
                for alias in b.aliases:
                    self.spellings[alias] = b.name if b.name in self.names else ""
        for family, spellings in FAMILIES.items():
            members = [BY_NAME[n] for n in self.names if BY_NAME[n].family == family]
            if members:
                newest = max(members, key=lambda b: b.version).name
                for s in spellings:
                    self.spellings.setdefault(s, newest)

    def __bool__(self) -> bool:
        return bool(self.names)

    def _run_match(self, tokens: list[str]) -> str | None:
        """The benchmark whose spelling equals a run of whole tokens; the longest run wins."""
        for i in range(len(tokens)):
            best: str | None = None
            joined = ""
            for tok in tokens[i : i + _MAX_RUN]:
                joined += tok
                hit = self.spellings.get(joined)
                if hit is not None:
                    best = hit
            if best:
                return best
        return None

    def match_identifier(self, text: str) -> str | None:
        """A provenance string (name, URI, id, metadata value): case and separators ignored."""
        return self._run_match(_TOKEN.findall(text.lower())) if text else None

    def match_text(self, text: str) -> str | None:
        """Free text (the task): only a name written as one word counts."""
        for word in _WORD.findall(text.lower()):
            hit = self._run_match(_TOKEN.findall(word))
            if hit:
                return hit
        return None

    def match(self, traj: Trajectory) -> tuple[str, str] | None:
        """(benchmark name, where it was found) for a trajectory from an excluded benchmark."""
        if not self.names:
            return None
        for where, value in provenance_fields(traj):
            long = len(value) > MAX_IDENTIFIER
            hit = self.match_text(value) if long else self.match_identifier(value)
            if hit:
                return hit, f"{where} {value[:120]!r}"
        hit = self.match_text(traj.task or "")
        if hit:
            return hit, "task text"
        return None


def is_origin_key(key: str) -> bool:
    """Whether a metadata key names where the record is from (ORIGIN_KEYS)."""
    k = compact(key)
    if any(word in k for word in ORIGIN_KEYS) or k in ("env", "environment"):
        return True
    return k.startswith("task") and k.endswith(_TASK_ID_ENDS)


def _origin_values(meta: Any, prefix: str, depth: int = 0) -> Iterator[tuple[str, str]]:
    if not isinstance(meta, dict) or depth > 2:
        return
    for key, value in meta.items():
        where = f"{prefix}.{key}"
        origin = is_origin_key(str(key))
        if isinstance(value, dict):
            yield from _origin_values(value, where, depth + 1)
        elif origin and isinstance(value, str):
            yield where, value
        elif origin and isinstance(value, list):
            yield from ((where, v) for v in value if isinstance(v, str))


def provenance_fields(traj: Trajectory) -> Iterator[tuple[str, str]]:
    """(field, value) of every provenance string of a trajectory."""
    yield "id", traj.id
    src = traj.source
    for where, value in (("source.name", src.name), ("source.uri", src.uri), ("source.group", src.group)):
        if value:
            yield where, value
    yield from _origin_values(traj.metadata, "metadata")
