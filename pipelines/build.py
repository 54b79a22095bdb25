# Beam's transforms carry no type annotations; calling them is the point of this module.
# mypy: disable-error-code="no-untyped-call"
"""The pool-building Beam job: validate -> filter -> fingerprint -> dedup + decontaminate -> assign -> render.

Input parts are cut into row-range splits (a few hundred trajectories each), so every worker gets
work. One fused stage per split validates, filters and fingerprints, and spills the kept rows as one
Arrow file under OUT/_build; only small fingerprints and file names travel between stages, through
the shuffles that need a global view (LSH bands, duplicate ids, source groups). Rendering reads the
spilled rows back, writes sorted runs per output part, and the last stage merges each part's runs and
writes the part with its trainer export. Every choice is a seeded hash of ids and every part is
sorted by its key, so the default runner, the multi-process runner and Dataflow/Flink/Spark write
identical pools.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import combiners

from pipelines import filters as flt
from pipelines.config import EVAL_POOL, PoolsConfig
from pipelines.exports import write_export
from pipelines.inputs import KnowledgeDoc, read_eval_turns, read_knowledge_file
from pipelines.minhash import (
    NearDuplicateIndex,
    band_keys,
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
from pipelines.runners import runner_for
from schemas.shards import check_version
from schemas.trajectory import SCHEMA_METADATA_KEY, TRAJECTORY_SCHEMA, Trajectory

WORK_DIR = "_build"
SPILL_DIRS = ("kept", "runs")
"""Intermediate files under OUT/_build, removed when the job has finished."""
REMOVED = "removed"
ASSIGNMENTS = "assignments"
PART_ROW_GROUP = 1000
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
KEPT_SCHEMA = pa.schema(
    [
        *TRAJECTORY_SCHEMA,
        pa.field("_content", pa.string(), False),
        pa.field("_signature", pa.list_(pa.field("item", pa.uint64(), nullable=False)), False),
    ],
    metadata=TRAJECTORY_SCHEMA.metadata,
)
"""A spilled kept batch: the filtered trajectory plus what fingerprinting already computed."""
SPILL_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
DOC_BATCH = 256
"""Knowledge documents per rendering element."""


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


@dataclass(frozen=True, slots=True)
class ReadSplit:
    """A row range of one input part: the unit of reading, filtering and fingerprinting."""

    index: int
    path: str
    row_group: int
    offset: int
    length: int


def _join(base: str, *parts: str) -> str:
    return FileSystems.join(base, *parts)


def _read_parquet(path: str) -> pq.ParquetFile:
    return pq.ParquetFile(FileSystems.open(path))


def plan_splits(files: list[tuple[str, list[int]]], split_rows: int) -> list[ReadSplit]:
    """Cut every row group of every part into ranges of at most `split_rows` rows."""
    splits: list[ReadSplit] = []
    for path, group_rows in files:
        for rg, n in enumerate(group_rows):
            for offset in range(0, n, split_rows):
                splits.append(ReadSplit(len(splits), path, rg, offset, min(split_rows, n - offset)))
    return splits


def read_split(split: ReadSplit) -> pa.Table:
    """The rows of one split under the part's own schema (rows that fail validation are quarantined)."""
    pf = _read_parquet(split.path)
    version = (pf.schema_arrow.metadata or {}).get(SCHEMA_METADATA_KEY)
    if version is not None:
        check_version(version.decode("utf-8", "replace"), split.path)
    return pf.read_row_group(split.row_group).slice(split.offset, split.length)


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


def _mkdirs(path: str) -> None:
    try:
        FileSystems.mkdirs(path)
    except OSError:
        pass


def _write_ipc(path: str, table: pa.Table) -> None:
    """Write an intermediate Arrow file atomically (a retried bundle overwrites the same name)."""
    folder, name = path.rsplit("/", 1)
    _mkdirs(folder)
    tmp = _join(folder, f".{name}.tmp")
    with FileSystems.create(tmp) as fh:
        with pa.ipc.new_file(fh, table.schema, options=SPILL_OPTIONS) as writer:
            writer.write_table(table)
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([tmp], [path])


def _read_ipc(path: str, columns: list[str] | None = None) -> pa.Table:
    with FileSystems.open(path) as fh:
        data = fh.read()
    table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
    return table.select(columns) if columns is not None else table


def spill_runs(
    rows: dict[tuple[str, int], list[dict[str, Any]]], work: str, tag: str
) -> Iterator[tuple[tuple[str, int], str]]:
    """Write each (table, shard)'s rows as one run file, sorted by the table's key; yield its name."""
    for (table_name, shard), items in sorted(rows.items()):
        table = pa.Table.from_pylist(items, schema=TABLE_SCHEMAS[table_name])
        table = table.sort_by([(k, "ascending") for k in SORT_KEYS[table_name]])
        path = _join(work, "runs", table_name, f"{shard:05d}", f"{tag}.arrow")
        _write_ipc(path, table)
        yield (table_name, shard), path


def trajectory_text(traj: Trajectory) -> str:
    """The normalised action + observation text that near-duplicate detection compares."""
    return normalise("\n".join(f"{t.action.text}\n{t.observation.text}" for t in traj.turns))


def turn_texts(traj: Trajectory) -> list[str]:
    return [normalise(f"{t.action.text}\n{t.observation.text}") for t in traj.turns]


class EvalTurnMatcher:
    """Finds the evaluation sample (if any) whose turn a training turn near-duplicates."""

    def __init__(
        self,
        cfg: PoolsConfig,
        eval_turns: list[tuple[str, int, list[int]]],
        bands_rows: tuple[int, int] | None = None,
    ) -> None:
        self.cfg = cfg
        self.index = NearDuplicateIndex(cfg.decontamination.threshold, cfg.dedup.num_perm, bands_rows)
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

    def match_trajectory(self, traj: Trajectory) -> str:
        # Without evaluation turns there is nothing to match: skip normalising every turn.
        return self.match(turn_texts(traj)) if len(self.index) else ""


class PrepareInput(beam.DoFn):
    """Reads: one ReadSplit (validated, filtered and fingerprinted in one pass) or one knowledge
    corpus file (fingerprinted). Every record is fingerprinted here, in one fused stage, and the
    compact values the global stages shuffle leave this stage directly.

    Writes, per record: (band key, BandMember) per LSH band (main); "ids": (id, content hash);
    "kinds": (source group, source kind); "contaminated": (id, evaluation sample id) when it overlaps
    one. Per input: the spilled kept rows' file name or a batch of documents ("kept"), a run of
    removed rows ("runs") and stats.
    """

    def __init__(self, cfg: PoolsConfig, eval_turns: list[tuple[str, int, list[int]]], work: str) -> None:
        self.cfg = cfg
        self.eval_turns = eval_turns
        self.work = work
        # Banding parameters are chosen once, in the driver, and travel with the DoFn.
        self.bands_rows = lsh_bands(cfg.dedup.threshold, cfg.dedup.num_perm)
        self.eval_bands_rows = lsh_bands(cfg.decontamination.threshold, cfg.dedup.num_perm)

    def setup(self) -> None:
        self.matcher = EvalTurnMatcher(self.cfg, self.eval_turns, self.eval_bands_rows)

    def fingerprint_outputs(self, fp: Fingerprint, signature_ref: SignatureRef) -> Iterator[Any]:
        yield beam.pvalue.TaggedOutput("ids", (fp.id, fp.content))
        yield beam.pvalue.TaggedOutput("kinds", (fp.group, fp.kind))
        if fp.contaminated_by:
            yield beam.pvalue.TaggedOutput("contaminated", (fp.id, fp.contaminated_by))
        bands, rows = self.bands_rows
        yield from band_entries(fp, self.cfg, bands, rows, signature_ref)

    def process(self, item: ReadSplit | str) -> Iterator[Any]:
        if isinstance(item, str):
            yield from self.prepare_knowledge(item)
        else:
            yield from self.prepare_split(item)

    def prepare_knowledge(self, path: str) -> Iterator[Any]:
        docs = list(read_knowledge_file(path))
        if not docs:
            return
        yield beam.pvalue.TaggedOutput("stats", ("knowledge_in", len(docs)))
        d = self.cfg.dedup
        texts = [normalise(doc.text) for doc in docs]
        sigs = signatures(texts, num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)
        for doc, text, sig in zip(docs, texts, sigs, strict=True):
            fp = Fingerprint(
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
            # Documents are not spilled: their signature travels with each band entry.
            yield from self.fingerprint_outputs(fp, _pack_signature(sig))
        for start in range(0, len(docs), DOC_BATCH):
            yield beam.pvalue.TaggedOutput("kept", docs[start : start + DOC_BATCH])

    def prepare_split(self, split: ReadSplit) -> Iterator[Any]:
        table = read_split(split)
        stats: Counter[str] = Counter(records_in=table.num_rows)
        removed: list[dict[str, Any]] = []
        kept: list[tuple[Trajectory, dict[str, Any]]] = []
        for record in table.to_pylist():
            traj, code, detail = flt.validate_record(record)
            if traj is None:
                assert code is not None
                removed.append(_removed(record.get("id") or "", split.path, "validation", code, detail))
                stats[f"quarantined.{code}"] += 1
                continue
            stats["turns_in"] += len(traj.turns)
            outcome = flt.apply_filters(traj, self.cfg.filters)
            for reason, n in outcome.removed_turns.items():
                stats[f"turns_removed.{reason}"] += n
            if outcome.trajectory is None:
                assert outcome.drop_reason is not None
                removed.append(_removed(traj.id, split.path, "filter", outcome.drop_reason, outcome.detail))
                stats[f"dropped.{outcome.drop_reason}"] += 1
                continue
            kept.append((outcome.trajectory, outcome.trajectory.to_record()))
        tag = f"split-{split.index:06d}"
        if removed:
            yield from (
                beam.pvalue.TaggedOutput("runs", r)
                for r in spill_runs({(REMOVED, 0): removed}, self.work, f"{tag}-filter")
            )
        yield from (beam.pvalue.TaggedOutput("stats", s) for s in stats.items())
        if not kept:
            return
        d = self.cfg.dedup
        texts = [trajectory_text(t) for t, _ in kept]
        sigs = signatures(texts, num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)
        contents = [content_hash(rec) for _, rec in kept]
        spilled = pa.Table.from_pylist([rec for _, rec in kept], schema=TRAJECTORY_SCHEMA)
        spilled = spilled.append_column(KEPT_SCHEMA.field("_content"), pa.array(contents, pa.string()))
        spilled = spilled.append_column(
            KEPT_SCHEMA.field("_signature"), pa.array(sigs, KEPT_SCHEMA.field("_signature").type)
        )
        path = kept_path(self.work, split.index)
        _write_ipc(path, spilled.replace_schema_metadata(KEPT_SCHEMA.metadata))
        yield beam.pvalue.TaggedOutput("kept", path)
        for row, ((traj, _), text, sig, content) in enumerate(zip(kept, texts, sigs, contents, strict=True)):
            fp = Fingerprint(
                id=traj.id,
                content=content,
                kind=traj.source.kind.value,
                group=traj.source.source_group,
                domain=traj.domain.value,
                num_turns=len(traj.turns),
                exact=exact_key(text),
                signature=tuple(sig),
                contaminated_by=self.matcher.match_trajectory(traj),
            )
            yield from self.fingerprint_outputs(fp, (split.index, row))


def content_hash(record: dict[str, Any]) -> str:
    return f"{stable_hash(json.dumps(record, sort_keys=True, default=str)):016x}"


def rank_key(fp: Fingerprint, cfg: PoolsConfig) -> tuple[int, int, int, str]:
    """Cluster survivor order: source priority, then more turns, then a seeded hash of the id."""
    prio = cfg.dedup.source_priority
    p = prio.index(fp.kind) if fp.kind in prio else len(prio)
    return (p, -fp.num_turns, stable_hash("dedup", cfg.dedup.seed, fp.id), fp.id)


SignatureRef = tuple[int, int] | bytes
"""Where a band bucket finds a record's signature: (read split index, row) in the spilled kept file
of that split, or the signature itself (little-endian uint64s) for records that are not spilled."""
BandMember = tuple[tuple[int, int, int, str], str, str, SignatureRef]
"""What a band bucket needs of a record: (rank key, id, exact key, signature reference).

Compact on purpose: every record is shuffled once per LSH band, so the 1 KiB signature stays in the
spilled file and is read back only for the rare buckets with more than one member."""


def _pack_signature(signature: Iterable[int]) -> bytes:
    return np.asarray(list(signature), dtype="<u8").tobytes()


def kept_path(work: str, split_index: int) -> str:
    return _join(work, "kept", f"split-{split_index:06d}.arrow")


def band_member(fp: Fingerprint, cfg: PoolsConfig, signature_ref: SignatureRef | None = None) -> BandMember:
    ref = _pack_signature(fp.signature) if signature_ref is None else signature_ref
    return (rank_key(fp, cfg), fp.id, fp.exact, ref)


def band_entries(
    fp: Fingerprint, cfg: PoolsConfig, bands: int, rows: int, signature_ref: SignatureRef | None = None
) -> list[tuple[str, BandMember]]:
    member = band_member(fp, cfg, signature_ref)
    return [(k, member) for k in band_keys(fp.signature, bands, rows)]


class SpilledSignatures:
    """Resolves signature references against the spilled kept files, keeping recently read files."""

    def __init__(self, work: str, keep_files: int = 16) -> None:
        self.work = work
        self.keep_files = keep_files
        self._files: dict[int, np.ndarray] = {}

    def packed(self, ref: SignatureRef) -> bytes:
        if isinstance(ref, bytes):
            return ref
        split_index, row = ref
        table = self._files.get(split_index)
        if table is None:
            column = _read_ipc(kept_path(self.work, split_index), ["_signature"]).column("_signature")
            flat = column.combine_chunks().values.to_numpy(zero_copy_only=False)
            table = flat.astype("<u8", copy=False).reshape(len(column), -1) if len(column) else flat
            if len(self._files) >= self.keep_files:
                self._files.pop(next(iter(self._files)))
            self._files[split_index] = table
        return bytes(table[row].tobytes())


def _signature_agreement(a: bytes, b: bytes) -> float:
    """estimated_jaccard of two packed signatures (the same count over the same length)."""
    x, y = np.frombuffer(a, dtype="<u8"), np.frombuffer(b, dtype="<u8")
    return int(np.count_nonzero(x == y)) / len(x) if len(x) else 0.0


class BucketEdges(beam.DoFn):
    """Reads: one LSH band bucket. Writes: star edges from its best-ranked member to every verified
    near-duplicate in it (signatures read back from the spilled kept files only for such buckets)."""

    def __init__(self, cfg: PoolsConfig, work: str) -> None:
        self.cfg = cfg
        self.work = work

    def setup(self) -> None:
        self.spilled = SpilledSignatures(self.work)

    def process(self, element: tuple[str, Iterable[BandMember]]) -> Iterator[tuple[Any, ...]]:
        yield from bucket_edges(element, self.cfg, self.spilled.packed)


def bucket_edges(
    element: tuple[str, Iterable[BandMember]],
    cfg: PoolsConfig,
    resolve: Callable[[SignatureRef], bytes] | None = None,
) -> Iterator[tuple[Any, ...]]:
    """Star edges from a band bucket's best-ranked member to every verified near-duplicate in it.

    `resolve` turns a member's signature reference into the packed signature (default: the
    reference is the packed signature itself)."""
    _, members = element
    unique = {m[1]: m for m in members}
    if len(unique) < 2:
        return
    ordered = sorted(unique.values(), key=lambda m: m[0])
    head_rank, head_id, head_exact, head_ref = ordered[0]
    head_sig: bytes | None = None
    for rank, rid, exact, ref in ordered[1:]:
        if head_exact != exact:
            if head_sig is None:
                head_sig = resolve(head_ref) if resolve else head_ref  # type: ignore[assignment]
            sig = resolve(ref) if resolve else ref
            assert isinstance(head_sig, bytes) and isinstance(sig, bytes)
            if _signature_agreement(head_sig, sig) < cfg.dedup.threshold:
                continue
        yield (head_id, rid, head_rank, rank, head_exact, exact)


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
    return group_pool_from_kinds((group, group_kind_counts(fps)), cfg)


def group_pool_from_kinds(element: tuple[str, Counter[str]], cfg: PoolsConfig) -> tuple[str, str]:
    """`decide_group_pool` from the group's source-kind counts (what the job shuffles: no signatures)."""
    group, counts = element
    prio = cfg.dedup.source_priority
    kind = min(counts, key=lambda k: (-counts[k], prio.index(k) if k in prio else len(prio), k))
    return group, choose_pool(cfg.assignment.rule_for(kind).pools, cfg.assignment.seed, group)


class CountKinds(beam.CombineFn):
    """Source-kind counts of one source group."""

    def create_accumulator(self) -> Counter[str]:
        return Counter()

    def add_input(self, acc: Counter[str], kind: str) -> Counter[str]:
        acc[kind] += 1
        return acc

    def merge_accumulators(self, accs: Iterable[Counter[str]]) -> Counter[str]:
        total: Counter[str] = Counter()
        for acc in accs:
            total.update(acc)
        return total

    def extract_output(self, acc: Counter[str]) -> Counter[str]:
        return acc


class RoutePools(beam.DoFn):
    """Reads: a spilled kept file (or a batch of knowledge documents) + cluster, contamination and
    group-pool side inputs. Renders pool rows and writes them as sorted runs per output part.
    Writes: ((table, shard), run file) per part touched (removed rows included), and stats."""

    def __init__(self, cfg: PoolsConfig, shards: int, work: str) -> None:
        self.cfg = cfg
        self.shards = shards
        self.work = work

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

    def _records(self, element: Any) -> tuple[str, Iterator[tuple[Any, str, list[int]]]]:
        """(run tag, (record, content hash, signature) ...) of a kept file or a document batch."""
        if isinstance(element, list):
            d = self.cfg.dedup
            texts = [normalise(doc.text) for doc in element]
            sigs = signatures(texts, num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)
            tag = f"docs-{stable_hash(*(doc.id for doc in element)):016x}"
            return tag, iter(
                (doc, content_hash(doc.to_json()), sig) for doc, sig in zip(element, sigs, strict=True)
            )
        table = _read_ipc(element)
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
    ) -> Iterator[Any]:
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
                rid, group, kind = item.id, item.source.source_group, item.source.kind.value
                domain, nturns = item.domain.value, len(item.turns)
            pool, stage, reason, lineage = self._lineage_fate(
                rid, content, group, kind, clusters, losers, contaminated, group_pool
            )
            if pool is None or lineage is None:
                code = reason.split(" ")[0] if stage == "dedup" else "eval_overlap"
                stats[f"dropped.{code}"] += 1
                out.setdefault((REMOVED, 0), []).append(_removed(rid, "", stage, code, reason))
                continue
            if is_doc:
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
                    stats["sft.samples_truncated"] += truncated
            elif pool == "rl":
                row, tokens = rl_row(item, lineage, self.cfg, self.templates, self.counter)
                if row is None:
                    stats["dropped.rl_prompt_over_cap"] += 1
                    out.setdefault((REMOVED, 0), []).append(
                        _removed(
                            rid,
                            "",
                            "pool_rules",
                            "rl_prompt_over_cap",
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
        yield from (beam.pvalue.TaggedOutput("stats", s) for s in stats.items())
        yield from spill_runs(out, self.work, f"{tag}-route")


def _sorted_unique(table: pa.Table, table_name: str) -> tuple[pa.Table, int]:
    """Sort by the table's key; identical records read twice render identical rows: keep one."""
    table = table.sort_by([(k, "ascending") for k in SORT_KEYS[table_name]])
    if table_name == REMOVED or table.num_rows < 2:
        return table, 0
    keys = table.column(SORT_KEYS[table_name][0]).to_pylist()
    keep = [i for i in range(len(keys)) if i == 0 or keys[i] != keys[i - 1]]
    if len(keep) == len(keys):
        return table, 0
    return table.take(pa.array(keep)), len(keys) - len(keep)


def write_part(element: tuple[tuple[str, int], Iterable[str]], out: str) -> Iterator[tuple[str, int]]:
    """Merge a part's sorted runs, collapse identical copies, and publish the part and its trainer
    export atomically (temp + rename)."""
    (table_name, shard), runs = element
    schema = TABLE_SCHEMAS[table_name]
    table = pa.concat_tables([_read_ipc(r) for r in sorted(set(runs))]) if runs else schema.empty_table()
    table, collapsed = _sorted_unique(table.combine_chunks(), table_name)
    if collapsed:
        yield (f"collapsed_copies.{table_name}", collapsed)
    folder = _join(out, table_name)
    stem = f"part-{shard:05d}"
    final = _join(folder, f"{stem}.parquet")
    tmp = _join(folder, f".{stem}.parquet.tmp")
    _mkdirs(folder)
    with FileSystems.create(tmp) as fh:
        pq.write_table(table, fh, compression="zstd", compression_level=3, row_group_size=PART_ROW_GROUP)
    if FileSystems.exists(final):
        FileSystems.delete([final])
    FileSystems.rename([tmp], [final])
    write_export(out, table_name, stem, iter(table.to_batches(max_chunksize=PART_ROW_GROUP)))


def write_stats(stats: dict[str, int], out: str) -> None:
    path = _join(out, WORK_DIR, "stats.json")
    _mkdirs(_join(out, WORK_DIR))
    with FileSystems.create(path) as fh:
        fh.write((json.dumps(dict(sorted(stats.items())), indent=2) + "\n").encode())


@dataclass(slots=True)
class BuildInputs:
    """Resolved inputs of one build: trajectory parts, knowledge files, evaluation turns."""

    trajectory_files: list[str]
    knowledge_files: list[str]
    eval_turns: list[tuple[str, int, list[int]]]
    total_rows: int
    row_groups: dict[str, list[int]] = field(default_factory=dict)
    """Rows per row group of every trajectory part (read from the footers once, in the driver)."""


def build_pipeline(
    p: beam.Pipeline, inputs: BuildInputs, out: str, cfg: PoolsConfig, batch_rows: int = 256
) -> None:
    """Add the whole pool build to pipeline `p`; `batch_rows` is the size of a read split."""
    shards = max(1, math.ceil(max(inputs.total_rows, 1) / cfg.trajectories_per_shard))
    work = _join(out, WORK_DIR)
    files = sorted(inputs.trajectory_files)
    row_groups = {f: inputs.row_groups.get(f) or _row_groups(f) for f in files}
    splits = plan_splits([(f, row_groups[f]) for f in files], batch_rows)
    # One PCollection of work items (read splits and knowledge files), so a single fused stage
    # fingerprints everything and writes straight into the shuffles: a Flatten in front of a
    # shuffle would cost the local runners an extra pass of the data through a worker.
    prepared = (
        p
        | "ReadSplits" >> beam.Create([*splits, *sorted(inputs.knowledge_files)], reshuffle=False)
        # Spread the work over the workers before the heavy, fused read-filter-fingerprint stage
        # (one shuffle of the small work items; Create's own would be a second one).
        | "Reshuffle" >> beam.Reshuffle()
        | "PrepareInputs"
        >> beam.ParDo(PrepareInput(cfg, inputs.eval_turns, work)).with_outputs(
            "kept", "runs", "stats", "ids", "kinds", "contaminated", main="bands"
        )
    )
    losers = (
        prepared.ids | "GroupIds" >> beam.GroupByKey() | "DuplicateIds" >> beam.FlatMap(duplicate_id_losers)
    )
    clusters = (
        prepared.bands
        | "GroupBands" >> beam.GroupByKey()
        | "VerifiedEdges" >> beam.ParDo(BucketEdges(cfg, work))
        | "Clusters" >> beam.CombineGlobally(ClusterEdges())
    )
    contaminated = prepared.contaminated
    group_pool = (
        prepared.kinds
        | "CountKinds" >> beam.CombinePerKey(CountKinds())
        | "GroupPool" >> beam.Map(group_pool_from_kinds, cfg)
    )

    side = dict(
        clusters=beam.pvalue.AsSingleton(clusters),
        losers_list=beam.pvalue.AsList(losers),
        contaminated_list=beam.pvalue.AsList(contaminated),
        group_pool=beam.pvalue.AsDict(group_pool),
    )
    routed = (
        prepared.kept
        | "ReshuffleKept" >> beam.Reshuffle()
        | "RoutePools" >> beam.ParDo(RoutePools(cfg, shards, work), **side).with_outputs("stats", main="runs")
    )
    runs = (prepared.runs, routed.runs) | "AllRuns" >> beam.Flatten()
    written = runs | "GroupParts" >> beam.GroupByKey() | "WriteParts" >> beam.FlatMap(write_part, out)
    (
        (prepared.stats, routed.stats, written)
        | "AllStats" >> beam.Flatten()
        | "SumStats" >> beam.CombinePerKey(sum)
        | "StatsDict" >> combiners.ToDict()
        | "WriteStats" >> beam.Map(write_stats, out)
    )


def _row_groups(path: str) -> list[int]:
    meta = _read_parquet(path).metadata
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def resolve_inputs(
    inputs: list[str], knowledge: list[str], evals: list[str], cfg: PoolsConfig
) -> BuildInputs:
    """Expand input folders into part files and read the (small) evaluation set in the driver."""
    from schemas.shards import check_file_schema, shard_files

    files: list[str] = []
    row_groups: dict[str, list[int]] = {}
    for item in inputs:
        if "://" in item:
            matched = [
                m.path for m in FileSystems.match([_join(item, "trajectories", "*.parquet")])[0].metadata_list
            ]
        else:
            # An unreadable part, a foreign schema or a newer schema version stops here with the file named.
            matched = [str(f) for f in shard_files(item) if check_file_schema(f)]
        for f in matched:
            files.append(f)
            row_groups[f] = _row_groups(f)
    total = sum(sum(row_groups[f]) for f in files)
    know: list[str] = []
    for item in knowledge:
        path = Path(item)
        know.extend(sorted(str(p) for p in path.rglob("*") if p.is_file()) if path.is_dir() else [item])
    eval_turns = read_eval_turns(evals, cfg)
    return BuildInputs(files, know, eval_turns, total, row_groups)


def run_build(inputs: BuildInputs, out: str, cfg: PoolsConfig, beam_args: list[str]) -> None:
    """Run the Beam job to completion on whichever runner `beam_args` name (local FnApiRunner by default)."""
    options = PipelineOptions(beam_args, save_main_session=False)
    _mkdirs(out)
    with beam.Pipeline(runner=runner_for(options), options=options) as p:
        build_pipeline(p, inputs, out, cfg)
    write_eval_turns(inputs.eval_turns, out)
    for name in SPILL_DIRS:
        spill = _join(out, WORK_DIR, name)
        if FileSystems.exists(spill):
            FileSystems.delete([spill])


def write_eval_turns(eval_turns: list[tuple[str, int, list[int]]], out: str) -> None:
    folder = _join(out, WORK_DIR)
    _mkdirs(folder)
    table = pa.Table.from_pylist(
        [{"eval_id": e, "turn_index": t, "signature": s} for e, t, s in sorted(eval_turns)],
        schema=EVAL_TURNS_SCHEMA,
    )
    with FileSystems.create(_join(folder, "eval_turns.parquet")) as fh:
        pq.write_table(table, fh, compression="zstd")
