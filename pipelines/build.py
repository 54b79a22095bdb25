# Beam's transforms carry no type annotations; calling them is the point of this module.
# mypy: disable-error-code="no-untyped-call"
"""The pool-building Beam job: validate -> filter -> fingerprint -> dedup + decontaminate -> assign -> render.

Elements are Arrow record batches wherever a stage reads or writes whole trajectories (reading,
filtering, fingerprinting, routing); only small fingerprints travel one per record, through the
two shuffles that need a global view (LSH bands and source groups). Every choice is a seeded hash
of ids, and every written part is sorted by its key, so the default runner, the multi-process
runner and Dataflow/Flink/Spark write identical pools.
"""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import combiners

from pipelines import filters as flt
from pipelines.config import EVAL_POOL, PoolsConfig
from pipelines.inputs import KnowledgeDoc, read_eval_turns, read_knowledge_file
from pipelines.minhash import (
    NearDuplicateIndex,
    band_keys,
    estimated_jaccard,
    exact_key,
    lsh_bands,
    normalise,
    signatures,
    stable_hash,
    union_find_clusters,
)
from pipelines.render import Lineage, cpt_row, knowledge_row, rl_row, sft_rows
from pipelines.rows import (
    ASSIGNMENT_SCHEMA,
    EVAL_TURNS_SCHEMA,
    POOL_SCHEMAS,
    QUARANTINE_SCHEMA,
)
from schemas.shards import check_version
from schemas.trajectory import SCHEMA_METADATA_KEY, TRAJECTORY_SCHEMA, Trajectory

WORK_DIR = "_build"
REMOVED = "removed"
ASSIGNMENTS = "assignments"
SORT_KEYS: dict[str, list[str]] = {
    "cpt": ["sample_id"],
    "sft": ["sample_id"],
    "rl": ["sample_id"],
    EVAL_POOL: ["id"],
    ASSIGNMENTS: ["trajectory_id"],
    REMOVED: ["record_id", "stage", "reason", "input_file", "detail"],
}
TABLE_SCHEMAS: dict[str, pa.Schema] = {
    **POOL_SCHEMAS,
    EVAL_POOL: TRAJECTORY_SCHEMA,
    ASSIGNMENTS: ASSIGNMENT_SCHEMA,
    REMOVED: QUARANTINE_SCHEMA,
}


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What the global stages need of one record: identity, provenance, rank and MinHash signature."""

    id: str
    content: str  # hash of the full record: tells duplicate-id records apart
    kind: str
    group: str
    domain: str
    num_turns: int
    exact: str
    signature: tuple[int, ...]
    contaminated_by: str  # eval sample id whose turn it near-duplicates, "" when clean


def _join(base: str, *parts: str) -> str:
    return FileSystems.join(base, *parts)


def _read_parquet(path: str) -> pq.ParquetFile:
    return pq.ParquetFile(FileSystems.open(path))


def read_trajectory_batches(path: str, batch_rows: int) -> Iterator[tuple[str, pa.RecordBatch]]:
    """Stream one input part as record batches under the explicit schema (rows that fail are quarantined)."""
    pf = _read_parquet(path)
    version = (pf.schema_arrow.metadata or {}).get(SCHEMA_METADATA_KEY)
    if version is not None:
        check_version(version.decode("utf-8", "replace"), path)
    for batch in pf.iter_batches(batch_size=batch_rows):
        yield path, batch


def _stat(name: str, n: int = 1) -> tuple[str, int]:
    return (name, n)


def _removed(record_id: str, input_file: str, stage: str, reason: str, detail: str) -> dict[str, str]:
    return {
        "record_id": record_id,
        "input_file": input_file,
        "stage": stage,
        "reason": reason,
        "detail": detail[:2000],
    }


class FilterBatch(beam.DoFn):
    """Reads: trajectory record batches. Writes: cleaned batches (main), removed rows, stats."""

    def __init__(self, cfg: PoolsConfig) -> None:
        self.cfg = cfg

    def process(self, element: tuple[str, pa.RecordBatch]) -> Iterator[Any]:
        path, batch = element
        kept: list[dict[str, Any]] = []
        yield beam.pvalue.TaggedOutput("stats", _stat("records_in", batch.num_rows))
        for record in batch.to_pylist():
            traj, code, detail = flt.validate_record(record)
            if traj is None:
                assert code is not None
                yield beam.pvalue.TaggedOutput(
                    "removed", _removed(record.get("id") or "", path, "validation", code, detail)
                )
                yield beam.pvalue.TaggedOutput("stats", _stat(f"quarantined.{code}"))
                continue
            yield beam.pvalue.TaggedOutput("stats", _stat("turns_in", len(traj.turns)))
            outcome = flt.apply_filters(traj, self.cfg.filters)
            for reason, n in outcome.removed_turns.items():
                yield beam.pvalue.TaggedOutput("stats", _stat(f"turns_removed.{reason}", n))
            if outcome.trajectory is None:
                assert outcome.drop_reason is not None
                yield beam.pvalue.TaggedOutput(
                    "removed", _removed(traj.id, path, "filter", outcome.drop_reason, outcome.detail)
                )
                yield beam.pvalue.TaggedOutput("stats", _stat(f"dropped.{outcome.drop_reason}"))
                continue
            kept.append(outcome.trajectory.to_record())
        if kept:
            yield pa.RecordBatch.from_pylist(kept, schema=TRAJECTORY_SCHEMA)


def trajectory_text(traj: Trajectory) -> str:
    """The normalised action + observation text that near-duplicate detection compares."""
    return normalise("\n".join(f"{t.action.text}\n{t.observation.text}" for t in traj.turns))


def turn_texts(traj: Trajectory) -> list[str]:
    return [normalise(f"{t.action.text}\n{t.observation.text}") for t in traj.turns]


class EvalTurnMatcher:
    """Finds the evaluation sample (if any) whose turn a training turn near-duplicates."""

    def __init__(self, cfg: PoolsConfig, eval_turns: list[tuple[str, int, list[int]]]) -> None:
        self.cfg = cfg
        self.index = NearDuplicateIndex(cfg.decontamination.threshold, cfg.dedup.num_perm)
        for eval_id, turn_index, sig in eval_turns:
            self.index.add(f"{eval_id}#{turn_index}", sig)

    def match(self, texts: list[str]) -> str:
        if not len(self.index):
            return ""
        dc = self.cfg.decontamination
        texts = [t for t in texts if len(t.split()) >= dc.min_turn_words]
        if not texts:
            return ""
        for sig in signatures(
            texts, num_perm=self.cfg.dedup.num_perm, seed=self.cfg.dedup.seed, width=dc.shingle_words
        ):
            hits = self.index.query(sig)
            if hits:
                return hits[0].rsplit("#", 1)[0]
        return ""


class FingerprintBatch(beam.DoFn):
    """Reads: cleaned trajectory batches. Writes: one Fingerprint per trajectory."""

    def __init__(self, cfg: PoolsConfig, eval_turns: list[tuple[str, int, list[int]]]) -> None:
        self.cfg = cfg
        self.eval_turns = eval_turns

    def setup(self) -> None:
        self.matcher = EvalTurnMatcher(self.cfg, self.eval_turns)

    def process(self, batch: pa.RecordBatch) -> Iterator[Fingerprint]:
        trajs = [Trajectory.from_record(r) for r in batch.to_pylist()]
        texts = [trajectory_text(t) for t in trajs]
        d = self.cfg.dedup
        sigs = signatures(texts, num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)
        for traj, text, sig in zip(trajs, texts, sigs, strict=True):
            yield Fingerprint(
                id=traj.id,
                content=content_hash(traj.to_record()),
                kind=traj.source.kind.value,
                group=traj.source.source_group,
                domain=traj.domain.value,
                num_turns=len(traj.turns),
                exact=exact_key(text),
                signature=tuple(sig),
                contaminated_by=self.matcher.match(turn_texts(traj)),
            )


class FingerprintDocs(beam.DoFn):
    """Reads: world-knowledge documents. Writes: one Fingerprint per document."""

    def __init__(self, cfg: PoolsConfig, eval_turns: list[tuple[str, int, list[int]]]) -> None:
        self.cfg = cfg
        self.eval_turns = eval_turns

    def setup(self) -> None:
        self.matcher = EvalTurnMatcher(self.cfg, self.eval_turns)

    def process(self, doc: KnowledgeDoc) -> Iterator[Fingerprint]:
        text = normalise(doc.text)
        d = self.cfg.dedup
        sig = signatures([text], num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)[0]
        yield Fingerprint(
            doc.id,
            content_hash(doc.to_json()),
            "knowledge",
            doc.group,
            "knowledge",
            1,
            exact_key(text),
            tuple(sig),
            self.matcher.match([text]),
        )


def content_hash(record: dict[str, Any]) -> str:
    return f"{stable_hash(json.dumps(record, sort_keys=True, default=str)):016x}"


def rank_key(fp: Fingerprint, cfg: PoolsConfig) -> tuple[int, int, int, str]:
    """Cluster survivor order: source priority, then more turns, then a seeded hash of the id."""
    prio = cfg.dedup.source_priority
    p = prio.index(fp.kind) if fp.kind in prio else len(prio)
    return (p, -fp.num_turns, stable_hash("dedup", cfg.dedup.seed, fp.id), fp.id)


def bucket_edges(element: tuple[str, Iterable[Fingerprint]], cfg: PoolsConfig) -> Iterator[tuple[Any, ...]]:
    """Star edges from a band bucket's best-ranked member to every verified near-duplicate in it."""
    _, members = element
    unique = {fp.id: fp for fp in members}
    if len(unique) < 2:
        return
    ordered = sorted(unique.values(), key=lambda f: rank_key(f, cfg))
    head = ordered[0]
    for other in ordered[1:]:
        if (
            head.exact == other.exact
            or estimated_jaccard(head.signature, other.signature) >= cfg.dedup.threshold
        ):
            yield (head.id, other.id, rank_key(head, cfg), rank_key(other, cfg), head.exact, other.exact)


class ClusterEdges(beam.CombineFn):
    """Collects verified edges and resolves them into clusters: id -> (representative, exact?)."""

    def create_accumulator(self) -> list[tuple[Any, ...]]:
        return []

    def add_input(self, acc: list[tuple[Any, ...]], edge: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        acc.append(edge)
        return acc

    def merge_accumulators(self, accs: Iterable[list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
        return [e for acc in accs for e in acc]

    def extract_output(self, acc: list[tuple[Any, ...]]) -> dict[str, tuple[str, bool]]:
        rank: dict[str, Any] = {}
        exact: dict[str, str] = {}
        for a, b, ra, rb, ea, eb in acc:
            rank[a], rank[b], exact[a], exact[b] = ra, rb, ea, eb
        reps = union_find_clusters(((a, b) for a, b, *_ in acc), rank)
        return {node: (rep, exact[node] == exact[rep]) for node, rep in reps.items()}


def duplicate_id_losers(element: tuple[str, Iterable[str]]) -> Iterator[tuple[str, str]]:
    """Of several records sharing one id, the smallest content hash survives; identical copies collapse."""
    record_id, contents = element
    distinct = sorted(set(contents))
    for loser in distinct[1:]:
        yield (record_id, loser)


def group_kind_counts(fps: Iterable[Fingerprint]) -> Counter[str]:
    return Counter(fp.kind for fp in fps)


def choose_pool(weights: dict[str, float], seed: int, group: str) -> str:
    """A weighted choice by seeded hash of the source group: the whole group lands in one pool."""
    names = sorted(n for n, w in weights.items() if w > 0)
    total = sum(weights[n] for n in names)
    point = (stable_hash("pool", seed, group) % 1_000_000) / 1_000_000 * total
    acc = 0.0
    for name in names:
        acc += weights[name]
        if point < acc:
            return name
    return names[-1]


def decide_group_pool(element: tuple[str, Iterable[Fingerprint]], cfg: PoolsConfig) -> tuple[str, str]:
    """The pool of a source group from its majority source kind (ties: dedup.source_priority order)."""
    group, fps = element
    counts = Counter(fp.kind for fp in fps)
    prio = cfg.dedup.source_priority
    kind = min(counts, key=lambda k: (-counts[k], prio.index(k) if k in prio else len(prio), k))
    return group, choose_pool(cfg.assignment.rule_for(kind).pools, cfg.assignment.seed, group)


class RouteBatch(beam.DoFn):
    """Reads: cleaned batches + cluster, contamination and group-pool side inputs.
    Writes: ((table, shard), Arrow table) per output table, removed rows, stats."""

    def __init__(self, cfg: PoolsConfig, shards: int) -> None:
        self.cfg = cfg
        self.shards = shards

    def setup(self) -> None:
        from prompt_autoresearch.templates import load_template_set
        from worldline.tokenizer import get_token_counter

        self.templates = load_template_set(self.cfg.templates_dir)
        self.counter = get_token_counter(self.cfg.tokenizer)

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
            return None, "dedup", "duplicate_id", None
        if rid in contaminated:
            return None, "decontamination", f"near-duplicates evaluation sample {contaminated[rid]}", None
        rep, same_exact = clusters.get(rid, (rid, True))
        if rep != rid:
            return None, "dedup", ("exact_duplicate" if same_exact else "near_duplicate") + f" of {rep}", None
        return group_pool[group], "", "", Lineage(source_id=group, source_kind=kind, dedup_cluster=rep)

    def process(
        self,
        batch: Any,
        clusters: dict[str, tuple[str, bool]],
        losers_list: list[tuple[str, str]],
        contaminated_list: list[tuple[str, str]],
        group_pool: dict[str, str],
    ) -> Iterator[Any]:
        losers = set(losers_list)
        contaminated = dict(contaminated_list)
        out: dict[tuple[str, int], list[dict[str, Any]]] = {}
        is_docs = isinstance(batch, list)
        records: list[Any] = batch if is_docs else [Trajectory.from_record(r) for r in batch.to_pylist()]
        for item in records:
            if is_docs:
                rid, group, kind, domain, nturns = item.id, item.group, "knowledge", "knowledge", 1
                content = content_hash(item.to_json())
            else:
                rid, group, kind = item.id, item.source.source_group, item.source.kind.value
                domain, nturns, content = item.domain.value, len(item.turns), content_hash(item.to_record())
            pool, stage, reason, lineage = self._lineage_fate(
                rid, content, group, kind, clusters, losers, contaminated, group_pool
            )
            if pool is None or lineage is None:
                code = reason.split(" ")[0] if stage == "dedup" else "eval_overlap"
                yield beam.pvalue.TaggedOutput("stats", _stat(f"dropped.{code}"))
                yield beam.pvalue.TaggedOutput("removed", _removed(rid, "", stage, code, reason))
                continue
            if is_docs:
                if pool != "cpt":
                    raise ValueError(
                        f"knowledge document {rid}: assigned to {pool}; knowledge goes to cpt only"
                    )
                rows = [knowledge_row(item.to_json(), lineage, self.counter)]
            elif pool == "cpt":
                rows = [cpt_row(item, lineage, self.cfg, self.templates, self.counter)]
            elif pool == "sft":
                rows = sft_rows(item, lineage, self.cfg, self.templates, self.counter)
                truncated = sum(1 for r in rows if r["truncated"])
                if truncated:
                    yield beam.pvalue.TaggedOutput("stats", _stat("sft.samples_truncated", truncated))
            elif pool == "rl":
                row, tokens = rl_row(item, lineage, self.cfg, self.templates, self.counter)
                if row is None:
                    yield beam.pvalue.TaggedOutput("stats", _stat("dropped.rl_prompt_over_cap"))
                    yield beam.pvalue.TaggedOutput(
                        "removed",
                        _removed(
                            rid,
                            "",
                            "pool_rules",
                            "rl_prompt_over_cap",
                            f"RL prompt has {tokens} tokens > rl.max_prompt_tokens {self.cfg.rl.max_prompt_tokens}",
                        ),
                    )
                    continue
                rows = [row]
            else:
                rows = [item.to_record()]
            yield beam.pvalue.TaggedOutput("stats", _stat(f"pooled.{pool}"))
            yield beam.pvalue.TaggedOutput("stats", _stat(f"samples.{pool}", len(rows)))
            text = normalise(item.text) if is_docs else trajectory_text(item)
            d = self.cfg.dedup
            signature = signatures([text], num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)[0]
            key_field = "id" if pool == EVAL_POOL else "sample_id"
            for row in rows:
                out.setdefault((pool, stable_hash(row[key_field]) % self.shards), []).append(row)
            out.setdefault((ASSIGNMENTS, stable_hash(rid) % self.shards), []).append(
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
        for key, rows in out.items():
            yield (key, pa.Table.from_pylist(rows, schema=TABLE_SCHEMAS[key[0]]))


def write_part(element: tuple[tuple[str, int], Iterable[pa.Table]], out: str) -> Iterator[tuple[str, int]]:
    """Sort a shard by its key, collapse identical copies, and publish it atomically (temp + rename)."""
    (table_name, shard), tables = element
    table = pa.concat_tables(list(tables)).combine_chunks()
    table = table.sort_by([(k, "ascending") for k in SORT_KEYS[table_name]])
    keys = table.column(SORT_KEYS[table_name][0]).to_pylist()
    if table_name != REMOVED:
        # Identical records read twice (the same shard passed twice) render identical rows: keep one.
        keep = [i for i in range(len(keys)) if i == 0 or keys[i] != keys[i - 1]]
        if len(keep) != len(keys):
            table = table.take(pa.array(keep))
            yield (f"collapsed_copies.{table_name}", len(keys) - len(keep))
    folder = _join(out, table_name)
    final = _join(folder, f"part-{shard:05d}.parquet")
    tmp = _join(folder, f".part-{shard:05d}.parquet.tmp")
    _mkdirs(folder)
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", compression_level=3, row_group_size=1000)
    with FileSystems.create(tmp) as fh:
        fh.write(sink.getvalue())
    if FileSystems.exists(final):
        FileSystems.delete([final])
    FileSystems.rename([tmp], [final])


def write_stats(stats: dict[str, int], out: str) -> None:
    path = _join(out, WORK_DIR, "stats.json")
    _mkdirs(_join(out, WORK_DIR))
    with FileSystems.create(path) as fh:
        fh.write((json.dumps(dict(sorted(stats.items())), indent=2) + "\n").encode())


def _mkdirs(path: str) -> None:
    try:
        FileSystems.mkdirs(path)
    except OSError:
        pass


@dataclass(slots=True)
class BuildInputs:
    """Resolved inputs of one build: trajectory parts, knowledge files, evaluation turns."""

    trajectory_files: list[str]
    knowledge_files: list[str]
    eval_turns: list[tuple[str, int, list[int]]]
    total_rows: int


def build_pipeline(
    p: beam.Pipeline, inputs: BuildInputs, out: str, cfg: PoolsConfig, batch_rows: int = 256
) -> None:
    """Add the whole pool build to pipeline `p`."""
    shards = max(1, math.ceil(max(inputs.total_rows, 1) / cfg.trajectories_per_shard))
    files = p | "TrajectoryFiles" >> beam.Create(sorted(inputs.trajectory_files))
    batches = (
        files
        | "Reshuffle" >> beam.Reshuffle()
        | "ReadBatches" >> beam.FlatMap(read_trajectory_batches, batch_rows)
    )
    filtered = batches | "Filter" >> beam.ParDo(FilterBatch(cfg)).with_outputs(
        "removed", "stats", main="kept"
    )
    kept = filtered.kept

    docs = (
        p
        | "KnowledgeFiles" >> beam.Create(sorted(inputs.knowledge_files))
        | "ReadKnowledge" >> beam.FlatMap(read_knowledge_file)
    )
    fp_traj = kept | "FingerprintTrajectories" >> beam.ParDo(FingerprintBatch(cfg, inputs.eval_turns))
    fp_docs = docs | "FingerprintDocs" >> beam.ParDo(FingerprintDocs(cfg, inputs.eval_turns))
    fps = (fp_traj, fp_docs) | "AllFingerprints" >> beam.Flatten()

    losers = (
        fps
        | "ById" >> beam.Map(lambda f: (f.id, f.content))
        | "GroupIds" >> beam.GroupByKey()
        | "DuplicateIds" >> beam.FlatMap(duplicate_id_losers)
    )
    bands, rows = lsh_bands(cfg.dedup.threshold, cfg.dedup.num_perm)
    clusters = (
        fps
        | "BandKeys" >> beam.FlatMap(lambda f: [(k, f) for k in band_keys(f.signature, bands, rows)])
        | "GroupBands" >> beam.GroupByKey()
        | "VerifiedEdges" >> beam.FlatMap(bucket_edges, cfg)
        | "Clusters" >> beam.CombineGlobally(ClusterEdges())
    )
    contaminated = (
        fps
        | "Contaminated" >> beam.Filter(lambda f: bool(f.contaminated_by))
        | "ContaminatedIds" >> beam.Map(lambda f: (f.id, f.contaminated_by))
    )
    group_pool = (
        fps
        | "ByGroup" >> beam.Map(lambda f: (f.group, f))
        | "GroupGroups" >> beam.GroupByKey()
        | "GroupPool" >> beam.Map(decide_group_pool, cfg)
    )

    doc_batches = docs | "DocBatches" >> beam.BatchElements(min_batch_size=64, max_batch_size=256)
    side = dict(
        clusters=beam.pvalue.AsSingleton(clusters),
        losers_list=beam.pvalue.AsList(losers),
        contaminated_list=beam.pvalue.AsList(contaminated),
        group_pool=beam.pvalue.AsDict(group_pool),
    )
    routed_traj = kept | "RouteTrajectories" >> beam.ParDo(RouteBatch(cfg, shards), **side).with_outputs(
        "removed", "stats", main="tables"
    )
    routed_docs = doc_batches | "RouteDocs" >> beam.ParDo(RouteBatch(cfg, shards), **side).with_outputs(
        "removed", "stats", main="tables"
    )

    removed = (
        (filtered.removed, routed_traj.removed, routed_docs.removed)
        | "AllRemoved" >> beam.Flatten()
        | "RemovedTables"
        >> beam.Map(lambda r: ((REMOVED, 0), pa.Table.from_pylist([r], schema=QUARANTINE_SCHEMA)))
    )
    tables = (routed_traj.tables, routed_docs.tables, removed) | "AllTables" >> beam.Flatten()
    written = tables | "GroupShards" >> beam.GroupByKey() | "WriteParts" >> beam.FlatMap(write_part, out)
    stats = (filtered.stats, routed_traj.stats, routed_docs.stats, written) | "AllStats" >> beam.Flatten()
    knowledge_in = docs | "KnowledgeIn" >> beam.Map(lambda _: ("knowledge_in", 1))
    (
        ((stats, knowledge_in) | "StatsAndDocs" >> beam.Flatten())
        | "SumStats" >> beam.CombinePerKey(sum)
        | "StatsDict" >> combiners.ToDict()
        | "WriteStats" >> beam.Map(write_stats, out)
    )


def resolve_inputs(
    inputs: list[str], knowledge: list[str], evals: list[str], cfg: PoolsConfig
) -> BuildInputs:
    """Expand input folders into part files and read the (small) evaluation set in the driver."""
    from schemas.shards import shard_files

    files: list[str] = []
    total = 0
    for item in inputs:
        if "://" in item:
            matched = [
                m.path for m in FileSystems.match([_join(item, "trajectories", "*.parquet")])[0].metadata_list
            ]
        else:
            matched = [str(f) for f in shard_files(item)]
        for f in matched:
            files.append(f)
            total += _read_parquet(f).metadata.num_rows
    know: list[str] = []
    for item in knowledge:
        path = Path(item)
        know.extend(sorted(str(p) for p in path.rglob("*") if p.is_file()) if path.is_dir() else [item])
    eval_turns = read_eval_turns(evals, cfg)
    return BuildInputs(files, know, eval_turns, total)


def run_build(inputs: BuildInputs, out: str, cfg: PoolsConfig, beam_args: list[str]) -> None:
    """Run the Beam job to completion on whichever runner `beam_args` name."""
    options = PipelineOptions(beam_args, save_main_session=False)
    _mkdirs(out)
    with beam.Pipeline(options=options) as p:
        build_pipeline(p, inputs, out, cfg)
    write_eval_turns(inputs.eval_turns, out)


def write_eval_turns(eval_turns: list[tuple[str, int, list[int]]], out: str) -> None:
    folder = _join(out, WORK_DIR)
    _mkdirs(folder)
    table = pa.Table.from_pylist(
        [{"eval_id": e, "turn_index": t, "signature": s} for e, t, s in sorted(eval_turns)],
        schema=EVAL_TURNS_SCHEMA,
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    with FileSystems.create(_join(folder, "eval_turns.parquet")) as fh:
        fh.write(sink.getvalue())
