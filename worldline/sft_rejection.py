"""SFT rejection sampling (paper 3.3): rollouts from a reasoning model, judged, best kept above a bar.

For each SFT query (system + user prompt of a pool row) the rollout model answers `rollouts` times
(sample_index 0..n-1: each its own cache entry). The judge scores every rollout's prediction against
the row's real observation; the two best are compared pairwise (order set by a seeded hash, so
position bias does not favour one rank); the winner is kept if its normalised score reaches the
threshold. The kept sample is the row's prompt with an assistant answer holding the rollout's
reasoning in `<think>` and its prediction in a `<predicted_observation>` block: the thinking trace
is kept for training, while only the prediction was judged.

Every decision is appended to `decisions.jsonl` as it is made, so a rerun skips decided samples and
the response cache answers the calls of undecided ones: a finished run reruns with zero calls.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from schemas.atomic import atomic_open
from schemas.worldmodel import answer_text
from worldline.judge.judge import CallCost, Judge, JudgeConfig, JudgeResult
from worldline.judge.samples import JudgeSample, from_chat
from worldline.judge.store import ResultStore
from worldline.llm import BudgetExceeded, ChatRequest, ChatResult, LLMCallFailed, LLMClient, LLMConfig, Role
from worldline.llm.parsing import parse_predicted_observation


@dataclass(frozen=True)
class RejectionConfig:
    """`threshold` is on the judge's normalised 0..100 scale."""

    rollouts: int = 3
    threshold: float = 50.0
    temperature: float = 0.6
    max_tokens: int = 32768
    limit: int | None = None
    seed: int = 0
    judge: JudgeConfig = JudgeConfig()

    def __post_init__(self) -> None:
        if self.rollouts < 1:
            raise ValueError(f"--rollouts must be >= 1, got {self.rollouts}")
        if not 0.0 <= self.threshold <= 100.0:
            raise ValueError(f"--threshold is a normalised score in 0..100, got {self.threshold}")


@dataclass(frozen=True)
class SFTQuery:
    """One SFT pool row as a query: its prompt, real observation and identity."""

    key: str
    domain: str
    messages: list[dict[str, str]]  # system + user (the target removed)
    ground_truth: str
    row: dict[str, Any]


def _target_observation(text: str) -> str:
    parsed = parse_predicted_observation(text)
    return parsed.observation if parsed.observation is not None else text.strip()


def query_from_row(row: Mapping[str, Any]) -> SFTQuery:
    """A query from an SFT pool row or chat-message record (messages ending in the target)."""
    messages = [dict(m) for m in row.get("messages") or []]
    if len(messages) < 2 or messages[-1].get("role") != "assistant":
        raise ValueError(
            f"SFT row {row.get('sample_id') or row.get('trajectory_id')!r}: 'messages' must end with the "
            f"assistant target (system, user, assistant)"
        )
    key = str(row.get("sample_id") or f"sft:{row.get('trajectory_id')}:{row.get('turn_index')}")
    return SFTQuery(
        key=key,
        domain=str(row.get("domain") or "mcp"),
        messages=[{"role": str(m["role"]), "content": str(m["content"])} for m in messages[:-1]],
        ground_truth=_target_observation(str(messages[-1].get("content") or "")),
        row={k: v for k, v in row.items() if k != "messages"},
    )


def pool_files(path: Path) -> list[Path]:
    """SFT rows: a pools OUT (its sft/), a folder of part-*.parquet, a parquet file, or a JSONL file."""
    if path.is_file():
        return [path]
    if (path / "sft").is_dir():
        path = path / "sft"
    files = sorted(path.glob("part-*.parquet")) or sorted(path.glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(
            f"no SFT rows under {path}: pass a pools OUT, OUT/sft, a part file or chat JSONL"
        )
    return files


def read_queries(path: Path) -> Iterator[SFTQuery]:
    for file in pool_files(path):
        if file.suffix == ".parquet":
            for batch in pq.ParquetFile(file).iter_batches(batch_size=256):
                for row in batch.to_pylist():
                    yield query_from_row(row)
        else:
            with file.open(encoding="utf-8") as handle:
                for line in handle:
                    if line.strip():
                        yield query_from_row(json.loads(line))


def _order(key: str, seed: int) -> bool:
    """True: the best-scored rollout is shown as A; a seeded hash so position bias favours no rank."""
    return hashlib.sha256(f"{seed}:{key}".encode()).digest()[0] % 2 == 0


def kept_answer(reasoning: str, prediction: str) -> str:
    return answer_text(prediction, reasoning if reasoning.strip() else None)


async def decide(client: LLMClient, judge: Judge, query: SFTQuery, config: RejectionConfig) -> dict[str, Any]:
    """Roll out, judge, compare, decide one query; the decision record (with the kept sample, if any)."""
    cost = CallCost()
    requests = [
        ChatRequest(
            role=Role.ROLLOUT,
            messages=query.messages,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            sample_index=k,
        )
        for k in range(config.rollouts)
    ]
    outcomes = await client.chat_many(requests, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BudgetExceeded):
            raise outcome
    rollouts: list[ChatResult | None] = [o if isinstance(o, ChatResult) else None for o in outcomes]
    for rollout in rollouts:
        if rollout is not None:
            cost.add(rollout, client)
    samples = [
        from_chat(
            query.messages, query.ground_truth, r.text, domain=query.domain, sample_id=f"{query.key}#{i}"
        )
        if r is not None
        else None
        for i, r in enumerate(rollouts)
    ]

    async def judged_or_none(sample: JudgeSample | None) -> JudgeResult | None:
        return None if sample is None else await judge.judge(sample)

    verdicts = await asyncio.gather(*(judged_or_none(s) for s in samples), return_exceptions=True)
    judged: list[JudgeResult | None] = []
    for verdict in verdicts:
        if isinstance(verdict, BaseException):
            raise verdict  # BudgetExceeded: the query stays undecided, the cache keeps what was spent
        if verdict is not None:
            cost.merge(verdict.cost)
        judged.append(verdict)
    scores = {i: r.normalised for i, r in enumerate(judged) if r is not None and r.normalised is not None}
    ranked = sorted(scores, key=lambda i: (-scores[i], i))
    record: dict[str, Any] = {
        "key": query.key,
        "domain": query.domain,
        "rollouts": [
            {
                "index": i,
                "normalised": r.normalised if r is not None else None,
                "failure": (r.failure if r is not None else "rollout_failed"),
            }
            for i, r in enumerate(judged)
        ],
        "pairwise": None,
        "chosen": None,
        "kept": False,
        "reason": "no_valid_rollout",
    }
    if ranked:
        best = ranked[0]
        if len(ranked) >= 2:
            second = ranked[1]
            first_is_best = _order(query.key, config.seed)
            a, b = (best, second) if first_is_best else (second, best)
            sample_a, judged_a, judged_b = samples[a], judged[a], judged[b]
            assert sample_a is not None and judged_a is not None and judged_b is not None
            try:
                winner, compare_cost = await judge.compare(
                    sample_a, judged_a.prediction or "", judged_b.prediction or ""
                )
            except LLMCallFailed:
                winner, compare_cost = None, CallCost()
            cost.merge(compare_cost)
            record["pairwise"] = {"A": a, "B": b, "winner": winner}
            if winner is not None:
                best = a if winner == "A" else b
        chosen = judged[best]
        rollout = rollouts[best]
        assert chosen is not None and rollout is not None and chosen.normalised is not None
        record["chosen"] = best
        if chosen.normalised >= config.threshold:
            record["kept"] = True
            record["reason"] = "kept"
            record["sample"] = {
                **query.row,
                "messages": [
                    *query.messages,
                    {"role": "assistant", "content": kept_answer(rollout.reasoning, chosen.prediction or "")},
                ],
                "judge_normalised": chosen.normalised,
                "judge_scores": chosen.scores,
            }
        else:
            record["reason"] = "below_threshold"
    record["cost"] = asdict(cost)
    return record


@dataclass
class RejectionOutcome:
    decided: int
    kept: int
    table: str
    card: dict[str, Any]
    samples_path: Path
    stopped: str | None


def retain_table(decisions: Sequence[Mapping[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The per-domain retain-rate table (the paper's Table 4 shape) as markdown and as data."""
    rows: dict[str, dict[str, int]] = {}
    for decision in decisions:
        row = rows.setdefault(str(decision["domain"]), {"candidates": 0, "kept": 0})
        row["candidates"] += 1
        row["kept"] += int(bool(decision["kept"]))
    total = {
        "candidates": sum(r["candidates"] for r in rows.values()),
        "kept": sum(r["kept"] for r in rows.values()),
    }
    lines = ["| domain | candidates | kept | retained |", "|---|---|---|---|"]
    data: dict[str, Any] = {}
    for name, row in [*sorted(rows.items()), ("total", total)]:
        rate = row["kept"] / row["candidates"] if row["candidates"] else 0.0
        data[name] = {**row, "retain_rate": rate}
        lines.append(f"| {name} | {row['candidates']} | {row['kept']} | {rate * 100:.1f}% |")
    return "\n".join(lines), data


def run_rejection_sampling(
    pool: Path,
    out: Path,
    llm_config: LLMConfig,
    config: RejectionConfig,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> RejectionOutcome:
    """Decide every query of the pool (resuming), then write kept samples and the card."""
    queries = list(read_queries(pool))
    if config.limit is not None:
        queries = queries[: config.limit]
    out.mkdir(parents=True, exist_ok=True)
    # A query whose rollouts or judgements never reached the endpoint is decided again by the next run.
    unreachable = {"rollout_failed", "call_failed"}
    store = ResultStore(
        out / "decisions.jsonl",
        key="key",
        retry_if=lambda d: any(r.get("failure") in unreachable for r in d.get("rollouts", [])),
    )
    todo = [q for q in queries if not store.done(q.key)]
    done = len(queries) - len(todo)
    stopped: list[str] = []

    async def main() -> None:
        nonlocal done
        async with LLMClient(llm_config) as client:
            judge = Judge(client, config.judge)
            pending = iter(todo)

            async def worker() -> None:
                nonlocal done
                for query in pending:
                    if stopped:
                        return
                    try:
                        record = await decide(client, judge, query, config)
                    except BudgetExceeded as error:
                        stopped.append(str(error))
                        return
                    store.append(record)
                    done += 1
                    if on_progress is not None:
                        on_progress(done, len(queries))

            if on_progress is not None:
                on_progress(done, len(queries))
            await asyncio.gather(*(worker() for _ in range(min(llm_config.concurrency, max(len(todo), 1)))))

    try:
        asyncio.run(main())
    finally:
        store.close()
    keys = {q.key for q in queries}
    decisions = [d for d in store if d["key"] in keys]
    table, data = retain_table(decisions)
    samples_path = out / "sft_rejection_sampled.jsonl"
    with atomic_open(samples_path, "w") as handle:
        for decision in sorted(decisions, key=lambda d: str(d["key"])):
            if decision.get("kept"):
                handle.write(json.dumps(decision["sample"], ensure_ascii=False) + "\n")
    card = {
        "pool": str(pool),
        "rollouts": config.rollouts,
        "threshold": config.threshold,
        "queries": len(queries),
        "decided": len(decisions),
        "retain": data,
        "reasons": {
            reason: sum(1 for d in decisions if d["reason"] == reason)
            for reason in sorted({str(d["reason"]) for d in decisions})
        },
        "stopped": stopped[0] if stopped else None,
    }
    (out / "card.json").write_text(json.dumps(card, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / "README.md").write_text(
        f"# SFT rejection sampling\n\n{config.rollouts} rollouts per query, judged against the real "
        f"observation; the best of the top two (pairwise) kept when its normalised score >= "
        f"{config.threshold:g}.\n\n{table}\n",
        encoding="utf-8",
    )
    kept = sum(1 for d in decisions if d.get("kept"))
    return RejectionOutcome(len(decisions), kept, table, card, samples_path, stopped[0] if stopped else None)
