# Beam's transforms carry no type annotations; calling them is the point of this module.
# mypy: disable-error-code="no-untyped-call"
"""Stage render: decide each record's fate and render its pool rows (pipelines.render).

Reads: a spilled kept file (or a batch of knowledge documents) and, as side inputs, the dedup
clusters, duplicate-id losers, contaminated ids and the group -> pool map. Writes: pool rows,
assignment rows and removed rows as sorted runs per output part ((table, shard), run file).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from pipelines.config import EVAL_POOL, PoolsConfig
from pipelines.inputs import KnowledgeDoc
from pipelines.minhash import normalise, signatures, stable_hash
from pipelines.ngrams import ContainmentIndex, text_grams
from pipelines.render import Lineage, cpt_row, knowledge_row, masked_turn_indices, rl_row, sft_rows
from pipelines.span_table import load_span_labels
from pipelines.stages.assign import record_group
from pipelines.stages.contract import Stage, tune_gc_for_bulk_work
from pipelines.stages.decontaminate import training_grams
from pipelines.stages.dedup import content_hash
from pipelines.stages.spill import ASSIGNMENTS, REMOVED, read_ipc, removed_row, spill_runs
from schemas.reasons import ReasonCode
from schemas.trajectory import Trajectory

STAGE = Stage(
    name="render",
    reads=(
        "kept file or knowledge batch",
        "clusters",
        "duplicate-id losers",
        "contaminated",
        "group -> pool",
    ),
    writes=("pool rows", "assignment rows", "removed rows (dedup, decontamination, pool_rules)"),
    counters=(
        "pooled.*",
        "samples.*",
        "sft.samples_truncated",
        "sft.samples_over_cap",
        "sft.blank_targets_skipped",
        "sft.harness_masked_targets_skipped",
        "dropped.rl_prompt_over_cap",
        "dropped.sft_over_cap",
    ),
)


class RoutePools(beam.DoFn):
    """Reads: a spilled kept file (or a batch of knowledge documents) + cluster, contamination and
    group-pool side inputs. Renders pool rows and writes them as sorted runs per output part.
    Writes: ((table, shard), run file) per part touched (removed rows included), and stats."""

    def __init__(
        self, cfg: PoolsConfig, shards: dict[str, int], work: str, span_label_files: list[str] | None = None
    ) -> None:
        self.cfg = cfg
        self.shards = shards
        self.work = work
        self.span_label_files = list(span_label_files or [])

    def setup(self) -> None:
        from schemas.templates import load_template_set
        from worldline.tokenizer import get_token_counter

        self.templates = load_template_set(self.cfg.templates_dir)
        self.counter = get_token_counter(self.cfg.tokenizer)
        self.labels = load_span_labels(self.span_label_files)
        self._pool_index: ContainmentIndex | None = None
        tune_gc_for_bulk_work()  # after loading: the vocabulary and templates are frozen with the rest

    def eval_pool_overlap(self, item: Any) -> str:
        """The eval-pool trajectory (and which of its turns) a training record contains, or ""."""
        if self._pool_index is None or not len(self._pool_index):
            return ""
        n = self.cfg.decontamination.ngram_words
        if isinstance(item, KnowledgeDoc):
            grams = [text_grams(normalise(item.text), n, 0)]
        else:
            grams = training_grams(item, self.cfg)
        for g in grams:
            key = self._pool_index.contained_in(g)
            if key:
                return key
        return ""

    def _lineage_fate(
        self,
        rid: str,
        content: str,
        group: str,
        kind: str,
        clusters: dict[str, tuple[str, bool]],
        losers: set[tuple[str, str]],
        contaminated: dict[str, str],
        group_pool: dict[str, str],
    ) -> tuple[str | None, str, str, Lineage | None]:
        """(pool or None, stage, reason/detail, lineage) of one record, in the documented order."""
        if (rid, content) in losers:
            return None, "dedup", ReasonCode.DUPLICATE_ID.value, None
        if rid in contaminated:
            return None, "decontamination", f"overlaps evaluation sample {contaminated[rid]}", None
        rep, same_exact = clusters.get(rid, (rid, True))
        if rep != rid:
            code = ReasonCode.EXACT_DUPLICATE if same_exact else ReasonCode.NEAR_DUPLICATE
            return None, "dedup", f"{code} of {rep}", None
        return group_pool[group], "", "", Lineage(source_id=group, source_kind=kind, dedup_cluster=rep)

    def _records(self, element: Any) -> tuple[str, Iterator[tuple[Any, str, list[int]]]]:
        """(run tag, (record, content hash, signature) ...) of a kept file or a document batch."""
        if isinstance(element, list):
            d = self.cfg.dedup
            texts = [normalise(doc.text, d.fold_digits_observations) for doc in element]
            sigs = signatures(texts, num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)
            tag = f"docs-{stable_hash(*(doc.id for doc in element)):016x}"
            return tag, iter(
                (doc, content_hash(doc.to_json()), sig) for doc, sig in zip(element, sigs, strict=True)
            )
        table = read_ipc(element)
        contents = table.column("_content").to_pylist()
        sigs = table.column("_signature").to_pylist()
        records = table.drop_columns(["_content", "_signature"]).to_pylist()
        tag = element.rsplit("/", 1)[1].removesuffix(".arrow")
        return tag, (
            (Trajectory.from_record(r), c, s) for r, c, s in zip(records, contents, sigs, strict=True)
        )

    def process(
        self,
        element: Any,
        clusters: dict[str, tuple[str, bool]],
        losers_list: list[tuple[str, str]],
        contaminated_list: list[tuple[str, str]],
        group_pool: dict[str, str],
        eval_pool_grams: list[tuple[str, list[int]]] | None = None,
    ) -> Iterator[Any]:
        if self._pool_index is None:  # the side input is the same for the whole job: index it once
            self._pool_index = ContainmentIndex.of(
                self.cfg.decontamination.containment, eval_pool_grams or []
            )
        losers = set(losers_list)
        contaminated = dict(contaminated_list)
        out: dict[tuple[str, int], list[dict[str, Any]]] = {}
        stats: Counter[str] = Counter()
        tag, records = self._records(element)
        for item, content, signature in records:
            is_doc = isinstance(item, KnowledgeDoc)
            if is_doc:
                rid, group, kind, domain, nturns = item.id, item.group, "knowledge", "knowledge", 1
            else:
                rid, kind = item.id, item.source.kind.value
                group, _ = record_group(item.source, item.task, item.id, self.cfg.assignment.group_by)
                domain, nturns = item.domain.value, len(item.turns)
            pool, stage, reason, lineage = self._lineage_fate(
                rid, content, group, kind, clusters, losers, contaminated, group_pool
            )
            if pool is not None and pool != EVAL_POOL:
                inside = self.eval_pool_overlap(item)
                if inside:
                    pool, stage, lineage = None, "decontamination", None
                    reason = f"{ReasonCode.EVAL_POOL_OVERLAP}: contains eval-pool text {inside}"
            if pool is None or lineage is None:
                code = reason.split(" ")[0] if stage == "dedup" else ReasonCode.EVAL_OVERLAP.value
                if reason.startswith(ReasonCode.EVAL_POOL_OVERLAP):
                    code = ReasonCode.EVAL_POOL_OVERLAP.value
                stats[f"dropped.{code}"] += 1
                out.setdefault((REMOVED, 0), []).append(removed_row(rid, "", stage, code, reason))
                continue
            if is_doc:
                if pool != "cpt":
                    raise ValueError(
                        f"knowledge document {rid}: assigned to {pool}; knowledge goes to cpt only"
                    )
                rows = [knowledge_row(item.to_json(), lineage, self.counter)]
            elif pool == "cpt":
                rows = [cpt_row(item, lineage, self.cfg, self.templates, self.counter, self.labels)]
            elif pool == "sft":
                rows, skipped = sft_rows(item, lineage, self.cfg, self.templates, self.counter)
                truncated = sum(1 for r in rows if r["truncated"])
                if truncated:
                    stats["sft.samples_truncated"] += truncated
                masked = masked_turn_indices(item, self.cfg)
                harness = sum(1 for t in skipped if t in masked)
                if harness:
                    stats["sft.harness_masked_targets_skipped"] += harness
                blank = sum(
                    1 for t in skipped if t not in masked and not item.turns[t - 1].observation.text.strip()
                )
                if blank:
                    stats["sft.blank_targets_skipped"] += blank
                if len(skipped) > blank + harness:
                    stats["sft.samples_over_cap"] += len(skipped) - blank - harness
                if not rows:
                    stats["dropped.sft_over_cap"] += 1
                    out.setdefault((REMOVED, 0), []).append(
                        removed_row(
                            rid,
                            "",
                            "pool_rules",
                            ReasonCode.SFT_OVER_CAP.value,
                            f"no turn fits sft.max_tokens {self.cfg.sft.max_tokens} with a non-empty target "
                            "(turns with a blank observation are never targets)",
                        )
                    )
                    continue
            elif pool == "rl":
                row, tokens = rl_row(item, lineage, self.cfg, self.templates, self.counter, self.labels)
                if row is None:
                    stats["dropped.rl_prompt_over_cap"] += 1
                    out.setdefault((REMOVED, 0), []).append(
                        removed_row(
                            rid,
                            "",
                            "pool_rules",
                            ReasonCode.RL_PROMPT_OVER_CAP.value,
                            f"RL prompt has {tokens} tokens > rl.max_prompt_tokens {self.cfg.rl.max_prompt_tokens}",
                        )
                    )
                    continue
                rows = [row]
            else:
                rows = [item.to_record()]
            stats[f"pooled.{pool}"] += 1
            stats[f"samples.{pool}"] += len(rows)
            key_field = "id" if pool == EVAL_POOL else "sample_id"
            for row in rows:
                out.setdefault((pool, stable_hash(row[key_field]) % self.shards[pool]), []).append(row)
            out.setdefault((ASSIGNMENTS, stable_hash(rid) % self.shards[ASSIGNMENTS]), []).append(
                {
                    "trajectory_id": rid,
                    "pool": pool,
                    "source_id": group,
                    "source_kind": kind,
                    "domain": domain,
                    "dedup_cluster": lineage.dedup_cluster,
                    "num_turns": nturns,
                    "signature": signature,
                }
            )
        yield from (beam.pvalue.TaggedOutput("stats", s) for s in stats.items())
        yield from spill_runs(out, self.work, f"{tag}-route")
