# Beam's transforms carry no type annotations; calling them is the point of this module.
# mypy: disable-error-code="no-untyped-call"
"""The pool-building Beam job: the stages of `pipelines.stages` composed into one pipeline.

    read -> filter -> dedup -> decontaminate -> assign -> render -> write

Input parts are cut into row-range splits (a few hundred trajectories each), so every worker gets
work. One fused stage per split (`PrepareInput`) reads, validates, filters and fingerprints, and
spills the kept rows as one Arrow file under OUT/_build; only small fingerprints and file names
travel between stages, through the shuffles that need a global view (LSH bands, duplicate ids,
source groups). Rendering reads the spilled rows back, writes sorted runs per output part, and the
write stage merges each part's runs and writes the part with its trainer export. Every choice is a
seeded hash of ids and every part is sorted by its key, so the default runner, the multi-process
runner and Dataflow/Flink/Spark/Dask write identical pools.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics.metric import Metrics
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState
from apache_beam.transforms import combiners

from pipelines import fs
from pipelines.config import PoolsConfig
from pipelines.inputs import read_knowledge_file
from pipelines.minhash import candidate_bands, exact_key, lsh_bands, normalise, signatures
from pipelines.runners import drops_output_tags, multi_output, release, runner_for, with_dask_partitions
from pipelines.stages import all_stages, bulk_gc, stage_of, tune_gc_for_bulk_work
from pipelines.stages.assign import (
    CountKinds,
    choose_pool,
    decide_group_pool,
    group_kind_counts,
    group_pool_from_kinds,
    record_group,
)
from pipelines.stages.decontaminate import EvalGrams, EvalPoolGrams, EvalTurnMatcher, turn_texts
from pipelines.stages.dedup import (
    KEPT_SCHEMA,
    BucketEdges,
    ClusterEdges,
    Fingerprint,
    SignatureRef,
    band_entries,
    content_hash,
    duplicate_id_losers,
    kept_path,
    trajectory_text,
)
from pipelines.stages.filter import filter_rows
from pipelines.stages.read import (
    BuildInputs,
    ReadSplit,
    plan_splits,
    read_split,
    resolve_inputs,
    row_groups_of,
)
from pipelines.stages.render import RoutePools
from pipelines.stages.spill import (
    ASSIGNMENTS,
    REMOVED,
    SPILL_DIRS,
    WORK_DIR,
    join,
    mkdirs,
    spill_runs,
    write_ipc,
)
from pipelines.stages.write import write_eval_turns, write_part, write_stats
from schemas.trajectory import TRAJECTORY_SCHEMA

__all__ = [
    "ASSIGNMENTS",
    "REMOVED",
    "WORK_DIR",
    "BuildInputs",
    "EvalTurnMatcher",
    "Fingerprint",
    "build_pipeline",
    "choose_pool",
    "decide_group_pool",
    "group_kind_counts",
    "group_pool_from_kinds",
    "plan_splits",
    "resolve_inputs",
    "run_build",
    "turn_texts",
]
DOC_BATCH = 256
"""Knowledge documents per rendering element."""


class PrepareInput(beam.DoFn):
    """Reads: one ReadSplit (validated, filtered and fingerprinted in one pass) or one knowledge
    corpus file (fingerprinted). Every record is fingerprinted here, in one fused stage, and the
    compact values the global stages shuffle leave this stage directly.

    Writes, per record: (band key, BandMember) per LSH band (main); "ids": (id, content hash);
    "kinds": (source group, source kind); "contaminated": (id, evaluation sample id) when it overlaps
    one. Per input: the spilled kept rows' file name or a batch of documents ("kept"), a run of
    removed rows ("runs") and stats.
    """

    def __init__(
        self,
        cfg: PoolsConfig,
        eval_turns: list[tuple[str, int, list[int]]],
        work: str,
        eval_grams: EvalGrams | None = None,
    ) -> None:
        self.cfg = cfg
        self.eval_turns = eval_turns
        self.eval_grams = eval_grams or []
        self.work = work
        # Banding parameters are chosen once, in the driver, and travel with the DoFn.
        self.bands_rows = candidate_bands(cfg.dedup.threshold, cfg.dedup.num_perm)
        self.eval_bands_rows = lsh_bands(cfg.decontamination.threshold, cfg.dedup.num_perm)

    def setup(self) -> None:
        tune_gc_for_bulk_work()
        self.matcher = EvalTurnMatcher(self.cfg, self.eval_turns, self.eval_bands_rows, self.eval_grams)

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
        texts = [normalise(doc.text, d.fold_digits_observations) for doc in docs]
        sigs = signatures(texts, num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)
        for i, (doc, text, sig) in enumerate(zip(docs, texts, sigs, strict=True)):
            fp = Fingerprint(
                doc.id,
                content_hash(doc.to_json()),
                "knowledge",
                doc.group,
                "knowledge",
                1,
                exact_key(text),
                tuple(sig),
                self.matcher.match_text(normalise(doc.text)) if self.matcher else "",
            )
            # Documents are not spilled: buckets read their text back from the corpus file.
            yield from self.fingerprint_outputs(fp, (path, i))
        for start in range(0, len(docs), DOC_BATCH):
            yield beam.pvalue.TaggedOutput("kept", docs[start : start + DOC_BATCH])

    def prepare_split(self, split: ReadSplit) -> Iterator[Any]:
        table = read_split(split)
        filtered = filter_rows(table, split.path, self.cfg)
        stats: Counter[str] = Counter(records_in=table.num_rows)
        stats.update(filtered.stats)
        removed = filtered.removed
        kept = [(t, t.to_record()) for t in filtered.kept]
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
        texts = [trajectory_text(t, self.cfg) for t, _ in kept]
        sigs = signatures(texts, num_perm=d.num_perm, seed=d.seed, width=d.shingle_words)
        contents = [content_hash(rec) for _, rec in kept]
        spilled = pa.Table.from_pylist([rec for _, rec in kept], schema=TRAJECTORY_SCHEMA)
        spilled = spilled.append_column(KEPT_SCHEMA.field("_content"), pa.array(contents, pa.string()))
        spilled = spilled.append_column(
            KEPT_SCHEMA.field("_signature"), pa.array(sigs, KEPT_SCHEMA.field("_signature").type)
        )
        path = kept_path(self.work, split.index)
        write_ipc(path, spilled.replace_schema_metadata(KEPT_SCHEMA.metadata))
        yield beam.pvalue.TaggedOutput("kept", path)
        group_by = self.cfg.assignment.group_by
        for row, ((traj, _), text, sig, content) in enumerate(zip(kept, texts, sigs, contents, strict=True)):
            group, defaulted = record_group(traj.source, traj.task, traj.id, group_by)
            if defaulted:
                yield beam.pvalue.TaggedOutput("stats", ("groups_defaulted", 1))
                yield beam.pvalue.TaggedOutput("stats", (f"groups_defaulted_by.{defaulted}", 1))
            fp = Fingerprint(
                id=traj.id,
                content=content,
                kind=traj.source.kind.value,
                group=group,
                domain=traj.domain.value,
                num_turns=len(traj.turns),
                exact=exact_key(text),
                signature=tuple(sig),
                contaminated_by=self.matcher.match_trajectory(traj),
            )
            yield from self.fingerprint_outputs(fp, (split.index, row))


def build_pipeline(
    p: beam.Pipeline, inputs: BuildInputs, out: str, cfg: PoolsConfig, batch_rows: int = 256
) -> None:
    """Add the whole pool build to pipeline `p`; `batch_rows` is the size of a read split."""
    shards = plan_buckets(inputs, cfg)
    work = join(out, WORK_DIR)
    files = sorted(inputs.trajectory_files)
    row_groups = {f: inputs.row_groups.get(f) or row_groups_of(f) for f in files}
    splits = plan_splits([(f, row_groups[f]) for f in files], batch_rows)
    # One PCollection of work items (read splits and knowledge files), so a single fused stage
    # fingerprints everything and writes straight into the shuffles: a Flatten in front of a
    # shuffle would cost the local runners an extra pass of the data through a worker.
    pairs = drops_output_tags(p.options)
    items = (
        p
        | "ReadSplits" >> beam.Create([*splits, *sorted(inputs.knowledge_files)], reshuffle=False)
        # Spread the work over the workers before the heavy, fused read-filter-fingerprint stage
        # (one shuffle of the small work items; Create's own would be a second one).
        | "Reshuffle" >> beam.Reshuffle()
    )
    prepared = multi_output(
        items,
        "PrepareInputs",
        PrepareInput(cfg, inputs.eval_turns, work, inputs.eval_grams),
        ["kept", "runs", "stats", "ids", "kinds", "contaminated"],
        "bands",
        pairs,
    )
    losers = (
        prepared["ids"]
        | "GroupIds" >> beam.GroupByKey()
        | "DuplicateIds" >> beam.FlatMap(duplicate_id_losers)
    )
    clusters = (
        prepared["bands"]
        | "GroupBands" >> beam.GroupByKey()
        | "VerifiedEdges" >> beam.ParDo(BucketEdges(cfg, work))
        | "Clusters" >> beam.CombineGlobally(ClusterEdges())
    )
    contaminated = prepared["contaminated"]
    group_pool = (
        prepared["kinds"]
        | "CountKinds" >> beam.CombinePerKey(CountKinds())
        | "GroupPool" >> beam.Map(group_pool_from_kinds, cfg)
    )

    # The eval pool's own turns, once groups are assigned: training records must not contain them.
    pool_grams = prepared["kept"] | "EvalPoolGrams" >> beam.ParDo(
        EvalPoolGrams(cfg),
        group_pool=beam.pvalue.AsDict(group_pool),
        clusters=beam.pvalue.AsSingleton(clusters),
        contaminated_list=beam.pvalue.AsList(contaminated),
    )
    side = dict(
        eval_pool_grams=beam.pvalue.AsList(pool_grams),
        clusters=beam.pvalue.AsSingleton(clusters),
        losers_list=beam.pvalue.AsList(losers),
        contaminated_list=beam.pvalue.AsList(contaminated),
        group_pool=beam.pvalue.AsDict(group_pool),
    )
    kept = prepared["kept"] | "ReshuffleKept" >> beam.Reshuffle()
    routed = multi_output(
        kept,
        "RoutePools",
        RoutePools(cfg, shards, work, inputs.span_label_files),
        ["stats"],
        "runs",
        pairs,
        **side,
    )
    runs = (prepared["runs"], routed["runs"]) | "AllRuns" >> beam.Flatten()
    written = (
        runs
        | "GroupParts" >> beam.GroupByKey()
        | "WriteParts" >> beam.FlatMap(write_part, out, cfg.part_max_bytes)
    )
    (
        (prepared["stats"], routed["stats"], written)
        | "AllStats" >> beam.Flatten()
        | "SurfaceCounters" >> beam.Map(surface_counter)
        | "SumStats" >> beam.CombinePerKey(sum)
        | "StatsDict" >> combiners.ToDict()
        | "WriteStats" >> beam.Map(write_stats, out)
    )


POOL_BYTES_PER_INPUT_BYTE = {"cpt": 4.0, "sft": 12.0, "rl": 3.0, "eval": 1.5, "assignments": 0.5}
"""Rough output bytes (Arrow, uncompressed) per input byte (Parquet, zstd) of each table: SFT repeats
the history in every sample, CPT and RL render it once. Only the number of parts depends on it: the
byte bound itself is enforced when a part is written (`pipelines.stages.write`)."""


def plan_buckets(inputs: BuildInputs, cfg: PoolsConfig) -> dict[str, int]:
    """Output buckets per table: enough that a bucket holds at most `trajectories_per_shard`
    trajectories and about `part_max_bytes` of rows, so parts are few, full and bounded."""
    by_rows = max(1, math.ceil(max(inputs.total_rows, 1) / cfg.trajectories_per_shard))
    return {
        name: max(by_rows, math.ceil(inputs.input_bytes * factor / cfg.part_max_bytes))
        for name, factor in POOL_BYTES_PER_INPUT_BYTE.items()
    }


def surface_counter(stat: tuple[str, int]) -> tuple[str, int]:
    """Mirror a build counter into Beam's metrics, namespaced by the stage that declares it, so
    runners' UIs (Dataflow, Dask) and `pools build` show progress per stage while the job runs."""
    name, n = stat
    Metrics.counter(stage_of(name), name).inc(n)
    return stat


ProgressFn = Callable[[str, dict[str, int]], None]


def report_counters(result: Any, progress: ProgressFn) -> None:
    """Call `progress(stage, counters)` for every stage with counters in the job's metrics."""
    per_stage: dict[str, dict[str, int]] = {}
    try:
        counters = result.metrics().query().get("counters", [])
    except (NotImplementedError, AttributeError):  # runners without a metrics API (e.g. DaskRunner)
        return
    for c in counters:
        value = c.committed if c.committed is not None else c.attempted
        per_stage.setdefault(c.key.metric.namespace, {})[c.key.metric.name] = int(value or 0)
    for stage in [s.name for s in all_stages()] + ["build"]:
        if stage in per_stage:
            progress(stage, per_stage[stage])


def wait_reporting(result: Any, progress: ProgressFn | None, poll_seconds: float) -> Any:
    """Wait for a running job to reach a terminal state, passing its counters to `progress` at every
    poll; returns the state."""
    while True:
        try:
            state = result.wait_until_finish(duration=int(poll_seconds * 1000))
        except TypeError:  # runners whose results take no duration
            state = result.wait_until_finish()
        except TimeoutError:  # the DaskRunner signals "still running" by raising
            state = PipelineState.RUNNING
        if PipelineState.is_terminal(state or PipelineState.DONE):
            return state
        if progress is not None:
            report_counters(result, progress)


def run_build(
    inputs: BuildInputs,
    out: str,
    cfg: PoolsConfig,
    beam_args: list[str],
    progress: ProgressFn | None = None,
    poll_seconds: float = 15.0,
) -> None:
    """Run the Beam job to completion on whichever runner `beam_args` name (local FnApiRunner by
    default); `progress` receives the per-stage counters while a remote job runs and at the end."""
    options = PipelineOptions(with_dask_partitions(beam_args), save_main_session=False)
    mkdirs(out)
    p = beam.Pipeline(runner=runner_for(options), options=options)
    build_pipeline(p, inputs, out, cfg)
    with bulk_gc():
        result = p.run()
        try:
            state = wait_reporting(result, progress, poll_seconds)
            if progress is not None and state in (None, PipelineState.DONE):
                report_counters(result, progress)
        finally:
            release(result)
    if state not in (None, PipelineState.DONE):
        raise RuntimeError(f"the pools job ended in state {state}")
    write_eval_turns(inputs.eval_turns, out)
    for name in SPILL_DIRS:  # on an object store: every object under the prefix
        fs.delete_tree(join(out, WORK_DIR, name))
