"""Near duplicates are decided by the exact Jaccard of the shingle sets, the same way in the build
(`bucket_edges` over the spilled kept files and corpus files) and in both `pools verify` paths
(`ExactNearDuplicateIndex`, `bucket_pairs`)."""

from __future__ import annotations

import json
import random
import string
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.config import PoolsConfig
from pipelines.inputs import read_knowledge_file
from pipelines.minhash import (
    CANDIDATE_MISS,
    ExactNearDuplicateIndex,
    band_keys,
    candidate_bands,
    exact_jaccard,
    exact_key,
    near_duplicate,
    normalise,
    s_curve_midpoint,
    shingle_set,
    signatures,
)
from pipelines.stages.dedup import (
    KEPT_SCHEMA,
    Fingerprint,
    SpilledSignatures,
    band_entries,
    bucket_edges,
    kept_path,
    pack_signature,
    trajectory_text,
)
from pipelines.stages.spill import write_ipc
from pipelines.verify_beam import bucket_pairs
from schemas.trajectory import TRAJECTORY_SCHEMA, SourceKind
from tests.helpers.pools_data import terminal

CFG = PoolsConfig()
D = CFG.dedup


def _words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8))) for _ in range(n)]


def _pair(rng: random.Random, target: float) -> tuple[str, str]:
    """A text and an edited copy whose exact shingle Jaccard is the first one at or below `target`."""
    words = _words(rng, rng.randint(120, 260))
    a = normalise(" ".join(words), False)
    sa = shingle_set(a, D.shingle_words)
    edited = list(words)
    while True:
        i = rng.randrange(len(edited))
        edited[i] = "".join(rng.choices(string.ascii_lowercase, k=6))
        b = normalise(" ".join(edited), False)
        if exact_jaccard(sa, shingle_set(b, D.shingle_words)) <= target:
            return a, b


def _build_decides(a: str, b: str) -> bool:
    """The build's decision for two records (band entries, a group by key, bucket_edges)."""
    texts = {"r0": a, "r1": b}
    sigs = signatures([a, b], num_perm=D.num_perm, seed=D.seed, width=D.shingle_words)
    buckets: dict[str, list[Any]] = defaultdict(list)
    bands, rows = candidate_bands(D.threshold, D.num_perm)
    for k, (text, sig) in enumerate(zip((a, b), sigs, strict=True)):
        fp = Fingerprint(f"r{k}", "", "inhouse", "", "terminal", 1, exact_key(text), tuple(sig), "")
        for key, member in band_entries(fp, CFG, bands, rows):
            buckets[key].append(member)

    def shingles(member: Any) -> frozenset[str]:
        return shingle_set(texts[member[1]], D.shingle_words)

    return any(True for element in buckets.items() for _ in bucket_edges(element, CFG, shingles))


@settings(max_examples=60, deadline=None)
@given(threshold=st.floats(min_value=0.5, max_value=0.95), num_perm=st.sampled_from([64, 128, 256]))
def test_candidate_bands_make_pairs_at_the_threshold_candidates(threshold: float, num_perm: int) -> None:
    bands, rows = candidate_bands(threshold, num_perm)
    assert bands * rows <= num_perm
    assert 1 - (1 - threshold**rows) ** bands >= 1 - CANDIDATE_MISS, (threshold, num_perm, bands, rows)
    assert s_curve_midpoint(bands, rows) < threshold


def test_pairs_just_either_side_of_the_threshold_are_decided_by_their_exact_jaccard() -> None:
    """Within 0.03 of the threshold the estimate (sd ~0.035) cannot tell; the exact check can."""
    rng = random.Random(7)
    above = [_pair(rng, rng.uniform(D.threshold, D.threshold + 0.03)) for _ in range(80)]
    below = [_pair(rng, rng.uniform(D.threshold - 0.03, D.threshold - 0.001)) for _ in range(80)]
    above = [
        (a, b)
        for a, b in above
        if exact_jaccard(shingle_set(a, D.shingle_words), shingle_set(b, D.shingle_words)) >= D.threshold
    ]
    found_above = [_build_decides(a, b) for a, b in above]
    found_below = [_build_decides(a, b) for a, b in below]
    assert not any(found_below)
    assert sum(found_above) / len(found_above) >= 0.9, (sum(found_above), len(found_above))


def test_near_duplicate_pre_filter_never_asks_for_the_shingles_of_distant_pairs() -> None:
    rng = random.Random(3)
    a, b = (normalise(" ".join(_words(rng, 150)), False) for _ in range(2))
    sa, sb = signatures([a, b], num_perm=D.num_perm, seed=D.seed, width=D.shingle_words)

    def fail() -> frozenset[str]:
        raise AssertionError("shingles asked for a pair the estimate rules out")

    assert not near_duplicate(sa, sb, fail, fail, D.threshold)
    same = shingle_set(a, D.shingle_words)
    assert near_duplicate(sa, sa, lambda: same, lambda: same, D.threshold)


def test_both_verify_paths_decide_every_pair_as_the_build_does() -> None:
    rng = random.Random(11)
    pairs = [_pair(rng, rng.uniform(0.6, 1.0)) for _ in range(60)]
    bands, rows = candidate_bands(D.threshold, D.num_perm)
    for a, b in pairs:
        build = _build_decides(a, b)
        sa, sb = signatures([a, b], num_perm=D.num_perm, seed=D.seed, width=D.shingle_words)
        index = ExactNearDuplicateIndex(D.threshold, D.num_perm, D.shingle_words)
        index.add("a", sa, a)
        in_process = index.query(sb, b) == ["a"]
        buckets: dict[str, list[tuple[str, list[int], str]]] = defaultdict(list)
        for rid, sig, text in (("a", sa, a), ("b", sb, b)):
            for key in band_keys(sig, bands, rows):
                buckets[key].append((rid, sig, text))
        beam_pairs = {
            p for element in buckets.items() for p in bucket_pairs(element, D.threshold, D.shingle_words)
        }
        assert build == in_process == (beam_pairs == {("a", "b")}), (a, b)


def test_spilled_records_and_corpus_documents_give_back_the_text_they_were_fingerprinted_from(
    tmp_path: Path,
) -> None:
    work = str(tmp_path)
    trajs = [terminal(f"t{i}", "g", SourceKind.INHOUSE, seed=i) for i in range(3)]
    texts = [trajectory_text(t, CFG) for t in trajs]
    sigs = signatures(texts, num_perm=D.num_perm, seed=D.seed, width=D.shingle_words)
    table = pa.Table.from_pylist([t.to_record() for t in trajs], schema=TRAJECTORY_SCHEMA)
    table = table.append_column(KEPT_SCHEMA.field("_content"), pa.array(["c"] * 3, pa.string()))
    table = table.append_column(
        KEPT_SCHEMA.field("_signature"), pa.array(sigs, KEPT_SCHEMA.field("_signature").type)
    )
    (tmp_path / "kept").mkdir()
    write_ipc(kept_path(work, 5), table.replace_schema_metadata(KEPT_SCHEMA.metadata))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": f"Doc {i}: Port 80{i} open."}) + "\n" for i in range(3))
    )
    docs = list(read_knowledge_file(str(corpus)))

    spilled = SpilledSignatures(work, cfg=CFG)
    for row, (text, sig) in enumerate(zip(texts, sigs, strict=True)):
        member = ((0, 0, 0, ""), f"t{row}", "", (5, row))
        assert spilled.text((5, row)) == text
        assert spilled.packed((5, row)) == pack_signature(sig)
        assert spilled.shingles(member) == shingle_set(text, D.shingle_words)
    for i, doc in enumerate(docs):
        text = normalise(doc.text, D.fold_digits_observations)
        (sig,) = signatures([text], num_perm=D.num_perm, seed=D.seed, width=D.shingle_words)
        assert spilled.text((str(corpus), i)) == text
        assert spilled.packed((str(corpus), i)) == pack_signature(sig)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_a_bucket_gives_the_same_edges_in_any_member_order(seed: int) -> None:
    rng = random.Random(seed)
    base = _words(rng, 150)
    texts = []
    for _ in range(5):
        edited = list(base)
        for _ in range(rng.randint(0, 6)):
            edited[rng.randrange(len(edited))] = "".join(rng.choices(string.ascii_lowercase, k=6))
        texts.append(normalise(" ".join(edited), False))
    sigs = signatures(texts, num_perm=D.num_perm, seed=D.seed, width=D.shingle_words)
    members = [
        band_entries(
            Fingerprint(f"r{k}", "", "inhouse", "", "terminal", 1, exact_key(t), tuple(s), ""), CFG, 1, 1
        )[0][1]
        for k, (t, s) in enumerate(zip(texts, sigs, strict=True))
    ]
    sets = {f"r{k}": shingle_set(t, D.shingle_words) for k, t in enumerate(texts)}
    edges = list(bucket_edges(("b", members), CFG, lambda m: sets[m[1]]))
    shuffled = rng.sample(members, len(members))
    assert list(bucket_edges(("b", shuffled), CFG, lambda m: sets[m[1]])) == edges
    head = edges[0][0] if edges else None
    for a, b, *_ in edges:
        assert a == head and exact_jaccard(sets[a], sets[b]) >= D.threshold


def _edited_to(text: str, lo: float, hi: float, rng: random.Random, fold: bool) -> str:
    """`text` with words replaced one by one until the exact shingle Jaccard of the normalised texts
    lies in [lo, hi] (the first edit at or below hi)."""
    original = shingle_set(normalise(text, fold), D.shingle_words)
    words = text.split(" ")
    while True:
        words[rng.randrange(len(words))] = "".join(rng.choices(string.ascii_lowercase, k=7))
        j = exact_jaccard(original, shingle_set(normalise(" ".join(words), fold), D.shingle_words))
        if j <= hi:
            assert j >= lo, j
            return " ".join(words)


def test_a_build_removes_what_is_above_the_threshold_by_exact_jaccard_and_verify_agrees(
    tmp_path: Path,
) -> None:
    """Trajectory and knowledge-document pairs just above and just below the threshold, through a
    whole build: only the pairs above lose a member, and both verify paths find nothing."""
    from pipelines.build import resolve_inputs, run_build
    from pipelines.finalize import finalize
    from pipelines.verify import verify_pools
    from schemas.shards import write_trajectories
    from tests.helpers.pools_data import prose

    rng = random.Random(5)
    trajs = []
    for name, seed, lo, hi in (("above", 1, 0.805, 0.83), ("below", 2, 0.77, 0.795)):
        a = terminal(f"{name}-a", f"g-{name}-a", SourceKind.INHOUSE, seed, turns=2)
        for k, turn in enumerate(a.turns):
            turn.observation.text = prose(seed * 10 + k, 400)
        b = terminal(f"{name}-b", f"g-{name}-b", SourceKind.INHOUSE, seed, turns=2)
        for turn, source in zip(b.turns, a.turns, strict=True):
            turn.observation.text = source.observation.text
        original = shingle_set(trajectory_text(a, CFG), D.shingle_words)
        words = b.turns[1].observation.text.split(" ")
        while True:  # words replaced in the second observation until the records' Jaccard is in range
            words[rng.randrange(len(words))] = "".join(rng.choices(string.ascii_lowercase, k=7))
            b.turns[1].observation.text = " ".join(words)
            j = exact_jaccard(original, shingle_set(trajectory_text(b, CFG), D.shingle_words))
            if j <= hi:
                assert j >= lo, j
                break
        trajs += [a, b]
    write_trajectories(tmp_path / "shards", trajs)
    doc = prose(77, 600)
    docs = [doc, _edited_to(doc, 0.805, 0.83, rng, False), prose(78, 600)]
    docs.append(_edited_to(docs[2], 0.77, 0.795, rng, False))
    corpus = tmp_path / "knowledge.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"k{i}", "text": t}) + "\n" for i, t in enumerate(docs)))
    (tmp_path / "pools.yaml").write_text("assignment:\n  by_kind: {inhouse: sft, knowledge: cpt}\n")
    cfg = PoolsConfig.load(tmp_path / "pools.yaml")
    out, ins, know = tmp_path / "out", [str(tmp_path / "shards")], [str(corpus)]
    run_build(resolve_inputs(ins, know, [], cfg), str(out), cfg, [])
    manifest = finalize(out, cfg, ins, know, [])

    def dedup_removed(folder: Path) -> set[tuple[str, str]]:
        return {
            (r["record_id"], r["reason"])
            for f in sorted((folder / "removed").glob("part-*.parquet"))
            for r in pq.read_table(f).to_pylist()
            if r["stage"] == "dedup"
        }

    removed = {rid for rid, _ in dedup_removed(out)}
    # One of each pair above the threshold (the survivor is the better-ranked), none below it.
    assert len(removed) == 2 and len(removed & {"above-a", "above-b"}) == len(removed & {"k0", "k1"}) == 1
    assert manifest["stats"]["dropped.near_duplicate"] == 2
    assert [v.to_json() for v in verify_pools(out, cfg)] == []
    assert [v.to_json() for v in verify_pools(out, cfg, beam_args=[])] == []
    # Two worker processes (each reading texts back from the spilled files) decide the same.
    two = tmp_path / "two"
    run_build(
        resolve_inputs(ins, know, [], cfg),
        str(two),
        cfg,
        ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"],
    )
    assert dedup_removed(two) == dedup_removed(out)
