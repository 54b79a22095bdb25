"""`pools verify`: prove what the build promises by recomputing it from content.

Nothing the build recorded about content is trusted: the manifest's checksums are checked, but every
other check is recomputed from the pool rows and from the inputs the manifest names, so rewriting the
manifest and its checksums cannot hide a violation.

- disjointness: trajectory ids, source groups and dedup clusters, read from the pool rows;
- duplicates: the pooled trajectories are re-read from the inputs (validated, filtered and
  canonicalised as the build does), their exact keys and MinHash signatures recomputed, and no two
  pooled records may be exact or near duplicates, in one pool or across pools;
- evaluation overlap: every pooled training record against every evaluation set the manifest names
  (near duplicates and 13-gram containment of turns and tasks) and against the eval pool's turns;
- per-pool rules: one RL row per trajectory, token caps recounted with the recorded tokenizer and
  chat template, SFT targets non-empty with their closing tag, the evaluator's conversation shape,
  valid CPT loss spans, template versions and their spread;
- statistics: the manifest's per-pool counts and token statistics equal the rows'.

A missing input (shard folder, knowledge corpus, evaluation set) is a violation, never a skip. Rows
are streamed part by part; memory holds one part's batch plus small per-record state (ids, groups,
one MinHash signature per pooled trajectory).
"""

from __future__ import annotations

import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from pipelines import fs
from pipelines.config import ALL_POOLS, EVAL_POOL, POOLS, PoolsConfig
from pipelines.filters import apply_filters, validate_record
from pipelines.inputs import (
    iter_input_records,
    knowledge_files,
    read_eval_ngrams,
    read_eval_turns,
    read_knowledge_file,
)
from pipelines.minhash import NearDuplicateIndex, exact_key, normalise, signatures
from pipelines.ngrams import ContainmentIndex, text_grams
from pipelines.render import OBSERVATION_CLOSE, OBSERVATION_OPEN
from pipelines.stages.decontaminate import EvalTurnMatcher, eval_pool_grams, training_grams
from pipelines.stages.dedup import trajectory_text
from pipelines.stages.spill import ASSIGNMENTS
from schemas.shards import ShardError
from schemas.trajectory import Trajectory
from worldline.agentworldbench import RESPONSE_MARKER
from worldline.chat_template import count_chat_tokens

BATCH_ROWS = 512


@dataclass(slots=True)
class Violation:
    check: str
    detail: str
    rows: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "detail": self.detail, "rows": self.rows[:50], "count": len(self.rows)}


def _parts(out: str, name: str) -> list[str]:
    return fs.list_files(fs.join(out, name), "part-*.parquet", recursive=False)


def _stream(out: str, name: str, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The rows of one table, batch by batch (bounded memory)."""
    for f in _parts(out, name):
        with fs.open_read(f) as fh:
            for batch in pq.ParquetFile(fh).iter_batches(batch_size=BATCH_ROWS, columns=columns):
                yield from batch.to_pylist()


class Report:
    """Collects violations by check."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str], list[str]] = {}

    def add(self, check: str, detail: str, row: str | None = None) -> None:
        rows = self.found.setdefault((check, detail), [])
        if row is not None:
            rows.append(row)

    def violations(self) -> list[Violation]:
        return [Violation(c, d, rows) for (c, d), rows in self.found.items()]


def check_checksums(out: str, manifest: dict[str, Any], report: Report) -> None:
    for pool, info in manifest["pools"].items():
        for f in info["files"]:
            path = fs.join(out, f["path"])
            if not fs.is_file(path) or fs.sha256(path) != f["sha256"]:
                report.add("checksum", f"{pool}: part changed or missing since the build", f["path"])
        listed = {f["path"] for f in info["files"]}
        for p in _parts(out, pool):
            if fs.relative(p, out) not in listed:
                report.add("checksum", f"{pool}: parts not in the manifest", fs.relative(p, out))


def _token_stats(values: list[int]) -> dict[str, float]:
    from pipelines.finalize import _token_stats

    return _token_stats(values)


def spread_violation(counts: Counter[int], versions: list[int]) -> str:
    """Why SFT template versions are not spread uniformly, or "" (a 4-sigma binomial band)."""
    n = sum(counts.values())
    if n < 5 * len(versions):
        return ""
    expected = n / len(versions)
    sigma = math.sqrt(expected * (1 - 1 / len(versions)))
    off = {v: counts.get(v, 0) for v in versions if abs(counts.get(v, 0) - expected) > 4 * sigma + 1}
    return f"{n} samples, expected ~{expected:.0f} per version, got {off}" if off else ""


def check_sft_row(r: dict[str, Any], report: Report) -> None:
    msgs = r["messages"]
    roles = [m["role"] for m in msgs]
    t = r["turn_index"]
    pairs = t - 1 - r["dropped_history_turns"]
    if roles != ["system"] + ["user", "assistant"] * (pairs + 1):
        report.add("conversation_shape", "SFT rows not in the evaluator's conversation shape", r["sample_id"])
    elif not msgs[-2]["content"].startswith(f"### Turn {t}\n") or any(
        not m["content"].startswith(RESPONSE_MARKER) for m in msgs[2:-2:2]
    ):
        report.add("conversation_shape", "SFT history turns not in AgentWorldBench's layout", r["sample_id"])
    target = msgs[-1]["content"] if msgs else ""
    block = target[target.rfind(OBSERVATION_OPEN) :] if OBSERVATION_OPEN in target else ""
    body = block[len(OBSERVATION_OPEN) : -len(OBSERVATION_CLOSE)] if block.endswith(OBSERVATION_CLOSE) else ""
    if not body.strip():
        report.add("sft_target", "SFT targets empty or without their closing tag", r["sample_id"])


def check_rl_row(r: dict[str, Any], report: Report) -> None:
    roles = [m["role"] for m in r["messages"]]
    t = r["turn_index"]
    if roles != ["system"] + ["user", "assistant"] * (t - 1) + ["user"] or not 1 <= t <= r["num_turns"]:
        report.add(
            "conversation_shape", "RL prompts not in the evaluator's conversation shape", r["sample_id"]
        )
    elif not r["messages"][-1]["content"].startswith(f"### Turn {t}\n"):
        report.add("conversation_shape", "RL prompts not in AgentWorldBench's layout", r["sample_id"])


def check_cpt_row(r: dict[str, Any], counter: Any, report: Report) -> None:
    end = 0
    for span in r["loss_spans"]:
        ok = end <= span["start"] < span["end"] <= len(r["text"]) and 0 <= span["weight"]
        if not ok or not 0 <= span["share"] <= 1:
            report.add(
                "loss_spans", "CPT loss spans outside the text, overlapping or unsorted", r["sample_id"]
            )
            return
        end = span["end"]
    if counter is not None and counter.count(r["text"]) != r["tokens"]:
        report.add("cpt_tokens", "CPT token counts differ from a recount", r["sample_id"])
    if r["loss_tokens"] > r["tokens"]:
        report.add("loss_spans", "CPT rows with more loss tokens than tokens", r["sample_id"])


class PoolRows:
    """What the pool rows say, gathered in one streaming pass."""

    def __init__(self) -> None:
        self.owners: dict[str, dict[str, set[str]]] = {
            k: defaultdict(set) for k in ("trajectory_id", "source_id", "dedup_cluster")
        }
        self.pooled: dict[str, str] = {}  # trajectory id -> pool (training pools and eval)
        self.per_pool: dict[str, dict[str, Any]] = {}
        self.rl_ground_truth: dict[str, tuple[int, str]] = {}
        self.knowledge: set[str] = set()


def read_pool_rows(out: str, cfg: PoolsConfig, counter: Any, report: Report) -> PoolRows:
    seen = PoolRows()
    cap_rl, cap_sft = cfg.rl.max_prompt_tokens, cfg.sft.max_tokens
    for pool in ALL_POOLS:
        domains: Counter[str] = Counter()
        trajectories: set[str] = set()
        tokens: list[int] = []
        versions: Counter[int] = Counter()
        rl_per_traj: Counter[str] = Counter()
        for r in _stream(out, pool):
            if pool == EVAL_POOL:
                tid, group = r["id"], r["source"]["group"] or r["source"]["name"]
                cluster = tid
            else:
                tid, group, cluster = r["trajectory_id"], r["source_id"], r["dedup_cluster"]
            domains[r["domain"]] += 1
            trajectories.add(tid)
            for key, value in (("trajectory_id", tid), ("source_id", group), ("dedup_cluster", cluster)):
                seen.owners[key][value].add(pool)
            seen.pooled.setdefault(tid, pool)
            if pool == EVAL_POOL:
                continue
            versions[r["template_version"]] += 1
            if pool == "cpt":
                tokens.append(r["tokens"])
                if r["is_knowledge"]:
                    seen.knowledge.add(tid)
                elif r["template_version"] != cfg.cpt.template_version:
                    report.add(
                        "template_version", f"CPT rows not on v{cfg.cpt.template_version}", r["sample_id"]
                    )
                check_cpt_row(r, counter, report)
            elif pool == "sft":
                tokens.append(r["tokens"])
                if r["template_version"] not in cfg.sft.template_versions:
                    report.add("template_version", "SFT rows outside sft.template_versions", r["sample_id"])
                n = count_chat_tokens(counter, r["messages"]) if counter else r["tokens"]
                if n > cap_sft or n != r["tokens"]:
                    report.add(
                        "sft_token_cap",
                        f"SFT samples over {cap_sft} tokens or miscounted",
                        f"{r['sample_id']} ({n} tokens, recorded {r['tokens']})",
                    )
                check_sft_row(r, report)
            else:
                tokens.append(r["prompt_tokens"])
                rl_per_traj[tid] += 1
                seen.rl_ground_truth[tid] = (r["turn_index"], r["ground_truth"])
                if r["template_version"] != cfg.rl.template_version:
                    report.add(
                        "template_version", f"RL rows not on v{cfg.rl.template_version}", r["sample_id"]
                    )
                n = (
                    count_chat_tokens(counter, r["messages"], add_generation_prompt=True)
                    if counter
                    else r["prompt_tokens"]
                )
                if n > cap_rl or n != r["prompt_tokens"]:
                    report.add(
                        "rl_token_cap",
                        f"RL prompts over {cap_rl} tokens or miscounted",
                        f"{r['sample_id']} ({n} tokens, recorded {r['prompt_tokens']})",
                    )
                check_rl_row(r, report)
        for tid, n in rl_per_traj.items():
            if n > 1:
                report.add("rl_one_turn", "RL trajectories with more than one row", tid)
        if pool == "sft":
            why = spread_violation(versions, cfg.sft.template_versions)
            if why:
                report.add("template_spread", f"SFT template versions are not drawn uniformly: {why}")
        seen.per_pool[pool] = {
            "samples": sum(domains.values()),
            "trajectories": len(trajectories),
            "samples_per_domain": dict(sorted(domains.items())),
            "tokens": _token_stats(tokens) if pool != EVAL_POOL else {"count": 0},
        }
    for key, table in seen.owners.items():
        for value, pools in sorted(table.items()):
            if len(pools) > 1:
                report.add(
                    f"disjoint_{key}",
                    f"{key} values in more than one pool",
                    f"{value} ({', '.join(sorted(pools))})",
                )
    return seen


def check_stats(manifest: dict[str, Any], seen: PoolRows, report: Report) -> None:
    stats = manifest.get("stats", {})
    for pool in ALL_POOLS:
        recorded = manifest["pools"].get(pool, {})
        actual = seen.per_pool[pool]
        for key in ("samples", "trajectories", "samples_per_domain", "tokens"):
            if recorded.get(key) != actual[key]:
                report.add(
                    "stats",
                    "manifest statistics differ from the rows",
                    f"{pool}.{key}: manifest {recorded.get(key)} != rows {actual[key]}",
                )
        # Identical copies of one record (read twice) are counted per copy and collapsed when written.
        collapsed = stats.get(f"collapsed_copies.{pool}", 0)
        samples = stats.get(f"samples.{pool}", 0) - collapsed
        if pool in POOLS and samples != actual["samples"]:
            report.add(
                "stats",
                "build counters differ from the rows",
                f"samples.{pool}: {samples} != {actual['samples']}",
            )
        pooled = stats.get(f"pooled.{pool}", 0) - (collapsed if pool != "sft" else 0)
        if pooled != actual["trajectories"] and not (pool == "sft" and collapsed):
            report.add(
                "stats",
                "build counters differ from the rows",
                f"pooled.{pool}: {pooled} != {actual['trajectories']}",
            )


def check_assignments(out: str, seen: PoolRows, report: Report) -> None:
    assigned: dict[str, str] = {}
    for a in _stream(out, ASSIGNMENTS, ["trajectory_id", "pool"]):
        assigned[a["trajectory_id"]] = a["pool"]
    for tid, pool in seen.pooled.items():
        if assigned.get(tid) != pool:
            report.add(
                "lineage",
                "pool rows whose assignment names another pool",
                f"{tid}: {pool} row, assigned {assigned.get(tid)}",
            )
    for tid, pool in sorted(assigned.items()):
        if tid not in seen.pooled:
            report.add("lineage", "assignments without pool rows", f"{tid}: assigned {pool}")
            # What the assignment claims is checked like a pooled record.
            seen.pooled[tid] = pool


def pooled_trajectories(
    manifest: dict[str, Any], cfg: PoolsConfig, pooled: dict[str, str], report: Report
) -> Iterator[Trajectory]:
    """The pooled trajectories, re-read from the manifest's inputs and filtered as the build does."""
    found: set[str] = set()
    for item in manifest.get("inputs", []):
        path = item["path"]
        if not fs.exists(path):
            report.add(
                "input_missing", "inputs the pools were built from are missing: nothing can be proven", path
            )
            continue
        try:
            for _, records in iter_input_records(path, batch_size=BATCH_ROWS):
                for rec in records:
                    rid = rec.get("id")
                    if rid not in pooled or rid in found:
                        continue
                    traj, _, _ = validate_record(rec)
                    outcome = apply_filters(traj, cfg.filters) if traj else None
                    if outcome is None or outcome.trajectory is None:
                        report.add("lineage", "pooled records that the filters remove", rid)
                        continue
                    found.add(rid)
                    yield outcome.trajectory
        except ShardError as exc:
            report.add("input_missing", "inputs the pools were built from cannot be read", f"{path}: {exc}")
    if not any(k == "input_missing" for k, _ in report.found):
        for tid in sorted(t for t in pooled if t not in found):
            report.add("lineage", "pooled trajectories not found in any input", tid)


def verify_pools(
    out: str | os.PathLike[str], cfg: PoolsConfig, *, recount_tokens: bool = True, check_inputs: bool = True
) -> list[Violation]:
    """All violations found in OUT, local or on any Beam filesystem (empty list: the pools are proven
    disjoint and rule-abiding)."""
    out = os.fspath(out)
    report = Report()
    manifest_path = fs.join(out, "manifest.json")
    if not fs.is_file(manifest_path):
        return [Violation("manifest", f"{manifest_path} is missing; run `worldline pools build` first", [])]
    manifest = fs.read_json(manifest_path)
    check_checksums(out, manifest, report)
    counter = None
    if recount_tokens:
        from worldline.tokenizer import get_token_counter

        recorded = (manifest.get("tokenizer") or {}).get("name")
        if not recorded:
            report.add("tokenizer", "the manifest does not record the tokenizer the caps were counted with")
        counter = get_token_counter(recorded or cfg.tokenizer)
    seen = read_pool_rows(out, cfg, counter, report)
    check_stats(manifest, seen, report)
    check_assignments(out, seen, report)
    if check_inputs:
        check_content(out, manifest, cfg, seen, report)
    return report.violations()


def check_content(
    out: str, manifest: dict[str, Any], cfg: PoolsConfig, seen: PoolRows, report: Report
) -> None:
    """Duplicates and evaluation overlap, recomputed from the inputs and the evaluation sets."""
    evals = list(manifest.get("evaluation_sets", []))
    for path in [*evals, *manifest.get("knowledge", [])]:
        if not fs.exists(path):
            report.add(
                "input_missing", "inputs the pools were built from are missing: nothing can be proven", path
            )
    present = [p for p in evals if fs.exists(p)]
    matcher = EvalTurnMatcher(cfg, read_eval_turns(present, cfg), None, read_eval_ngrams(present, cfg))
    # The eval pool's own turns, from its rows (full trajectories).
    pool_index = ContainmentIndex(cfg.decontamination.containment)
    for r in _stream(out, EVAL_POOL):
        for key, pool_grams in eval_pool_grams(Trajectory.from_record(r), cfg):
            pool_index.add(key, pool_grams)
    d = cfg.dedup
    dedup = NearDuplicateIndex(d.threshold, d.num_perm)
    exact: dict[str, str] = {}

    def check_record(rid: str, pool: str, text: str, grams: list[np.ndarray], near: str) -> None:
        key = exact_key(text)
        if key in exact:
            report.add("exact_duplicates", "pooled records with identical content", f"{exact[key]}={rid}")
        exact.setdefault(key, rid)
        sig = signatures([text], num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)[0]
        for other in dedup.query(sig):
            report.add("near_duplicates", "pooled records that near-duplicate each other", f"{other}~{rid}")
        dedup.add(rid, sig)
        if pool == EVAL_POOL:
            return
        if near:
            report.add("eval_overlap", "pooled records overlapping an evaluation set", f"{rid}~{near}")
        for g in grams:
            inside = pool_index.contained_in(g)
            if inside:
                report.add(
                    "eval_pool_overlap", "training records containing eval-pool text", f"{rid}~{inside}"
                )
                break

    for traj in pooled_trajectories(
        manifest, cfg, {t: p for t, p in seen.pooled.items() if t not in seen.knowledge}, report
    ):
        pool = seen.pooled[traj.id]
        truth = seen.rl_ground_truth.get(traj.id)
        if truth and (truth[0] > len(traj.turns) or traj.turns[truth[0] - 1].observation.text != truth[1]):
            report.add("lineage", "RL ground truths that are not the trajectory's observation", traj.id)
        near = matcher.match_trajectory(traj) if pool != EVAL_POOL else ""
        grams = training_grams(traj, cfg) if len(pool_index) and pool != EVAL_POOL else []
        check_record(traj.id, pool, trajectory_text(traj, cfg), grams, near)
    found_docs: set[str] = set()
    for path in manifest.get("knowledge", []):
        if not fs.exists(path):
            continue
        for f in knowledge_files(path):
            for doc in read_knowledge_file(f):
                if doc.id not in seen.knowledge or doc.id in found_docs:
                    continue
                found_docs.add(doc.id)
                text = normalise(doc.text, d.fold_digits_observations)
                grams = [text_grams(normalise(doc.text), cfg.decontamination.ngram_words, 0)]
                check_record(doc.id, "cpt", text, grams, matcher.match_text(normalise(doc.text)))
    if not any(k == "input_missing" for k, _ in report.found):
        for doc_id in sorted(seen.knowledge - found_docs):
            report.add("lineage", "pooled knowledge documents not found in any corpus", doc_id)
