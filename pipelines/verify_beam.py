# Beam's transforms carry no type annotations; calling them is the point of this module.
# mypy: disable-error-code="no-untyped-call"
"""`pools verify` as a Beam job, for outputs too large for one process: the same checks as
`pipelines.verify`, with the per-part work spread over workers.

    pool parts --CheckPart--> row violations + facts --Merge--> disjointness, stats, assignments
    manifest part entries --Checksum--> checksum violations
    input parts --Occurrences--> (id, first occurrence) --GroupByKey--> record facts
        record facts --exact key GroupByKey--> exact duplicates
        record facts --LSH band GroupByKey--> near duplicates (exact shingle Jaccard verified)
    all violations --> one report file read back by the driver

Every step calls the function the in-process verify calls (`check_part_rows`, `merge_pool_rows`,
`ContentChecker`, `exact_entries`, ...), and the report is order-independent (`Report`), so both
give the same verdict and the same report (tested on a clean output and on every planted violation).
What is global stays global: the merged pool facts (ids, groups, clusters per pooled record) are
combined in one worker, as the in-process verify holds them in one process.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from functools import partial
from itertools import combinations
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import combiners

from pipelines import fs
from pipelines.config import ALL_POOLS, EVAL_POOL, PoolsConfig
from pipelines.inputs import read_knowledge_file
from pipelines.minhash import band_keys, candidate_bands, near_duplicate, shingle_set
from pipelines.runners import release, runner_for, with_dask_partitions
from pipelines.stages import bulk_gc, tune_gc_for_bulk_work
from pipelines.stages.spill import ASSIGNMENTS, WORK_DIR
from pipelines.verify_checks import (
    ContentChecker,
    Entry,
    EvalInputs,
    PartFacts,
    PoolRows,
    RecordFacts,
    Report,
    assignment_pairs,
    check_assignments,
    check_part_checksum,
    check_part_rows,
    check_stats,
    check_unlisted_parts,
    eval_inputs,
    eval_part_grams,
    exact_entries,
    filtered_entry,
    input_record_parts,
    knowledge_parts,
    merge_pool_rows,
    near_entry,
    not_found_entries,
    part_occurrences,
    pool_part_files,
)


class CheckPart(beam.DoFn):
    """Reads: (pool, part path). Writes: ("entry", violation) per row violation and ("facts",
    (path, PartFacts)) once."""

    def __init__(self, cfg: PoolsConfig, tokenizer: str | None) -> None:
        self.cfg = cfg
        self.tokenizer = tokenizer

    def setup(self) -> None:
        from worldline.tokenizer import get_token_counter

        self.counter = get_token_counter(self.tokenizer or None) if self.tokenizer is not None else None
        tune_gc_for_bulk_work()

    def process(self, element: tuple[str, str]) -> Iterator[tuple[str, Any]]:
        pool, path = element
        report = Report()
        facts = check_part_rows(path, pool, self.cfg, self.counter, report)
        yield from (("entry", e) for e in report.entries())
        yield ("facts", (path, facts))


def merge_facts(
    _: None,
    parts: list[tuple[str, PartFacts]],
    assigned: list[tuple[str, str]],
    manifest: dict[str, Any],
    cfg: PoolsConfig,
) -> tuple[PoolRows, list[Entry]]:
    report = Report()
    seen = merge_pool_rows(parts, cfg, report)
    check_stats(manifest, seen, report)
    check_assignments(assigned, seen, report)
    return seen, report.entries()


class Occurrences(beam.DoFn):
    """Reads: (order, input, part) of a trajectory input or (order, "", knowledge file). Writes:
    (record key, (order, row, RecordFacts or None when the filters remove it)) for every pooled
    record, and ("entry", violation) when a part cannot be read."""

    def __init__(self, cfg: PoolsConfig, evals: EvalInputs) -> None:
        self.cfg = cfg
        self.evals = evals
        # Built once per side-input value (held, so `is` compares the very object).
        self._checker: tuple[list[Any], ContentChecker] | None = None
        self._pooled: tuple[PoolRows, dict[str, str]] | None = None

    def checker(self, pool_grams: list[Any]) -> ContentChecker:
        if self._checker is None or self._checker[0] is not pool_grams:
            self._checker = (pool_grams, ContentChecker(self.cfg, self.evals, pool_grams))
        return self._checker[1]

    def process(self, element: tuple[int, str, str], seen: PoolRows, pool_grams: list[Any]) -> Iterator[Any]:
        order, item, part = element
        checker = self.checker(pool_grams)
        if not item:  # a knowledge corpus file
            for row, doc in enumerate(read_knowledge_file(part)):
                if doc.id in seen.knowledge:
                    yield (("doc", doc.id), (order, row, checker.document(doc)))
            return
        report = Report()
        if self._pooled is None or self._pooled[0] is not seen:
            self._pooled = (seen, {t: p for t, p in seen.pooled.items() if t not in seen.knowledge})
        pooled = self._pooled[1]
        for rid, row, traj in part_occurrences(item, part, self.cfg, pooled, report):
            facts = None
            if traj is not None:
                facts = checker.trajectory(traj, seen.pooled[rid], seen.rl_ground_truth.get(rid))
            yield (("traj", rid), (order, row, facts))
        yield from (("entry", e) for e in report.entries())


def first_occurrence(element: tuple[tuple[str, str], Iterable[Any]]) -> Iterator[tuple[str, Any]]:
    """As the in-process verify reads inputs in order: filtered occurrences before the first kept
    one are violations, the first kept one is the record, later ones are not read."""
    (kind, rid), occurrences = element
    for _, _, facts in sorted(occurrences, key=lambda o: (o[0], o[1])):
        if facts is None:
            yield ("entry", filtered_entry(rid))
            continue
        yield ("record", facts)
        yield ("found" if kind == "traj" else "found_doc", rid)
        yield from (("entry", e) for e in facts.entries)
        return


BandMember = tuple[str, list[int], str]
"""(record id, signature, normalised text) of one pooled record in an LSH band bucket."""


def band_members(facts: RecordFacts, bands: int, rows: int) -> Iterator[tuple[str, BandMember]]:
    for key in band_keys(facts.signature, bands, rows):
        yield key, (facts.rid, facts.signature, facts.text)


def bucket_pairs(
    element: tuple[str, Iterable[BandMember]], threshold: float, width: int
) -> Iterator[tuple[str, str]]:
    """Every pair in one band bucket that the build calls near duplicates (`near_duplicate`)."""
    members = sorted(element[1], key=lambda m: m[0])
    sets: dict[str, frozenset[str]] = {}

    def shingles(member: BandMember) -> frozenset[str]:
        if member[0] not in sets:
            sets[member[0]] = shingle_set(member[2], width)
        return sets[member[0]]

    for ma, mb in combinations(members, 2):
        if near_duplicate(ma[1], mb[1], partial(shingles, ma), partial(shingles, mb), threshold):
            yield (ma[0], mb[0])


def lineage_entries(
    _: None, entries: list[Entry], found: list[str], found_docs: list[str], seen: PoolRows
) -> list[Entry]:
    missing = any(check == "input_missing" for check, _, _ in entries)
    return not_found_entries(seen, set(found), set(found_docs), missing)


def _split(pairs: Any, tag: str, label: str) -> Any:
    return pairs | label >> beam.FlatMap(lambda kv, t=tag: [kv[1]] if kv[0] == t else [])


def build_verify_pipeline(
    p: beam.Pipeline,
    out: str,
    manifest: dict[str, Any],
    cfg: PoolsConfig,
    tokenizer: str | None,
    check_inputs: bool,
    driver: Report,
    result_path: str,
) -> None:
    """Add the verify job to `p`; the job writes every violation it finds to `result_path`."""
    pool_parts = [(pool, f) for pool in ALL_POOLS for f in pool_part_files(out, pool)]
    checked = (
        p
        | "PoolParts" >> beam.Create(pool_parts, reshuffle=True)
        | "CheckPart" >> beam.ParDo(CheckPart(cfg, tokenizer))
    )
    entries = [_split(checked, "entry", "RowViolations")]
    facts = _split(checked, "facts", "PartFacts")
    assigned = (
        p
        | "AssignmentParts" >> beam.Create(pool_part_files(out, ASSIGNMENTS))
        | "Assignments" >> beam.FlatMap(assignment_pairs)
    )
    merged = (
        p
        | "One" >> beam.Create([None])
        | "MergeFacts"
        >> beam.Map(merge_facts, beam.pvalue.AsList(facts), beam.pvalue.AsList(assigned), manifest, cfg)
    )
    seen = merged | "Seen" >> beam.Map(lambda m: m[0])
    entries.append(merged | "MergeViolations" >> beam.FlatMap(lambda m: m[1]))
    checksums = [(pool, f) for pool, info in manifest["pools"].items() for f in info["files"]]
    entries.append(
        p | "PartEntries" >> beam.Create(checksums) | "Checksums" >> beam.FlatMap(checksum_entries, out)
    )
    if check_inputs:
        evals = eval_inputs(manifest, cfg, driver)
        items = [(i, item, part) for i, (item, part) in enumerate(input_record_parts(manifest, driver))]
        items += [(len(items) + i, "", f) for i, f in enumerate(knowledge_parts(manifest))]
        pool_grams = (
            p
            | "EvalPoolParts" >> beam.Create(pool_part_files(out, EVAL_POOL))
            | "EvalPoolGrams" >> beam.FlatMap(eval_part_grams, cfg)
        )
        occurrences = (
            p
            | "InputParts" >> beam.Create(items, reshuffle=True)
            | "Occurrences"
            >> beam.ParDo(
                Occurrences(cfg, evals),
                seen=beam.pvalue.AsSingleton(seen),
                pool_grams=beam.pvalue.AsList(pool_grams),
            )
        )
        entries.append(_split(occurrences, "entry", "UnreadableParts"))
        firsts = (
            occurrences
            | "RecordOccurrences" >> beam.Filter(lambda kv: kv[0] != "entry")
            | "GroupOccurrences" >> beam.GroupByKey()
            | "FirstOccurrence" >> beam.FlatMap(first_occurrence)
        )
        entries.append(_split(firsts, "entry", "RecordViolations"))
        records = _split(firsts, "record", "Records")
        exact = (
            records
            | "ExactKeys" >> beam.Map(lambda f: (f.exact, f.rid))
            | "GroupExact" >> beam.GroupByKey()
            | "ExactDuplicates" >> beam.FlatMap(lambda kv: exact_entries(list(kv[1])))
        )
        bands, rows = candidate_bands(cfg.dedup.threshold, cfg.dedup.num_perm)
        near = (
            records
            | "Bands" >> beam.FlatMap(band_members, bands, rows)
            | "GroupBands" >> beam.GroupByKey()
            | "BucketPairs" >> beam.FlatMap(bucket_pairs, cfg.dedup.threshold, cfg.dedup.shingle_words)
            | "DistinctPairs" >> beam.Distinct()
            | "NearDuplicates" >> beam.Map(lambda ab: near_entry(*ab))
        )
        entries += [exact, near]
        so_far = tuple(entries) | "EntriesSoFar" >> beam.Flatten()
        driver_entries = p | "DriverEntries" >> beam.Create(driver.entries())
        entries.append(
            p
            | "Lineage" >> beam.Create([None])
            | "NotFound"
            >> beam.FlatMap(
                lineage_entries,
                beam.pvalue.AsList((so_far, driver_entries) | "AllSoFar" >> beam.Flatten()),
                beam.pvalue.AsList(_split(firsts, "found", "Found")),
                beam.pvalue.AsList(_split(firsts, "found_doc", "FoundDocs")),
                beam.pvalue.AsSingleton(seen),
            )
        )
    (
        tuple(entries)
        | "AllViolations" >> beam.Flatten()
        | "Report" >> combiners.ToList()
        | "WriteReport" >> beam.Map(lambda found: fs.write_json(result_path, sorted(found, key=str)))
    )


def checksum_entries(element: tuple[str, dict[str, Any]], out: str) -> list[Entry]:
    report = Report()
    check_part_checksum(out, element[0], element[1], report)
    return report.entries()


def run_verify(
    out: str,
    manifest: dict[str, Any],
    cfg: PoolsConfig,
    tokenizer: str | None,
    check_inputs: bool,
    beam_args: list[str],
) -> list[Entry]:
    """Run the verify job on the runner `beam_args` name (the local runner when empty) and return
    every violation it found, with those the driver found while planning it."""
    driver = Report()
    check_unlisted_parts(out, manifest, driver)
    work = fs.join(out, WORK_DIR, f"verify-{uuid.uuid4().hex[:12]}")
    fs.mkdirs(work)
    result_path = fs.join(work, "violations.json")
    options = PipelineOptions(with_dask_partitions(beam_args), save_main_session=False)
    try:
        p = beam.Pipeline(runner=runner_for(options), options=options)
        build_verify_pipeline(p, out, manifest, cfg, tokenizer, check_inputs, driver, result_path)
        with bulk_gc():
            result = p.run()
            try:
                state = result.wait_until_finish()
            finally:
                release(result)
        if state not in (None, "DONE"):
            raise RuntimeError(f"the verify job ended in state {state}")
        found = [(c, d, r) for c, d, r in fs.read_json(result_path)]
    finally:
        fs.delete_tree(work)
    return driver.entries() + found
