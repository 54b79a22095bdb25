"""Judge throughput against the local OpenAI-compatible test server with injected latency.

N judge calls at concurrency C each take `latency` seconds on the server, so no client can beat the
bound N * latency / C. The server runs in its own process, so its threads do not compete with the
client for the interpreter lock (a real endpoint is another machine). Measured in one run: the baseline (AgentWorldBench eval.py's loop: one blocking
openai call after another, wall ~ N * latency) and worldline's judge (`judge_batch`, bounded async
concurrency, cache off), with the ratio of each to the bound. Goal: ours within 1.2x of the bound.

    .venv/bin/python benchmarks/llm_bench.py --n 200 --concurrency 16 --latency 0.2
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import openai

from tests.helpers.fakellm import FakeLLMServer, FakeReply
from tests.helpers.judge_data import awb_sample, prediction, verdict
from worldline.judge import JudgeConfig, from_agentworldbench, judge_batch, judge_messages
from worldline.llm import LLMConfig


def serve(latency: float, answer: str, ready: Any, stop: Any, peak: Any) -> None:
    """The scripted server in a child process: reports its URL, serves until told to stop."""
    with FakeLLMServer() as server:
        server.set_default(lambda _request: FakeReply(text=answer, delay_s=latency))
        ready.put(server.base_url)
        stop.wait()
        peak.value = server.max_concurrency


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200, help="judge calls")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.2, help="server latency per call, seconds")
    parser.add_argument("--baseline-n", type=int, default=20, help="calls for the sequential baseline")
    args = parser.parse_args()

    answer = verdict(4)
    samples = [from_agentworldbench(awb_sample(i), prediction(f"content {i} 2")) for i in range(args.n)]
    context = multiprocessing.get_context("spawn")
    ready, stop, peak_value = context.Queue(), context.Event(), context.Value("i", 0)
    child = context.Process(target=serve, args=(args.latency, answer, ready, stop, peak_value), daemon=True)
    child.start()
    base_url = ready.get(timeout=60)
    try:
        # Baseline: eval.py's judge loop, one blocking call at a time.
        client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)
        started = time.perf_counter()
        for sample in samples[: args.baseline_n]:
            pred = sample.prediction().observation or ""
            messages = judge_messages(
                sample.domain, list(sample.history), sample.current_prompt, pred, sample.ground_truth
            )
            client.chat.completions.create(model="fake-model", messages=messages, temperature=0.6)  # type: ignore[arg-type]
        baseline = time.perf_counter() - started
        baseline_per_call = baseline / args.baseline_n

        config = LLMConfig(
            base_url=base_url,
            api_key="bench",
            default_model="fake-model",
            concurrency=args.concurrency,
            timeout_s=60.0,
        )
        started = time.perf_counter()
        batch = asyncio.run(judge_batch(samples, config, JudgeConfig(concurrency=args.concurrency)))
        ours = time.perf_counter() - started
        assert len(batch.finished) == args.n and all(not r.failed for r in batch.finished)
    finally:
        stop.set()
        child.join(timeout=10)
    peak = peak_value.value

    bound = args.n * args.latency / args.concurrency
    baseline_full = baseline_per_call * args.n
    print(f"N={args.n} calls, concurrency C={args.concurrency}, server latency {args.latency * 1000:.0f} ms")
    print(f"bound N*latency/C                    {bound:8.2f} s")
    print(
        f"baseline (sequential eval.py loop)   {baseline_full:8.2f} s  (measured {args.baseline_n} calls, "
        f"{baseline_per_call * 1000:.0f} ms/call)  ratio to bound {baseline_full / bound:6.2f}x"
    )
    print(
        f"worldline judge_batch                {ours:8.2f} s  ratio to bound {ours / bound:6.2f}x  "
        f"speed-up vs baseline {baseline_full / ours:6.1f}x  (peak in flight {peak})"
    )
    # On a loaded machine one call already costs more than `latency` (scheduling, HTTP, JSON): the
    # bound with the measured sequential per-call time separates that from concurrency overhead.
    floor = args.n * baseline_per_call / args.concurrency
    print(f"bound N*measured_call/C              {floor:8.2f} s  ours / that bound {ours / floor:6.2f}x")
    print("goal: within 1.2x of the bound -> " + ("met" if ours <= 1.2 * bound else "NOT met"))


if __name__ == "__main__":
    main()
