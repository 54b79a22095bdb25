# Beam's transforms carry no type annotations; calling them is the point of this module.
# mypy: disable-error-code="no-untyped-call"
"""Stage dedup: fingerprint records (exact key + MinHash), band them, verify candidate pairs, cluster.

Candidates come from `candidate_bands` (high recall: S-curve midpoint well below the threshold) and
are decided by the exact Jaccard of the two records' shingle sets (`near_duplicate`, estimated
Jaccard only as a pre-filter). Band entries carry small references; the signatures and the texts the
exact check needs are read back from the spilled kept files (knowledge documents: their corpus file)
only for buckets with more than one member.

Reads: kept trajectories (from the filter stage) and knowledge documents. Writes: per record a
`Fingerprint`, its LSH band entries and (id, content hash); globally, verified near-duplicate edges
resolved into clusters (id -> (representative, same exact text?)) and the losers among records that
share one id. The render stage drops every non-representative (`exact_duplicate` /
`near_duplicate` / `duplicate_id`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import apache_beam as beam
import numpy as np
import orjson
import pyarrow as pa

from pipelines.config import PoolsConfig
from pipelines.inputs import read_knowledge_file
from pipelines.minhash import (
    band_keys,
    near_duplicate,
    normalise,
    shingle_set,
    signatures,
    stable_hash,
    union_find_clusters,
)
from pipelines.stages.contract import Stage, tune_gc_for_bulk_work
from pipelines.stages.spill import join, read_ipc
from schemas.trajectory import TRAJECTORY_SCHEMA, Trajectory

STAGE = Stage(
    name="dedup",
    reads=("kept Trajectory", "knowledge document"),
    writes=("Fingerprint", "band entries", "(id, content hash)", "clusters", "duplicate-id losers"),
    counters=("dropped.exact_duplicate", "dropped.near_duplicate", "dropped.duplicate_id"),
)
KEPT_SCHEMA = pa.schema(
    [
        *TRAJECTORY_SCHEMA,
        pa.field("_content", pa.string(), False),
        pa.field("_signature", pa.list_(pa.field("item", pa.uint64(), nullable=False)), False),
    ],
    metadata=TRAJECTORY_SCHEMA.metadata,
)
"""A spilled kept batch: the filtered trajectory plus what fingerprinting already computed."""


def trajectory_text(traj: Trajectory, cfg: PoolsConfig) -> str:
    """The normalised action + observation text that exact and near-duplicate detection compare
    (digits folded in actions, kept in observations by default: see DedupConfig)."""
    fold_a, fold_o = cfg.dedup.fold_digits_actions, cfg.dedup.fold_digits_observations
    return " ".join(
        f"{normalise(t.action.text, fold_a)} {normalise(t.observation.text, fold_o)}" for t in traj.turns
    )


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


def content_hash(record: dict[str, Any]) -> str:
    """Hash of a whole record (keys sorted): tells apart records that share an id. Compared only
    within one build, so the serialisation just has to be deterministic; orjson is ~5x faster than
    json.dumps here, which stays the fallback for what orjson refuses (integers beyond 64 bits, lone
    surrogates)."""
    try:
        text = orjson.dumps(record, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    except orjson.JSONEncodeError:
        text = json.dumps(record, sort_keys=True, default=str).encode()
    return hashlib.blake2b(text, digest_size=8).hexdigest()


def rank_key(fp: Fingerprint, cfg: PoolsConfig) -> tuple[int, int, int, str]:
    """Cluster survivor order: source priority, then more turns, then a seeded hash of the id."""
    prio = cfg.dedup.source_priority
    p = prio.index(fp.kind) if fp.kind in prio else len(prio)
    return (p, -fp.num_turns, stable_hash("dedup", cfg.dedup.seed, fp.id), fp.id)


SignatureRef = tuple[int, int] | tuple[str, int] | bytes
"""Where a band bucket finds a record's signature and text: (read split index, row) in the spilled
kept file of that split, (corpus file, document index) for a knowledge document, or the signature
itself (little-endian uint64s) for records whose text the caller resolves (`bucket_edges`)."""
BandMember = tuple[tuple[int, int, int, str], str, str, SignatureRef]
"""What a band bucket needs of a record: (rank key, id, exact key, signature reference).

Compact on purpose: every record is shuffled once per LSH band, so the 1 KiB signature stays in the
spilled file and is read back only for the rare buckets with more than one member."""


def pack_signature(signature: Iterable[int]) -> bytes:
    return np.asarray(list(signature), dtype="<u8").tobytes()


def kept_path(work: str, split_index: int) -> str:
    return join(work, "kept", f"split-{split_index:06d}.arrow")


def band_member(fp: Fingerprint, cfg: PoolsConfig, signature_ref: SignatureRef | None = None) -> BandMember:
    ref = pack_signature(fp.signature) if signature_ref is None else signature_ref
    return (rank_key(fp, cfg), fp.id, fp.exact, ref)


def band_entries(
    fp: Fingerprint, cfg: PoolsConfig, bands: int, rows: int, signature_ref: SignatureRef | None = None
) -> list[tuple[str, BandMember]]:
    member = band_member(fp, cfg, signature_ref)
    return [(k, member) for k in band_keys(fp.signature, bands, rows)]


CACHED_RECORDS = 4096
"""Shingle sets (and knowledge documents' signatures) a bucket worker keeps, oldest dropped first."""


class SpilledSignatures:
    """Resolves signature references against the spilled kept files and knowledge corpus files,
    keeping recently read files; `shingles` gives a record's shingle set, as fingerprinting made it."""

    def __init__(self, work: str, keep_files: int = 16, cfg: PoolsConfig | None = None) -> None:
        self.work = work
        self.keep_files = keep_files
        self.cfg = cfg or PoolsConfig()
        self._files: dict[int, np.ndarray] = {}
        self._tables: dict[int | str, Any] = {}
        self._shingles: dict[SignatureRef, frozenset[str]] = {}
        self._doc_signatures: dict[tuple[str, int], bytes] = {}

    def packed(self, ref: SignatureRef) -> bytes:
        if isinstance(ref, bytes):
            return ref
        if isinstance(ref[0], str):
            return self._doc_signature((ref[0], ref[1]))
        split_index, row = ref
        table = self._files.get(split_index)
        if table is None:
            column = read_ipc(kept_path(self.work, split_index), ["_signature"]).column("_signature")
            flat = column.combine_chunks().values.to_numpy(zero_copy_only=False)
            table = flat.astype("<u8", copy=False).reshape(len(column), -1) if len(column) else flat
            if len(self._files) >= self.keep_files:
                self._files.pop(next(iter(self._files)))
            self._files[split_index] = table
        return bytes(table[row].tobytes())

    def _source(self, key: int | str) -> Any:
        """The kept table of a split, or the documents of a corpus file (a few kept at a time)."""
        found = self._tables.get(key)
        if found is None:
            if isinstance(key, str):
                found = list(read_knowledge_file(key))
            else:
                found = read_ipc(kept_path(self.work, key)).drop_columns(["_content", "_signature"])
            if len(self._tables) >= min(self.keep_files, 4):
                self._tables.pop(next(iter(self._tables)))
            self._tables[key] = found
        return found

    def text(self, ref: SignatureRef) -> str:
        """The normalised text a reference's record was fingerprinted from."""
        if isinstance(ref, bytes):
            raise ValueError("a signature alone carries no text: resolve such records' shingles yourself")
        key, row = ref
        if isinstance(key, str):
            doc = self._source(key)[row]
            return normalise(doc.text, self.cfg.dedup.fold_digits_observations)
        record = self._source(key).slice(row, 1).to_pylist()[0]
        return trajectory_text(Trajectory.from_record(record), self.cfg)

    def _doc_signature(self, ref: tuple[str, int]) -> bytes:
        found = self._doc_signatures.get(ref)
        if found is None:
            d = self.cfg.dedup
            sig = signatures([self.text(ref)], num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)[0]
            if len(self._doc_signatures) >= CACHED_RECORDS:
                self._doc_signatures.pop(next(iter(self._doc_signatures)))
            found = self._doc_signatures[ref] = pack_signature(sig)
        return found

    def shingles(self, member: BandMember) -> frozenset[str]:
        ref = member[3]
        found = self._shingles.get(ref)
        if found is None:
            found = shingle_set(self.text(ref), self.cfg.dedup.shingle_words)
            if len(self._shingles) >= CACHED_RECORDS:
                self._shingles.pop(next(iter(self._shingles)))
            self._shingles[ref] = found
        return found


class BucketEdges(beam.DoFn):
    """Reads: one LSH band bucket. Writes: star edges from its best-ranked member to every verified
    near-duplicate in it (signatures and texts read back only for such buckets)."""

    def __init__(self, cfg: PoolsConfig, work: str) -> None:
        self.cfg = cfg
        self.work = work

    def setup(self) -> None:
        tune_gc_for_bulk_work()
        self.spilled = SpilledSignatures(self.work, cfg=self.cfg)

    def process(self, element: tuple[str, Iterable[BandMember]]) -> Iterator[tuple[Any, ...]]:
        yield from bucket_edges(element, self.cfg, self.spilled.shingles, self.spilled.packed)


def bucket_edges(
    element: tuple[str, Iterable[BandMember]],
    cfg: PoolsConfig,
    shingles: Callable[[BandMember], frozenset[str]],
    resolve: Callable[[SignatureRef], bytes] | None = None,
) -> Iterator[tuple[Any, ...]]:
    """Star edges from a band bucket's best-ranked member to every near-duplicate in it: the same
    exact key, or `near_duplicate` (exact shingle-set Jaccard >= the threshold).

    `shingles` gives a member's shingle set (asked only for pairs past the estimate pre-filter);
    `resolve` turns a member's signature reference into the packed signature (default: the
    reference is the packed signature itself)."""
    _, members = element
    unique = {m[1]: m for m in members}
    if len(unique) < 2:
        return
    ordered = sorted(unique.values(), key=lambda m: m[0])
    head = ordered[0]
    head_rank, head_id, head_exact, head_ref = head
    head_sig: np.ndarray | None = None
    head_shingles: list[frozenset[str]] = []

    def head_set() -> frozenset[str]:
        if not head_shingles:
            head_shingles.append(shingles(head))
        return head_shingles[0]

    for member in ordered[1:]:
        rank, rid, exact, ref = member
        if head_exact != exact:
            if head_sig is None:
                head_sig = _unpack(resolve(head_ref) if resolve else head_ref)
            sig = _unpack(resolve(ref) if resolve else ref)
            if not near_duplicate(head_sig, sig, head_set, partial(shingles, member), cfg.dedup.threshold):
                continue
        yield (head_id, rid, head_rank, rank, head_exact, exact)


def _unpack(packed: SignatureRef) -> np.ndarray:
    assert isinstance(packed, bytes)
    return np.frombuffer(packed, dtype="<u8")


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
