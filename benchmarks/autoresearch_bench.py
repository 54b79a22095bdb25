"""autoresearch against a latency-injected fake endpoint: wall time vs the concurrency bound, and the
cost estimate printed before a run vs the calls and tokens it really took.

The fake server (tests/helpers/fakellm.py) plays optimizer, world model and judge with a fixed latency per call
(tests/helpers/autoresearch_world.py). For each concurrency bound C the same experiment runs in a fresh RUNDIR:

- ideal wall time = max(calls x latency / C, critical path), where the critical path is the longest
  chain of dependent calls of one run (seed: world model -> judge; per iteration: optimizer -> world
  model -> judge; recheck: world model -> judge);
- ours = the measured wall time of `Autoresearch.run()`; the goal is ours / ideal <= 1.2;
- the overhead floor = the same experiment with no latency at all: what the calls cost this machine
  (our process, the fake server, the OS scheduler). On a loaded machine it can exceed the ideal at
  high concurrency; ours / max(ideal, floor) shows how close the loop gets to what the machine allows;
- the dependency bound ("dag") = the loop's call structure replayed as sleeps under the same bounds:
  the best any scheduler of these dependent calls can do; ours / dag is the loop's own overhead;
- the estimate (calls, tokens) printed by `autoresearch run` before starting vs the actual count; the
  goal for calls is within 10%.

    .venv/bin/python benchmarks/autoresearch_bench.py --latency 0.2 --runs 12 --iterations 2 --eval-size 4
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prompt_autoresearch.clients import RoleEndpoint, build_clients
from prompt_autoresearch.engine import CACHE_FILE, Autoresearch
from prompt_autoresearch.state import AutoresearchConfig
from tests.helpers.autoresearch_world import JUDGE, OPTIMIZER, WORLD_MODEL, FakeWorld, write_data
from tests.helpers.fakellm import FakeLLMServer, FakeReply
from worldline.llm import LLMConfig, Role


class _Slow:
    """The scripted world, answering after `latency` seconds."""

    def __init__(self, latency: float) -> None:
        self.world, self.latency = FakeWorld(), latency

    def __call__(self, request: dict) -> FakeReply:  # type: ignore[type-arg]
        return FakeReply(text=self.world(request).text, delay_s=self.latency)


def _serve(latency: float, port: Connection) -> None:
    """The fake endpoint in its own process, so its work does not share our interpreter's lock."""
    with FakeLLMServer() as server:
        server.set_default(_Slow(latency))
        port.send(server.base_url)
        port.recv()  # stop
        port.send(server.max_concurrency)


def dependency_bound(args: argparse.Namespace, latency: float, concurrency: int) -> float:
    """Wall time of the loop's dependency structure alone: the same calls, in the same order and
    groupings (seed: two scorings; per iteration: optimizer, then world model -> judge per turn;
    recheck: two scorings), as sleeps of `latency` under the same bounds, with no other work."""

    async def simulate() -> float:
        slots, gate = asyncio.Semaphore(concurrency), asyncio.Semaphore(args.runs)

        async def call() -> None:
            async with slots:
                await asyncio.sleep(latency)

        async def turn() -> None:
            await call()
            await call()

        async def run() -> None:
            async with gate:
                await asyncio.gather(*(turn() for _ in range(2 * args.eval_size)))
                for _ in range(args.iterations):
                    await call()
                    await asyncio.gather(*(turn() for _ in range(args.eval_size)))
                await asyncio.gather(*(turn() for _ in range(2 * args.eval_size)))

        started = time.perf_counter()
        await asyncio.gather(*(run() for _ in range(args.runs)))
        return time.perf_counter() - started

    return asyncio.run(simulate())


def one(
    data: Path, root: Path, latency: float, concurrency: int, args: argparse.Namespace
) -> dict[str, float]:
    ours, theirs = multiprocessing.Pipe()
    process = multiprocessing.get_context("fork").Process(target=_serve, args=(latency, theirs), daemon=True)
    process.start()
    base_url = ours.recv()
    try:
        base = LLMConfig(
            base_url=base_url,
            api_key="bench",
            models={Role.OPTIMIZER: OPTIMIZER, Role.WORLD_MODEL: WORLD_MODEL, Role.JUDGE: JUDGE},
            timeout_s=60,
        )
        endpoints = {role: RoleEndpoint() for role in (Role.OPTIMIZER, Role.WORLD_MODEL, Role.JUDGE)}
        rundir = root / f"c{concurrency}"
        config = AutoresearchConfig(
            domain="terminal",
            data=(str(data),),
            runs=args.runs,
            iterations=args.iterations,
            eval_size=args.eval_size,
            recheck_size=args.eval_size,
            models={"optimizer": OPTIMIZER, "world_model": WORLD_MODEL, "judge": JUDGE},
        )
        clients, ledger = build_clients(
            base, endpoints, cache_path=rundir / CACHE_FILE, concurrency=concurrency
        )
        engine = Autoresearch(rundir, config, clients, parallel_runs=args.runs)
        engine.apply_budget(ledger, None, None)
        estimate = engine.estimate()

        async def go() -> None:
            try:
                await engine.run()
            finally:
                await clients.optimizer.aclose()

        started, cpu = time.perf_counter(), time.process_time()
        asyncio.run(go())
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        usage = engine.state["usage"]
        calls = usage["calls"] + usage["cache_hits"]
        chain = 2 + 3 * args.iterations + 2
        ideal = max(calls * latency / concurrency, chain * latency, 1e-9)
        ours.send("stop")
        peak = ours.recv()
        return {
            "concurrency": concurrency,
            "calls": calls,
            "sent": usage["calls"],
            "cpu_ms_per_call": 1000 * cpu / max(calls, 1),
            "peak_in_flight": peak,
            "wall": wall,
            "ideal": ideal,
            "est_calls": estimate.calls,
            "est_tokens": estimate.tokens,
            "tokens": usage["prompt_tokens"] + usage["completion_tokens"],
        }
    finally:
        process.join(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per fake LLM call")
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--eval-size", type=int, default=4)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[2, 8, 24])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = write_data(root, count=40)
        print(
            f"autoresearch: {args.runs} runs x {args.iterations} iterations, eval {args.eval_size} turns, "
            f"latency {args.latency:.3f}s per call"
        )
        header = (
            f"{'C':>4} {'calls':>6} {'peak':>5} {'ideal s':>8} {'ours s':>8} {'ours/ideal':>10} "
            f"{'est calls':>9} {'est/actual':>10} {'est tokens':>10} {'tokens':>8} {'est/actual':>10} {'cpu ms/call':>11}"
        )
        # The same experiment without latency: what the calls cost this machine (our process, the
        # fake server, the OS) when nothing waits. No concurrency bound can beat it.
        floor = one(data, root / "floor", 0.0, max(args.concurrency), args)["wall"]
        print(f"overhead floor (latency 0, C={max(args.concurrency)}): {floor:.2f}s")
        print(header + f" {'ours/max(ideal,floor)':>22} {'dag s':>6} {'ours/dag':>8}")
        for concurrency in args.concurrency:
            r = one(data, root, args.latency, concurrency, args)
            dag = dependency_bound(args, args.latency, concurrency)
            print(
                f"{r['concurrency']:>4} {r['calls']:>6} {r['peak_in_flight']:>5} {r['ideal']:>8.2f} "
                f"{r['wall']:>8.2f} {r['wall'] / r['ideal']:>10.2f} {r['est_calls']:>9} "
                f"{r['est_calls'] / r['calls']:>10.2f} {r['est_tokens']:>10} {r['tokens']:>8} "
                f"{r['est_tokens'] / max(r['tokens'], 1):>10.2f} {r['cpu_ms_per_call']:>11.1f} "
                f"{r['wall'] / max(r['ideal'], floor):>22.2f} {dag:>6.2f} {r['wall'] / dag:>8.2f}"
            )
        print(
            "goals: ours/ideal <= 1.2; estimated calls within 10% of actual (est/actual 0.9..1.1). The token\n"
            "estimate assumes templates grow to their style's length band; the fake optimizer adds one line."
        )


if __name__ == "__main__":
    main()
