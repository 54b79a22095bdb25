"""The autoresearch loop: per run, evolve one template against the judge, honest about judge noise.

Per run (runs execute concurrently, at most `parallel_runs` at once; LLM calls are bounded by the
clients' concurrency):

1. Seed: the run's style directive and its seed template. The seed is scored twice on the run's eval
   turns (world model and judge sampled independently: distinct `sample_index`); the two scorings
   give the run's noise floor and the incumbent's score is their mean.
2. Each iteration the optimizer sees sampled trajectories, the incumbent template, its scores and its
   worst predictions, and proposes a revised template. A candidate that drops or invents a template
   variable is rejected (status crash, with the reason). Otherwise the world model predicts the eval
   turns with it, prompted exactly as AgentWorldBench's eval.py prompts, and the shared judge scores
   them. The candidate is kept only if it beats the incumbent by more than the noise floor.
3. A winner (an incumbent other than the seed) is scored again, with the seed, on the disjoint recheck
   split; it becomes the run's result only if it still beats the seed there by more than the noise
   floor, otherwise the seed stays the result.

State is one JSON file written atomically after every candidate; every LLM request is a pure function
of that state, so a resumed run sends the same requests and the response cache answers those already
made: zero repeated calls.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from prompt_autoresearch.data import WORLD_MODEL_MAX_TOKENS, WORLD_MODEL_TEMPERATURE, EvalData, EvalItem
from prompt_autoresearch.ledger import write_ledger
from prompt_autoresearch.optimizer import (
    OPTIMIZER_MAX_TOKENS,
    OPTIMIZER_TEMPERATURE,
    optimizer_messages,
    parse_proposal,
)
from prompt_autoresearch.scoring import (
    CHARS_PER_TOKEN,
    Evaluation,
    Meter,
    MeteredClient,
    judge_messages_for,
    noise_floor,
    summarise,
    template_hash,
)
from prompt_autoresearch.state import (
    STATE_FILE,
    AutoresearchConfig,
    all_rows,
    check_resume,
    load_state,
    new_state,
)
from prompt_autoresearch.styles import StyleDirective, style_for_run
from schemas.atomic import atomic_write_bytes
from schemas.templates import Template, load_template_set
from schemas.worldmodel import SCORING_DIMENSIONS
from worldline.judge import Judge, JudgeConfig, JudgeResult
from worldline.llm import BudgetExceeded, ChatRequest, LLMClient, RequestRejected, Role

CACHE_FILE = "llm-cache.sqlite"
Event = Callable[[str, int, Mapping[str, Any]], None]


@dataclass
class RoleClients:
    """The LLM client serving each role (one client when all roles share an endpoint)."""

    optimizer: LLMClient
    world_model: LLMClient
    judge: LLMClient

    def distinct(self) -> list[LLMClient]:
        seen: list[LLMClient] = []
        for client in (self.optimizer, self.world_model, self.judge):
            if all(client is not other for other in seen):
                seen.append(client)
        return seen


# --------------------------------------------------------------------------------------------------
# Plan and estimate
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """Calls and tokens the remaining work needs (one judge attempt per turn; retries come on top)."""

    calls: int
    tokens: int
    calls_per_proposal: int
    tokens_per_proposal: int
    fixed_calls_per_run: int
    runs_left: int
    proposals_left: int

    def affordable_proposals_per_run(self, calls_left: int | None, tokens_left: int | None) -> float | None:
        """Proposals per run the budget pays for after the fixed costs (seed scoring, recheck)."""
        bounds = []
        if self.runs_left == 0:
            return None
        if calls_left is not None:
            bounds.append(
                (calls_left / self.runs_left - self.fixed_calls_per_run) / max(self.calls_per_proposal, 1)
            )
        if tokens_left is not None and self.tokens_per_proposal:
            fixed_tokens = self.fixed_calls_per_run * (self.tokens_per_proposal / self.calls_per_proposal)
            bounds.append((tokens_left / self.runs_left - fixed_tokens) / self.tokens_per_proposal)
        return max(min(bounds), 0.0) if bounds else None


# --------------------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------------------


class Autoresearch:
    """One experiment in RUNDIR: loads or creates the state, runs what is left, writes ledger and state."""

    def __init__(
        self,
        rundir: Path,
        config: AutoresearchConfig,
        clients: RoleClients,
        *,
        parallel_runs: int = 4,
        on_event: Event | None = None,
        judge_config: JudgeConfig | None = None,
    ) -> None:
        self.rundir = rundir
        self.config = config
        self.clients = clients
        self.parallel_runs = max(parallel_runs, 1)
        self.on_event = on_event or (lambda kind, run, data: None)
        self.judge_config = judge_config or JudgeConfig(attempts=config.judge_attempts)
        rundir.mkdir(parents=True, exist_ok=True)
        existing = load_state(rundir)
        if existing is not None:
            check_resume(existing, config, rundir)
        self.state: dict[str, Any] = existing if existing is not None else new_state(config)
        self.session_start_usage = dict(self.state["usage"])
        self.data = EvalData.load([Path(p) for p in config.data], config.domain, config.seed)
        self.seed_set = load_template_set(config.seed_templates)
        self._items: dict[tuple[int, str], list[EvalItem]] = {}
        self._pending_files: list[tuple[Path, bytes]] = []
        self._write_lock = asyncio.Lock()
        from worldline.tokenizer import get_token_counter

        # Loaded here, not on the first ledger row: loading blocks, and the loop must not stall on it.
        self.counter = get_token_counter()

    # -- bookkeeping -------------------------------------------------------------------------------
    def run_state(self, run: int) -> dict[str, Any]:
        runs = self.state["runs"]
        key = str(run)
        if key not in runs:
            style = style_for_run(run)
            runs[key] = {
                "style": style.name,
                "band": [style.min_lines, style.max_lines],
                "status": "pending",
                "seed": None,
                "incumbent": None,
                "candidates": [],
                "iterations_done": 0,
                "recheck": None,
                "result": None,
            }
        return cast(dict[str, Any], runs[key])

    def items(self, run: int, split: str) -> list[EvalItem]:
        key = (run, split)
        if key not in self._items:
            size = self.config.eval_size if split == "eval" else self.config.recheck_size
            self._items[key] = self.data.eval_items(split, size, self.config.seed, run)
        return self._items[key]

    def _ledgers(self) -> list[Any]:
        """The distinct usage ledgers of the clients (one when they share it, as build_clients does)."""
        ledgers: dict[int, Any] = {}
        for client in self.clients.distinct():
            ledgers.setdefault(id(client.ledger), client.ledger)
        return list(ledgers.values())

    def apply_budget(self, ledger: Any, max_calls: int | None, max_tokens: int | None) -> None:
        """Set the shared ledger's limits for the whole experiment. A ledger with RUNDIR's request
        journal already counts every earlier session's requests (a killed session's included); one
        without it starts from the calls the state recorded."""
        # a RUNDIR from before the journal: its earlier calls are only in the state
        journaled = getattr(ledger, "journal", None) is not None and (
            ledger.totals.requests > 0 or not self.state["usage"]["calls"]
        )
        used = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0} if journaled else self.state["usage"]
        ledger.max_calls = None if max_calls is None else max(max_calls - int(used["calls"]), 0)
        ledger.max_total_tokens = (
            None
            if max_tokens is None
            else max(max_tokens - int(used["prompt_tokens"]) - int(used["completion_tokens"]), 0)
        )
        self.state["budget"] = {"max_calls": max_calls, "max_tokens": max_tokens}

    def session_usage(self) -> dict[str, Any]:
        """Requests really sent (retries included, cache hits apart) by all clients in this session."""
        totals = {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
        for ledger in self._ledgers():
            snap = ledger.snapshot()["totals"]
            totals["calls"] += snap["requests"]
            for name in ("cache_hits", "prompt_tokens", "completion_tokens", "cost_usd"):
                totals[name] += snap[name]
        return totals

    def usage_now(self) -> dict[str, Any]:
        """The experiment's usage: a journaled ledger's totals are every session's already; cache hits
        (not journaled) and unjournaled ledgers add to what the state recorded at this session's start."""
        usage = self.session_usage()
        journaled = all(getattr(ledger, "journal", None) is not None for ledger in self._ledgers())
        start = self.session_start_usage
        if journaled:
            return {**usage, "cache_hits": start.get("cache_hits", 0) + usage["cache_hits"]}
        return {name: start.get(name, 0) + usage[name] for name in usage}

    async def checkpoint(self) -> None:
        """Save state, ledger and new template files. The state is serialised here, on the loop (so no
        run mutates it meanwhile); the writes and fsyncs run in a worker thread, in order, so a slow
        disk never stalls the runs' LLM calls."""
        self.state["usage"] = self.usage_now()
        state_bytes = (json.dumps(self.state, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
        rows = all_rows(self.state)  # rows never change once appended
        files, self._pending_files = self._pending_files, []
        async with self._write_lock:
            await asyncio.to_thread(self._write, state_bytes, rows, files)

    def _write(self, state_bytes: bytes, rows: list[dict[str, Any]], files: list[tuple[Path, bytes]]) -> None:
        for path, data in files:
            atomic_write_bytes(path, data)
        write_ledger(self.rundir, rows)
        atomic_write_bytes(self.rundir / STATE_FILE, state_bytes)

    def template_path(self, run: int, iteration: int, text: str) -> str:
        """Where a candidate's template is saved (written with the next checkpoint, before the state)."""
        rel = Path("templates") / f"run-{run:02d}" / f"it-{iteration:02d}-{template_hash(text)[:8]}.md"
        self._pending_files.append((self.rundir / rel, text.encode("utf-8")))
        return str(rel)

    # -- estimate ----------------------------------------------------------------------------------
    def estimate(self) -> Estimate:
        # The splits may hold fewer turns than asked for: count the turns really used.
        n = len(self.items(0, "eval"))
        r = len(self.items(0, "recheck"))
        it = self.config.iterations
        per_proposal_calls = 1 + 2 * n
        seed_calls, recheck_calls = 4 * n, 4 * r
        calls = tokens = proposals = runs_left = 0
        tokens_per_call_sum = 0.0
        for run in range(self.config.runs):
            rs = self.state["runs"].get(str(run))
            if rs is not None and rs["status"] == "done":
                continue
            runs_left += 1
            style = style_for_run(run)
            wm, judge, opt = self._token_guess(run, style)
            done = rs["iterations_done"] if rs else 0
            seeded = bool(rs and rs.get("seed"))
            left = it - done
            proposals += left
            calls += (0 if seeded else seed_calls) + left * per_proposal_calls + recheck_calls
            tokens += int(
                (0 if seeded else 2 * n * (wm + judge))
                + left * (opt + n * (wm + judge))
                + 2 * r * (wm + judge)
            )
            tokens_per_call_sum += (opt + n * (wm + judge)) / per_proposal_calls
        per_call = tokens_per_call_sum / runs_left if runs_left else 0.0
        return Estimate(
            calls=calls,
            tokens=tokens,
            calls_per_proposal=per_proposal_calls,
            tokens_per_proposal=int(per_call * per_proposal_calls),
            fixed_calls_per_run=seed_calls + recheck_calls,
            runs_left=runs_left,
            proposals_left=proposals,
        )

    def _token_guess(self, run: int, style: StyleDirective) -> tuple[float, float, float]:
        """Tokens of one world-model, judge and optimizer call of this run.

        Prompts are measured on the real messages (seed template grown to the middle of the run's
        length band, the judge's real prompt with the ground truth as prediction, the optimizer's real
        prompt); completions are guesses (a prediction twice the truth plus reasoning, a judge
        verdict, a template of the band's middle length). Once candidates exist, the measured tokens
        per call replace the guess. Token = 4 characters, as the LLM client estimates."""
        measured = [row for rs in self.state["runs"].values() for row in rs["candidates"] if row["calls"]]
        seed = self.seed_set.get(style.seed_version)
        items = self.items(run, "eval")
        seed_lines = seed.text.count("\n") + 1
        grow = max((style.min_lines + style.max_lines) / 2 - seed_lines, 0) * len(seed.text) / seed_lines
        size = CHARS_PER_TOKEN
        wm_prompt = statistics.fmean(len(json.dumps(i.messages(seed))) for i in items) + grow
        truth = statistics.fmean(len(i.trajectory.turns[i.turn - 1].observation.text) for i in items)
        judge_prompt = statistics.fmean(len(json.dumps(judge_messages_for(i, seed))) for i in items)
        opt_prompt = len(json.dumps(self._seed_optimizer_messages(run, style, seed.text))) + grow
        opt_prompt += self.config.worst * 3 * 600  # the worst errors shown, each clipped
        wm = (wm_prompt + 2 * truth + 800) / size
        judge = (judge_prompt + 1200) / size
        opt = (opt_prompt + len(seed.text) + grow + 200) / size
        if measured:
            per_call = sum(r["prompt_tokens"] + r["completion_tokens"] for r in measured) / sum(
                r["calls"] for r in measured
            )
            return per_call, per_call, per_call
        return wm, judge, opt

    def _seed_optimizer_messages(self, run: int, style: StyleDirective, text: str) -> list[dict[str, str]]:
        return optimizer_messages(
            domain=self.data.domain,
            style=style,
            template=text,
            scores={"score": 0.0},
            worst=[],
            examples=self.data.optimizer_examples(self.config.examples, self.config.seed, run, 1),
            history=[],
        )

    # -- LLM steps ---------------------------------------------------------------------------------
    async def evaluate(
        self, template: Template, items: Sequence[EvalItem], replica: int, meter: Meter
    ) -> Evaluation:
        """World-model predictions for `items` with `template`, judged; replica r is an independent
        sample (its own sample indices) of the same evaluation."""
        judge = Judge(
            cast(
                LLMClient,
                MeteredClient(self.clients.judge, meter, replica, self.judge_config.attempts),
            ),
            self.judge_config,
        )

        async def one(item: EvalItem) -> JudgeResult:
            request = ChatRequest(
                role=Role.WORLD_MODEL,
                messages=item.messages(template),
                temperature=WORLD_MODEL_TEMPERATURE,
                max_tokens=WORLD_MODEL_MAX_TOKENS,
                sample_index=replica,
            )
            result = await self.clients.world_model.run(request)
            meter.add(result, self.clients.world_model)
            return await judge.judge(item.judge_sample(template, result.text))

        outcomes = await asyncio.gather(*(one(item) for item in items), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return summarise(items, cast(list[JudgeResult], outcomes), self.config.worst)

    async def propose(self, run: int, rs: dict[str, Any], iteration: int, meter: Meter) -> str:
        style = style_for_run(run)
        incumbent = self._candidate(rs, rs["incumbent"])
        history = [
            {k: c[k] for k in ("iteration", "status", "reason", "score", "description")}
            | {"score": c["score"] or 0.0}
            for c in rs["candidates"]
            if c["iteration"] > 0
        ]
        messages = optimizer_messages(
            domain=self.data.domain,
            style=style,
            template=incumbent["text"],
            scores={
                "score": rs["incumbent_score"],
                "noise_floor": rs["noise_floor"],
                "dimensions": incumbent["dimensions"],
                "failed": incumbent["failed"],
                "samples": incumbent["valid"] + incumbent["failed"],
            },
            worst=incumbent["worst"],
            examples=self.data.optimizer_examples(self.config.examples, self.config.seed, run, iteration),
            history=history,
        )
        result = await self.clients.optimizer.run(
            ChatRequest(
                role=Role.OPTIMIZER,
                messages=messages,
                temperature=OPTIMIZER_TEMPERATURE,
                max_tokens=OPTIMIZER_MAX_TOKENS,
            )
        )
        meter.add(result, self.clients.optimizer)
        return result.text

    # -- rows --------------------------------------------------------------------------------------
    @staticmethod
    def _candidate(rs: Mapping[str, Any], candidate_id: str) -> dict[str, Any]:
        for c in rs["candidates"]:
            if c["candidate_id"] == candidate_id:
                return cast(dict[str, Any], c)
        raise KeyError(candidate_id)

    def _row(
        self,
        run: int,
        iteration: int,
        parent: str | None,
        text: str,
        evaluation: Evaluation | None,
        meter: Meter,
        status: str,
        reason: str,
        description: str,
        rs: Mapping[str, Any],
    ) -> dict[str, Any]:
        dims = evaluation.dimensions if evaluation else {}
        return {
            "run": run,
            "iteration": iteration,
            "candidate_id": f"r{run:02d}i{iteration:02d}",
            "parent": parent,
            "style": rs["style"],
            "template_hash": template_hash(text),
            "template_path": self.template_path(run, iteration, text) if text.strip() else None,
            "lines": text.count("\n") + (0 if text.endswith("\n") else 1) if text else 0,
            "tokens": self.counter.count(text) if text else 0,
            "score": evaluation.score if evaluation else None,
            **{d: dims.get(d) for d in SCORING_DIMENSIONS},
            "dimensions": dims,
            "valid": evaluation.valid if evaluation else 0,
            "failed": evaluation.failed if evaluation else 0,
            "parse_failures": evaluation.parse_failures if evaluation else 0,
            "incumbent_score": rs.get("incumbent_score"),
            "noise_floor": rs.get("noise_floor"),
            "calls": meter.calls,
            "prompt_tokens": meter.prompt_tokens,
            "completion_tokens": meter.completion_tokens,
            "cost_usd": meter.cost_usd,
            "status": status,
            "reason": reason,
            "description": description,
            "worst": evaluation.worst if evaluation else [],
            "text": text,
        }

    # -- one run -----------------------------------------------------------------------------------
    async def seed_run(self, run: int, rs: dict[str, Any]) -> None:
        style = style_for_run(run)
        seed = self.seed_set.get(style.seed_version)
        text = seed.text if seed.text.endswith("\n") else seed.text + "\n"
        template = Template(-1, style.name, text, "")
        items = self.items(run, "eval")
        meter = Meter()
        first, second = await asyncio.gather(
            self.evaluate(template, items, 0, meter), self.evaluate(template, items, 1, meter)
        )
        floor = noise_floor(first, second)
        scores = [s.score for s in (first, second) if s.score is not None]
        rs["noise_floor"] = floor
        rs["incumbent_score"] = statistics.fmean(scores) if scores else None
        rs["seed_scores"] = [first.score, second.score]
        row = self._row(
            run, 0, None, text, first, meter, "keep", f"seed template v{style.seed_version}", style.name, rs
        )
        if first.score is not None and second.score is not None:
            row["score"] = rs["incumbent_score"]
        rs["candidates"].append(row)
        rs["seed"] = row["candidate_id"]
        rs["incumbent"] = row["candidate_id"]
        rs["status"] = "running"
        await self.checkpoint()
        self.on_event("seed", run, {"score": rs["incumbent_score"], "noise_floor": floor})

    async def iterate(self, run: int, rs: dict[str, Any], iteration: int) -> None:
        meter = Meter()
        incumbent_id = rs["incumbent"]

        async def crash(text: str, reason: str, description: str) -> None:
            row = self._row(run, iteration, incumbent_id, text, None, meter, "crash", reason, description, rs)
            await self._finish_iteration(run, rs, row)

        # A rejected request (HTTP 4xx: e.g. a prompt over the context length) is this candidate's
        # failure and recorded as a crash; an endpoint that stays down (RetriesExhausted) stops the
        # experiment instead, so that a rerun retries the candidate rather than losing it.
        try:
            answer = await self.propose(run, rs, iteration, meter)
        except RequestRejected as error:
            return await crash("", f"optimizer call failed: {error}", "")
        proposal = parse_proposal(answer)
        if not proposal.ok:
            return await crash(proposal.text, proposal.rejection, proposal.description)
        template = Template(-1, rs["style"], proposal.text, "")
        try:
            evaluation = await self.evaluate(template, self.items(run, "eval"), 0, meter)
        except RequestRejected as error:
            return await crash(proposal.text, f"world model call rejected: {error}", proposal.description)
        incumbent_score, floor = rs["incumbent_score"], rs["noise_floor"]
        if evaluation.score is None:
            status, reason = "discard", "no turn could be judged"
        elif incumbent_score is None:
            status, reason = "keep", "the incumbent has no score"
        else:
            delta = evaluation.score - incumbent_score
            if delta > floor:
                status, reason = "keep", f"beats the incumbent by {delta:+.2f} > noise floor {floor:.2f}"
            elif delta > 0:
                status, reason = "discard", f"inside the noise floor: {delta:+.2f} <= {floor:.2f}"
            else:
                status, reason = "discard", f"not better than the incumbent: {delta:+.2f}"
        row = self._row(
            run,
            iteration,
            incumbent_id,
            proposal.text,
            evaluation,
            meter,
            status,
            reason,
            proposal.description,
            rs,
        )
        if status == "keep":
            rs["incumbent"] = row["candidate_id"]
            rs["incumbent_score"] = evaluation.score
        await self._finish_iteration(run, rs, row)

    async def _finish_iteration(self, run: int, rs: dict[str, Any], row: dict[str, Any]) -> None:
        rs["candidates"].append(row)
        rs["iterations_done"] = row["iteration"]
        await self.checkpoint()
        self.on_event(
            "candidate",
            run,
            {
                "iteration": row["iteration"],
                "status": row["status"],
                "score": row["score"],
                "best": rs["incumbent_score"],
            },
        )

    async def recheck(self, run: int, rs: dict[str, Any]) -> None:
        if rs["incumbent"] == rs["seed"]:
            rs["recheck"] = {"winner": rs["seed"], "accepted": True, "reason": "no candidate beat the seed"}
            rs["result"] = rs["seed"]
        else:
            meter = Meter()
            items = self.items(run, "recheck")
            winner, seed = self._candidate(rs, rs["incumbent"]), self._candidate(rs, rs["seed"])
            w_eval, s_eval = await asyncio.gather(
                self.evaluate(Template(-1, rs["style"], winner["text"], ""), items, 0, meter),
                self.evaluate(Template(-1, rs["style"], seed["text"], ""), items, 0, meter),
            )
            floor = rs["noise_floor"]
            delta = (w_eval.score or 0.0) - (s_eval.score or 0.0)
            accepted = w_eval.score is not None and s_eval.score is not None and delta > floor
            rs["recheck"] = {
                "winner": winner["candidate_id"],
                "winner_score": w_eval.score,
                "seed_score": s_eval.score,
                "delta": delta,
                "noise_floor": floor,
                "accepted": accepted,
                "samples": len(items),
                "calls": meter.calls,
                "prompt_tokens": meter.prompt_tokens,
                "completion_tokens": meter.completion_tokens,
                "cost_usd": meter.cost_usd,
                "reason": (
                    f"confirmed on the recheck split: {delta:+.2f} > noise floor {floor:.2f}"
                    if accepted
                    else f"not confirmed on the recheck split: {delta:+.2f} <= noise floor {floor:.2f}; "
                    f"the seed stays the result"
                ),
            }
            rs["result"] = winner["candidate_id"] if accepted else rs["seed"]
        rs["status"] = "done"
        await self.checkpoint()
        self.on_event("done", run, {"result": rs["result"], "recheck": rs["recheck"]})

    async def run_one(self, run: int, gate: asyncio.Semaphore) -> None:
        async with gate:
            rs = self.run_state(run)
            if rs["status"] == "done":
                return
            self.on_event("start", run, {"style": rs["style"], "iterations_done": rs["iterations_done"]})
            if rs["seed"] is None:
                await self.seed_run(run, rs)
            for iteration in range(rs["iterations_done"] + 1, self.config.iterations + 1):
                await self.iterate(run, rs, iteration)
            await self.recheck(run, rs)

    async def run(self) -> dict[str, Any]:
        """Run (or resume) every run; returns the state. Stops cleanly, saving the state, when the
        budget runs out (state["stopped"] says why); re-raises anything else after saving."""
        for run in range(self.config.runs):
            self.run_state(run)
        self.state["stopped"] = None
        await self.checkpoint()
        gate = asyncio.Semaphore(self.parallel_runs)
        outcomes = await asyncio.gather(
            *(self.run_one(run, gate) for run in range(self.config.runs)), return_exceptions=True
        )
        budget = [o for o in outcomes if isinstance(o, BudgetExceeded)]
        others = [o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, BudgetExceeded)]
        if budget:
            self.state["stopped"] = f"budget: {budget[0]}"
        await self.checkpoint()
        if others:
            raise others[0]
        return self.state
