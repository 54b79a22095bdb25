"""The checks of `pools verify`, shared by the local run (`pipelines.verify`) and the Beam job
(`pipelines.verify_beam`), which both import them from here.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from pipelines import fs
from pipelines.benchmarks_exclusion import ExclusionMatcher
from pipelines.config import ALL_POOLS, EVAL_POOL, POOLS, PoolsConfig
from pipelines.filters import apply_filters, validate_record
from pipelines.inputs import (
    KnowledgeDoc,
    input_parts,
    knowledge_files,
    open_part,
    read_eval_ngrams,
    read_eval_turns,
    read_knowledge_file,
)
from pipelines.minhash import ExactNearDuplicateIndex, exact_key, normalise, signatures
from pipelines.ngrams import ContainmentIndex, text_grams
from pipelines.stages.decontaminate import EvalGrams, EvalTurnMatcher, eval_pool_grams, training_grams
from pipelines.stages.dedup import trajectory_text
from schemas.shards import ShardError
from schemas.trajectory import Trajectory
from schemas.worldmodel import (
    OBSERVATION_MARKER,
    PREDICTION_CLOSE,
    PREDICTION_OPEN,
    evaluator_roles,
    turn_heading,
)
from worldline.chat_template import count_chat_tokens

BATCH_ROWS = 512


@dataclass(slots=True)
class Violation:
    check: str
    detail: str
    rows: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "detail": self.detail, "rows": self.rows[:50], "count": len(self.rows)}


def pool_part_files(out: str, name: str) -> list[str]:
    return fs.list_files(fs.join(out, name), "part-*.parquet", recursive=False)


def _stream(out: str, name: str, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The rows of one table, batch by batch (bounded memory)."""
    for f in pool_part_files(out, name):
        with fs.open_read(f) as fh:
            for batch in pq.ParquetFile(fh).iter_batches(batch_size=BATCH_ROWS, columns=columns):
                yield from batch.to_pylist()


Entry = tuple[str, str, str | None]
"""One finding: (check, detail, offending row or None)."""


class Report:
    """Collects violations by check; the same findings give the same report whatever their order
    (checks and details sorted, rows sorted), so the in-process and the Beam verify compare equal."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str], list[str]] = {}

    def add(self, check: str, detail: str, row: str | None = None) -> None:
        rows = self.found.setdefault((check, detail), [])
        if row is not None:
            rows.append(row)

    def extend(self, entries: list[Entry]) -> None:
        for check, detail, row in entries:
            self.add(check, detail, row)

    def entries(self) -> list[Entry]:
        out: list[Entry] = []
        for (check, detail), rows in self.found.items():
            out += [(check, detail, r) for r in rows] if rows else [(check, detail, None)]
        return out

    def has(self, check: str) -> bool:
        return any(c == check for c, _ in self.found)

    def violations(self) -> list[Violation]:
        return [Violation(c, d, sorted(rows)) for (c, d), rows in sorted(self.found.items())]


def check_part_checksum(out: str, pool: str, entry: dict[str, Any], report: Report) -> None:
    path = fs.join(out, entry["path"])
    if not fs.is_file(path) or fs.sha256(path) != entry["sha256"]:
        report.add("checksum", f"{pool}: part changed or missing since the build", entry["path"])


def check_unlisted_parts(out: str, manifest: dict[str, Any], report: Report) -> None:
    for pool, info in manifest["pools"].items():
        listed = {f["path"] for f in info["files"]}
        for p in pool_part_files(out, pool):
            if fs.relative(p, out) not in listed:
                report.add("checksum", f"{pool}: parts not in the manifest", fs.relative(p, out))


def check_checksums(out: str, manifest: dict[str, Any], report: Report) -> None:
    for pool, info in manifest["pools"].items():
        for f in info["files"]:
            check_part_checksum(out, pool, f, report)
    check_unlisted_parts(out, manifest, report)


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
    if roles != evaluator_roles(pairs, answered=True):
        report.add("conversation_shape", "SFT rows not in the evaluator's conversation shape", r["sample_id"])
    elif not msgs[-2]["content"].startswith(turn_heading(t)) or any(
        not m["content"].startswith(OBSERVATION_MARKER) for m in msgs[2:-2:2]
    ):
        report.add("conversation_shape", "SFT history turns not in AgentWorldBench's layout", r["sample_id"])
    target = msgs[-1]["content"] if msgs else ""
    block = target[target.rfind(PREDICTION_OPEN) :] if PREDICTION_OPEN in target else ""
    body = block[len(PREDICTION_OPEN) : -len(PREDICTION_CLOSE)] if block.endswith(PREDICTION_CLOSE) else ""
    if not body.strip():
        report.add("sft_target", "SFT targets empty or without their closing tag", r["sample_id"])


def check_rl_row(r: dict[str, Any], report: Report) -> None:
    roles = [m["role"] for m in r["messages"]]
    t = r["turn_index"]
    if roles != evaluator_roles(t - 1) or not 1 <= t <= r["num_turns"]:
        report.add(
            "conversation_shape", "RL prompts not in the evaluator's conversation shape", r["sample_id"]
        )
    elif not r["messages"][-1]["content"].startswith(turn_heading(t)):
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


@dataclass(slots=True)
class PartFacts:
    """What the rows of one pool part say (merged over all parts by `merge_pool_rows`)."""

    pool: str
    domains: Counter[str]
    trajectories: set[str]
    tokens: list[int]
    versions: Counter[int]
    rl_per_traj: Counter[str]
    owners: set[tuple[str, str]]
    """(column, value) of the part's rows: trajectory_id, source_id and dedup_cluster."""
    pooled: set[str]
    rl_ground_truth: dict[str, tuple[int, str]]
    knowledge: set[str]


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


def check_part_rows(path: str, pool: str, cfg: PoolsConfig, counter: Any, report: Report) -> PartFacts:
    """Check every row of one pool part (caps recounted, targets, shape, spans, templates) and
    gather what the cross-part checks need."""
    facts = PartFacts(pool, Counter(), set(), [], Counter(), Counter(), set(), set(), {}, set())
    cap_rl, cap_sft = cfg.rl.max_prompt_tokens, cfg.sft.max_tokens
    with fs.open_read(path) as fh:
        batches = pq.ParquetFile(fh).iter_batches(batch_size=BATCH_ROWS)
        for r in (row for batch in batches for row in batch.to_pylist()):
            if pool == EVAL_POOL:
                tid, group = r["id"], r["source"]["group"] or r["source"]["name"]
                cluster = tid
            else:
                tid, group, cluster = r["trajectory_id"], r["source_id"], r["dedup_cluster"]
            facts.domains[r["domain"]] += 1
            facts.trajectories.add(tid)
            facts.owners.update((("trajectory_id", tid), ("source_id", group), ("dedup_cluster", cluster)))
            facts.pooled.add(tid)
            if pool == EVAL_POOL:
                continue
            facts.versions[r["template_version"]] += 1
            if pool == "cpt":
                facts.tokens.append(r["tokens"])
                if r["is_knowledge"]:
                    facts.knowledge.add(tid)
                elif r["template_version"] != cfg.cpt.template_version:
                    report.add(
                        "template_version", f"CPT rows not on v{cfg.cpt.template_version}", r["sample_id"]
                    )
                check_cpt_row(r, counter, report)
            elif pool == "sft":
                facts.tokens.append(r["tokens"])
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
                facts.tokens.append(r["prompt_tokens"])
                facts.rl_per_traj[tid] += 1
                facts.rl_ground_truth[tid] = (r["turn_index"], r["ground_truth"])
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
    return facts


def merge_pool_rows(parts: list[tuple[str, PartFacts]], cfg: PoolsConfig, report: Report) -> PoolRows:
    """The checks across parts and pools (one RL row per trajectory, template spread, disjoint ids,
    groups and clusters) over every part's facts, given as (part path, facts) in any order."""
    seen = PoolRows()
    order = {pool: i for i, pool in enumerate(ALL_POOLS)}
    ordered = sorted(parts, key=lambda pf: (order[pf[1].pool], pf[0]))
    for pool in ALL_POOLS:
        mine = [f for _, f in ordered if f.pool == pool]
        domains: Counter[str] = sum((f.domains for f in mine), Counter())
        versions: Counter[int] = sum((f.versions for f in mine), Counter())
        rl_per_traj: Counter[str] = sum((f.rl_per_traj for f in mine), Counter())
        trajectories: set[str] = set().union(*(f.trajectories for f in mine))
        tokens = [t for f in mine for t in f.tokens]
        for f in mine:
            for key, value in f.owners:
                seen.owners[key][value].add(pool)
            for tid in f.pooled:
                seen.pooled.setdefault(tid, pool)
            seen.rl_ground_truth.update(f.rl_ground_truth)
            seen.knowledge |= f.knowledge
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


def read_pool_rows(out: str, cfg: PoolsConfig, counter: Any, report: Report) -> PoolRows:
    parts = [
        (f, check_part_rows(f, pool, cfg, counter, report))
        for pool in ALL_POOLS
        for f in pool_part_files(out, pool)
    ]
    return merge_pool_rows(parts, cfg, report)


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


def check_assignments(assigned: list[tuple[str, str]], seen: PoolRows, report: Report) -> None:
    """Rows and assignments agree; an assignment without rows is checked like a pooled record."""
    by_id: dict[str, str] = dict(assigned)
    for tid, pool in seen.pooled.items():
        if by_id.get(tid) != pool:
            report.add(
                "lineage",
                "pool rows whose assignment names another pool",
                f"{tid}: {pool} row, assigned {by_id.get(tid)}",
            )
    for tid, pool in sorted(by_id.items()):
        if tid not in seen.pooled:
            report.add("lineage", "assignments without pool rows", f"{tid}: assigned {pool}")
            seen.pooled[tid] = pool


def assignment_pairs(path: str) -> list[tuple[str, str]]:
    """(trajectory id, pool) of every row of one assignments part."""
    with fs.open_read(path) as fh:
        t = pq.read_table(fh, columns=["trajectory_id", "pool"])
    return list(zip(t.column("trajectory_id").to_pylist(), t.column("pool").to_pylist(), strict=True))


@dataclass(slots=True)
class RecordFacts:
    """One pooled record re-read from its input: its content keys and what it overlaps."""

    rid: str
    pool: str
    exact: str
    signature: list[int]
    entries: list[Entry]
    text: str = ""  # the normalised text fingerprinted: near duplicates are decided on its shingles


class ContentChecker:
    """Evaluation overlap and lineage of one pooled record, recomputed from its content."""

    def __init__(self, cfg: PoolsConfig, eval_inputs: EvalInputs, pool_grams: EvalGrams) -> None:
        self.cfg = cfg
        eval_turns, eval_grams = eval_inputs
        self.matcher = EvalTurnMatcher(cfg, eval_turns, None, eval_grams)
        self.held_out = ExclusionMatcher(cfg.decontamination.exclude_benchmarks)
        self.pool_index = ContainmentIndex(cfg.decontamination.containment)
        for key, grams in pool_grams:
            self.pool_index.add(key, grams)

    def facts(self, rid: str, pool: str, text: str, grams: list[np.ndarray], near: str) -> RecordFacts:
        d = self.cfg.dedup
        sig = signatures([text], num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)[0]
        facts = RecordFacts(rid, pool, exact_key(text), list(sig), [], text)
        if pool == EVAL_POOL:
            return facts
        if near:
            facts.entries.append(
                ("eval_overlap", "pooled records overlapping an evaluation set", f"{rid}~{near}")
            )
        for g in grams:
            inside = self.pool_index.contained_in(g)
            if inside:
                facts.entries.append(
                    ("eval_pool_overlap", "training records containing eval-pool text", f"{rid}~{inside}")
                )
                break
        return facts

    def trajectory(self, traj: Trajectory, pool: str, truth: tuple[int, str] | None) -> RecordFacts:
        cfg = self.cfg
        near = self.matcher.match_trajectory(traj) if pool != EVAL_POOL else ""
        grams = training_grams(traj, cfg) if len(self.pool_index) and pool != EVAL_POOL else []
        facts = self.facts(traj.id, pool, trajectory_text(traj, cfg), grams, near)
        benchmark = self.held_out.match(traj)  # every pool, eval included: excluded at the source
        if benchmark is not None:
            facts.entries.append(
                (
                    "held_out_benchmark",
                    "pooled trajectories from a benchmark the manifest excludes",
                    f"{traj.id}: {benchmark[0]} ({benchmark[1]})",
                )
            )
        if truth and (truth[0] > len(traj.turns) or traj.turns[truth[0] - 1].observation.text != truth[1]):
            facts.entries.append(
                ("lineage", "RL ground truths that are not the trajectory's observation", traj.id)
            )
        return facts

    def document(self, doc: KnowledgeDoc) -> RecordFacts:
        text = normalise(doc.text, self.cfg.dedup.fold_digits_observations)
        grams = [text_grams(normalise(doc.text), self.cfg.decontamination.ngram_words, 0)]
        return self.facts(doc.id, "cpt", text, grams, self.matcher.match_text(normalise(doc.text)))


EvalInputs = tuple[list[tuple[str, int, list[int]]], EvalGrams]


def eval_inputs(manifest: dict[str, Any], cfg: PoolsConfig, report: Report) -> EvalInputs:
    """The evaluation sets' turn signatures and n-grams; a missing set (or knowledge corpus) is a
    violation."""
    evals = list(manifest.get("evaluation_sets", []))
    for path in [*evals, *manifest.get("knowledge", [])]:
        if not fs.exists(path):
            report.add(
                "input_missing", "inputs the pools were built from are missing: nothing can be proven", path
            )
    present = [p for p in evals if fs.exists(p)]
    return read_eval_turns(present, cfg), read_eval_ngrams(present, cfg)


def eval_part_grams(path: str, cfg: PoolsConfig) -> EvalGrams:
    """The n-grams of every turn and task of one eval-pool part (training rows must not contain them)."""
    out: EvalGrams = []
    with fs.open_read(path) as fh:
        for batch in pq.ParquetFile(fh).iter_batches(batch_size=BATCH_ROWS):
            for r in batch.to_pylist():
                out += eval_pool_grams(Trajectory.from_record(r), cfg)
    return out


def input_record_parts(manifest: dict[str, Any], report: Report) -> list[tuple[str, str]]:
    """(input, part file) of every input the manifest names, in order; a missing or unreadable
    input is a violation, never a skip."""
    parts: list[tuple[str, str]] = []
    for item in manifest.get("inputs", []):
        path = item["path"]
        if not fs.exists(path):
            report.add(
                "input_missing", "inputs the pools were built from are missing: nothing can be proven", path
            )
            continue
        try:
            parts += [(path, f) for f in input_parts(path)]
        except ShardError as exc:
            report.add("input_missing", "inputs the pools were built from cannot be read", f"{path}: {exc}")
    return parts


FILTERED = "filtered"


def part_occurrences(
    item: str, part: str, cfg: PoolsConfig, pooled: dict[str, str], report: Report
) -> Iterator[tuple[str, int, Trajectory | None]]:
    """(id, row, trajectory or None when the filters remove it) of every pooled record in one input
    part, in row order, validated, filtered and canonicalised as the build does."""
    try:
        row = 0
        for records in (b.to_pylist() for b in open_part(part).iter_batches(batch_size=BATCH_ROWS)):
            for rec in records:
                row += 1
                rid = rec.get("id")
                if rid not in pooled:
                    continue
                traj, _, _ = validate_record(rec)
                outcome = apply_filters(traj, cfg.filters) if traj else None
                yield rid, row, outcome.trajectory if outcome is not None else None
    except ShardError as exc:
        report.add("input_missing", "inputs the pools were built from cannot be read", f"{item}: {exc}")


def filtered_entry(rid: str) -> Entry:
    return ("lineage", "pooled records that the filters remove", rid)


def knowledge_parts(manifest: dict[str, Any]) -> list[str]:
    return [f for path in manifest.get("knowledge", []) if fs.exists(path) for f in knowledge_files(path)]


def duplicate_entries(records: Iterable[RecordFacts], cfg: PoolsConfig) -> list[Entry]:
    """Exact and near duplicates among the pooled records, in one pool or across pools (every pair
    of cpt, sft, rl and eval): exact content keys equal, or, as the build decides, exact shingle-set
    Jaccard >= the dedup threshold for candidates from the build's LSH bands. Pairs are named in
    sorted order."""
    d = cfg.dedup
    index = ExactNearDuplicateIndex(d.threshold, d.num_perm, d.shingle_words)
    exact: dict[str, list[str]] = defaultdict(list)
    pairs: set[tuple[str, str]] = set()
    for f in records:
        exact[f.exact].append(f.rid)
        for other in index.query(f.signature, f.text):
            pairs.add((min(other, f.rid), max(other, f.rid)))
        index.add(f.rid, f.signature, f.text)
    return [e for ids in exact.values() for e in exact_entries(ids)] + [near_entry(a, b) for a, b in pairs]


def exact_entries(ids: list[str]) -> list[Entry]:
    first, *rest = sorted(ids)
    return [("exact_duplicates", "pooled records with identical content", f"{first}={o}") for o in rest]


def near_entry(a: str, b: str) -> Entry:
    return ("near_duplicates", "pooled records that near-duplicate each other", f"{a}~{b}")


def not_found_entries(
    seen: PoolRows, found: set[str], found_docs: set[str], missing_inputs: bool
) -> list[Entry]:
    """Pooled records that no input holds (only provable when every input could be read)."""
    if missing_inputs:
        return []
    out: list[Entry] = []
    for tid in sorted(t for t in seen.pooled if t not in seen.knowledge and t not in found):
        out.append(("lineage", "pooled trajectories not found in any input", tid))
    for doc_id in sorted(seen.knowledge - found_docs):
        out.append(("lineage", "pooled knowledge documents not found in any corpus", doc_id))
    return out


def check_content(
    out: str, manifest: dict[str, Any], cfg: PoolsConfig, seen: PoolRows, report: Report
) -> None:
    """Duplicates and evaluation overlap, recomputed from the inputs and the evaluation sets."""
    checker = ContentChecker(
        cfg,
        eval_inputs(manifest, cfg, report),
        [g for f in pool_part_files(out, EVAL_POOL) for g in eval_part_grams(f, cfg)],
    )
    pooled = {t: p for t, p in seen.pooled.items() if t not in seen.knowledge}
    found: set[str] = set()
    found_docs: set[str] = set()

    def records() -> Iterator[RecordFacts]:
        """Every pooled record once (its first kept occurrence), streamed into the duplicate index."""
        for item, part in input_record_parts(manifest, report):
            for rid, _, traj in part_occurrences(item, part, cfg, pooled, report):
                if rid in found:
                    continue
                if traj is None:
                    report.add(*filtered_entry(rid))
                    continue
                found.add(rid)
                facts = checker.trajectory(traj, seen.pooled[rid], seen.rl_ground_truth.get(rid))
                report.extend(facts.entries)
                yield facts
        for f in knowledge_parts(manifest):
            for doc in read_knowledge_file(f):
                if doc.id not in seen.knowledge or doc.id in found_docs:
                    continue
                found_docs.add(doc.id)
                facts = checker.document(doc)
                report.extend(facts.entries)
                yield facts

    report.extend(duplicate_entries(records(), cfg))
    report.extend(not_found_entries(seen, found, found_docs, report.has("input_missing")))
