"""MCP and search collectors, measured in one run.

1. Tool calls per second through our MCP environment (`MCPEnvironment.step`: action parsing, schema
   check, the call with its timeout, rendering of the result) vs the bare SDK client (`stdio_client` +
   `ClientSession.call_tool` in one asyncio.run) on the same bundled server, tool and arguments: both
   sessions warmed up, then rounds alternating between them, median and range. Goal: overhead <= 10%.
2. Queries per second on the local BM25 index (tantivy), with the index's size, raw and through
   `web_search` (rendering and conditions included); bm25s on the same pages when it is installed.

Run: .venv/bin/python benchmarks/mcp_search_bench.py [--calls 300] [--rounds 7] [--queries 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue
import statistics
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from collectors.environment import EnvironmentOptions, Task, tool_call_action
from collectors.mcp import MCPEnvironment
from collectors.mcp_servers import BUNDLED
from collectors.search import SearchEnvironment
from collectors.search_index import DEFAULT_INDEX_DIR, LocalIndex, index_size_bytes

QUERIES = [
    "how to expand user home directory in a path",
    "asyncio event loop run until complete",
    "json dump indent pretty print",
    "subprocess timeout kill child process",
    "dataclass frozen field default factory",
    "regular expression named group",
    "sqlite3 connection commit context manager",
    "unicode normalization NFC",
    "thread pool executor map",
    "datetime timezone utc offset",
]
# (server, tool, arguments): servers that touch no files, so no sandbox start is part of the measure
MCP_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("everything", "echo", {"message": "ping"}),
    ("time", "get_current_time", {"timezone": "UTC"}),
]


WARMUP_CALLS = 200
CALL_TIMEOUT_S = 30.0  # both sides make the same call: the SDK's call_tool with this read timeout


class BareSDK:
    """The SDK alone on the same server: `stdio_client` + `ClientSession` in one `asyncio.run`, on a
    thread of its own so its session stays open across rounds; a round is `calls` awaits of
    `session.call_tool` in a row, as a plain async client makes them, with our call's read timeout."""

    def __init__(self, server: str, tool: str, arguments: dict[str, Any]) -> None:
        self.server, self.tool, self.arguments = server, tool, arguments
        self.rounds: queue.Queue[int | None] = queue.Queue()
        self.results: queue.Queue[tuple[float, float] | BaseException] = queue.Queue()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._serve()), name="bare-sdk")
        self.thread.start()
        ready = self.results.get()
        if isinstance(ready, BaseException):
            raise ready

    async def _serve(self) -> None:
        try:
            with tempfile.TemporaryDirectory() as ws, open("/dev/null", "w") as errlog:
                launch = BUNDLED[self.server].launch(Path(ws), {})
                params = StdioServerParameters(
                    command=launch.command, args=launch.args, env=launch.env or None, cwd=launch.cwd
                )
                async with (
                    stdio_client(params, errlog=errlog) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    await session.list_tools()
                    call = partial(
                        session.call_tool, self.tool, self.arguments, read_timeout_seconds=CALL_TIMEOUT_S
                    )
                    for _ in range(WARMUP_CALLS):
                        await call()
                    self.results.put((0.0, 0.0))
                    # Between rounds this loop blocks on the queue: the session is idle, nothing to serve.
                    while (calls := self.rounds.get()) is not None:
                        started, cpu = time.perf_counter(), time.process_time()
                        for _ in range(calls):
                            await call()
                        self.results.put(measured(calls, started, cpu))
        except BaseException as exc:
            self.results.put(exc)
            raise

    def round(self, calls: int) -> tuple[float, float]:
        self.rounds.put(calls)
        result = self.results.get()
        if isinstance(result, BaseException):
            raise result
        return result

    def close(self) -> None:
        self.rounds.put(None)
        self.thread.join()


class Ours:
    """`MCPEnvironment.step` on a reset environment: action parsing, the schema check, the call with its
    timeout, the rendering of the observation."""

    def __init__(self, server: str, tool: str, arguments: dict[str, Any]) -> None:
        self.env = MCPEnvironment(EnvironmentOptions())
        cfg = {"server": server, "timeout_s": CALL_TIMEOUT_S}
        self.env.reset(Task(id="bench", instruction="bench", config={"mcp": cfg}))
        self.action = tool_call_action(tool, arguments)
        for _ in range(WARMUP_CALLS):
            self.env.step(self.action)

    def round(self, calls: int) -> tuple[float, float]:
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            result = self.env.step(self.action)
        rate = measured(calls, started, cpu)
        assert not result.observation.is_error, result.observation.text
        return rate

    def close(self) -> None:
        self.env.close()


def measured(calls: int, started: float, cpu: float) -> tuple[float, float]:
    """(calls per second, this process's CPU microseconds per call) since `started` / `cpu`."""
    return calls / (time.perf_counter() - started), (time.process_time() - cpu) / calls * 1e6


def bench_mcp(calls: int, rounds: int) -> None:
    print("== MCP: the same bundled server and tool, bare SDK client vs our environment")
    print(
        f"   both sessions open and warmed up ({WARMUP_CALLS} calls), then {rounds} rounds of {calls} calls, "
        "alternating which side goes first;\n   median over rounds [min..max]; overhead = bare/ours - 1 "
        "per round; CPU = this process's CPU time per call"
    )
    print(
        f"{'server/tool':<24}{'bare calls/s':>22}{'ours calls/s':>22}{'overhead':>26}"
        f"{'bare CPU':>10}{'ours CPU':>10}{'added':>8}"
    )
    for server, tool, arguments in MCP_CASES:
        if not BUNDLED[server].is_installed():
            print(f"{server + '/' + tool:<24} skipped: not installed (bash infra/install-mcp-servers.sh)")
            continue
        bare, ours = BareSDK(server, tool, arguments), Ours(server, tool, arguments)
        try:
            bare_runs, our_runs = [], []
            for i in range(rounds):
                # ABBA order: a neighbour's load that drifts during a round pair hurts both sides alike.
                if i % 2 == 0:
                    bare_runs.append(bare.round(calls))
                    our_runs.append(ours.round(calls))
                else:
                    our_runs.append(ours.round(calls))
                    bare_runs.append(bare.round(calls))
        finally:
            ours.close()
            bare.close()
        bare_rates, our_rates = [r for r, _ in bare_runs], [r for r, _ in our_runs]
        overheads = [b / o - 1 for b, o in zip(bare_rates, our_rates, strict=True)]
        bare_cpu = statistics.median(c for _, c in bare_runs)
        our_cpu = statistics.median(c for _, c in our_runs)
        print(
            f"{server + '/' + tool:<24}{spread(bare_rates, '{:.0f}'):>22}{spread(our_rates, '{:.0f}'):>22}"
            f"{spread(overheads, '{:+.1%}'):>26}{bare_cpu:>8.0f}us{our_cpu:>8.0f}us{our_cpu - bare_cpu:>+6.0f}us"
        )


def spread(values: list[float], fmt: str) -> str:
    """The median of `values` and their range, as 'median [min-max]'."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{fmt.format(mid)} [{fmt.format(low)}..{fmt.format(high)}]"


def bench_search(queries: int) -> None:
    index = LocalIndex.open(DEFAULT_INDEX_DIR)
    meta = index.meta
    size = index_size_bytes(DEFAULT_INDEX_DIR)
    print(
        f"\n== Search: local index {DEFAULT_INDEX_DIR}\n   {meta['pages']} pages, {meta['sections']} sections, "
        f"{int(meta['characters']) / 1e6:.1f} M characters, {size / 1e6:.1f} MB on disk (page texts included)"
    )
    index.search(QUERIES[0], 10)
    started = time.perf_counter()
    for i in range(queries):
        index.search(QUERIES[i % len(QUERIES)], 10)
    raw = queries / (time.perf_counter() - started)
    env = SearchEnvironment(EnvironmentOptions())
    conditions = {"partial": 0.7, "hide_answer": "json", "page_size": 5}
    env.reset(Task(id="bench", instruction="bench", config={"search": {"conditions": conditions}}))
    started = time.perf_counter()
    for i in range(queries):
        env.step(tool_call_action("web_search", {"query": QUERIES[i % len(QUERIES)]}))
    through_env = queries / (time.perf_counter() - started)
    env.close()
    print(f"{'tantivy (ours): top 10 with snippets':<46}{raw:>9.0f} queries/s")
    print(
        f"{'web_search through SearchEnvironment':<46}{through_env:>9.0f} queries/s"
        f"  ({through_env / raw:.2f}x of raw; conditions on)"
    )
    engines_on_the_same_pages(queries)


def engines_on_the_same_pages(queries: int) -> None:
    """tantivy vs bm25s on identical documents (the corpus's pages), top 10, no snippets: the engine
    choice. bm25s is optional (pip install bm25s); tantivy indexes in memory here."""
    try:
        import bm25s
    except ImportError:
        print("bm25s: not installed (pip install bm25s to compare the engines on the same pages)")
        return
    import tantivy

    with (DEFAULT_INDEX_DIR / "pages.jsonl").open(encoding="utf-8") as fh:
        texts = [json.loads(line)["markdown"] for line in fh]
    print(f"\n== Engines on the same {len(texts)} pages, top 10 ids, no snippets (the choice of engine)")
    started = time.perf_counter()
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
    index = tantivy.Index(builder.build())
    writer = index.writer()
    for text in texts:
        writer.add_document(tantivy.Document(text=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    tantivy_build = time.perf_counter() - started
    searcher = index.searcher()
    started = time.perf_counter()
    for i in range(queries):
        searcher.search(index.parse_query_lenient(QUERIES[i % len(QUERIES)], ["text"])[0], 10)
    tantivy_rate = queries / (time.perf_counter() - started)
    started = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    bm25s_build = time.perf_counter() - started
    started = time.perf_counter()
    for i in range(queries):
        tokens = bm25s.tokenize([QUERIES[i % len(QUERIES)]], stopwords="en", show_progress=False)
        retriever.retrieve(tokens, k=10, show_progress=False)
    bm25s_rate = queries / (time.perf_counter() - started)
    print(f"{'tantivy':<10} build {tantivy_build:6.2f} s  {tantivy_rate:8.0f} queries/s")
    print(f"{'bm25s':<10} build {bm25s_build:6.2f} s  {bm25s_rate:8.0f} queries/s")
    print(
        f"tantivy vs bm25s: build {bm25s_build / tantivy_build:.1f}x faster, queries {tantivy_rate / bm25s_rate:.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="MCP tool calls per round and side")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument(
        "--rounds", type=int, default=7, help="alternating MCP rounds per side (median and range reported)"
    )
    args = parser.parse_args()
    bench_mcp(args.calls, args.rounds)
    bench_search(args.queries)


if __name__ == "__main__":
    main()
