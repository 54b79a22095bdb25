"""Pool-build throughput against datatrove, fixed cost, 2-worker scaling, MinHash speed/agreement and
peak memory, each measured in this run.

    .venv/bin/python benchmarks/pools_bench.py [--trajectories 12000] [--turns 10] [--repeats 1]
        [--memory-base 300] [--skip baseline,datatrove,dask,minhash,memory,verify]

The headline comparison is with datatrove (the `bench` extra) doing the closest equal work on the same
trajectories, each side timed as whole processes from start to exit (imports, tokenizer and models
loaded, every stage, the output written), in interleaved rounds: each round runs every worldline
runner and then datatrove with 1 and 2 workers, each on the full input and on a 10-trajectory input
(the fixed cost), and prints the load average (`os.getloadavg()`) at its start and end; the best of
the rounds (`--repeats`) is compared.

- worldline: `worldline pools build` reads the Parquet trajectory shards and validates, filters,
  canonicalises, fingerprints and deduplicates them (exact and MinHash LSH, candidates verified by
  exact Jaccard), decontaminates against the evaluation sets, assigns groups to pools, renders CPT and
  SFT samples with loss masks and Qwen token counts, and writes sorted Parquet parts, exports, cards
  and manifests. Timed on the default in-process runner (1 worker) and on the multi-process runner
  with 1 and with 2 workers.
- datatrove: the same trajectories exported once, before any timing, as JSONL documents (one per
  trajectory, its text every turn's action and observation: what worldline deduplicates on, before
  normalisation; 4 files, as its readers share input out by file), run through its MinHash example's
  four LocalPipelineExecutor stages: JsonlReader -> MinhashDedupSignature; MinhashDedupBuckets;
  MinhashDedupCluster; JsonlReader -> Qwen token count (`worldline.tokenizer`, the tokenizer the pools
  use, in a small PipelineStep) -> MinhashDedupFilter -> ParquetWriter (zstd). Its MinhashConfig has
  worldline's shingle width, seed and LSH bands x rows (`candidate_bands` of the pools config's
  threshold and num_perm); it uses its own normalisation and English (spaCy) word tokeniser, and keeps
  every LSH candidate pair without verifying it. 1 worker = 1 task per reading stage, 2 workers = 2.
  A third configuration (1 worker) swaps the spaCy tokeniser for `str.split`, the word split worldline
  shingles with: most of datatrove's time is that tokeniser, and this shows the ratio without it.
  It does not validate, filter, decontaminate, assign, render masks or write exports and cards; nor
  does it parse the nested trajectory records (the export did that).

Printed: each build's wall times per round and turns/s; worldline / datatrove turns/s with 1 worker
and with 2 (goal with 1: >= 1.5x); the fixed cost of each (goal for the default runner: <= 2 s); 2
workers / 1 worker of each (goal for worldline's multi-process runner: >= 1.8x); how many
trajectories each side kept and datatrove's seconds per step. Then, unless skipped: the earlier
single-process pyarrow baseline (the same expansion and masking, writing the same pool rows; the
retired goal compared the build with it), MinHash docs/s of rensa vs datasketch with their agreement
on a labelled near-duplicate set, peak memory of the build at 1x and 10x input, the build on Beam's
DaskRunner (LocalCluster) with 1 and 2 workers, and `pools verify` throughput and peak memory at 1x
and 10x input. Every ratio is printed from raw wall-clock times, which are printed too. The default
input (120,000 turns) keeps start-up from dominating. `--skip` leaves parts out, e.g.
`--trajectories 2000 --skip dask,minhash,memory,verify` for the comparison alone.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if TYPE_CHECKING:
    from pipelines.config import PoolsConfig
    from schemas.trajectory import Trajectory

# The project's modules are imported where they are used: the datatrove process this bench starts
# (and datatrove's worker processes, which import this file again) load only what datatrove needs and
# the tokenizer, so its start-up is not charged for ours.

VOCAB = [
    "".join("abcdefghijklmnopqrstuvwxyz"[(i // 26**k) % 26] for k in range(3)) + "x" for i in range(5000)
]
"""Letter-only words: normalisation folds digits, so numbered words would all look alike."""
CONFIG = {"assignment": {"mode": "by_ratio", "ratios": {"cpt": 0.5, "sft": 0.5}}}


def make_trajectories(n: int, turns: int, seed: int = 0) -> list[Trajectory]:
    from schemas.trajectory import (
        Action,
        ActionKind,
        ActionSpace,
        Domain,
        Observation,
        Source,
        SourceKind,
        Trajectory,
        Turn,
    )

    rng = random.Random(seed)
    out = []
    for i in range(n):
        ts = []
        for t in range(turns):
            cmd = f"cat file_{VOCAB[i % 5000]}_{VOCAB[t]}.txt | grep {rng.choice(VOCAB)}"
            obs = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(20, 200)))
            if t % 4 == 3:
                obs = cmd + "\n" + cmd  # an echo turn
            ts.append(Turn(Action(ActionKind.COMMAND, cmd), Observation(obs)))
        out.append(
            Trajectory(
                id=f"b{seed}-{i}",
                domain=Domain.TERMINAL,
                source=Source(kind=SourceKind.INHOUSE, name=f"group{i % 40}"),
                task=f"bench task {i}",
                action_space=ActionSpace(description="bash"),
                turns=ts,
            )
        )
    return out


def baseline(shards: Path, cfg: PoolsConfig, out: Path) -> tuple[int, float, dict[str, int]]:
    """Single process, no Beam: pyarrow reading, the same expansion and masking functions, and the
    pool rows written as sorted Parquet parts (what a pyarrow implementation has to produce too)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines.render import Lineage, cpt_row, sft_rows
    from pipelines.rows import POOL_SCHEMAS
    from pipelines.stages.assign import choose_pool, record_group
    from schemas.shards import shard_files
    from schemas.templates import load_template_set
    from schemas.trajectory import Trajectory
    from worldline.tokenizer import get_token_counter

    templates, counter = load_template_set(), get_token_counter()
    turns = 0
    start = time.perf_counter()
    rows: dict[str, list[dict[str, object]]] = {"cpt": [], "sft": []}
    for f in shard_files(shards):
        for batch in pq.ParquetFile(f).iter_batches(batch_size=256):
            for rec in batch.to_pylist():
                traj = Trajectory.from_record(rec)
                turns += len(traj.turns)
                # The group and pool the build chooses (one group per task by default), so both
                # sides render the same trajectories into the same pools.
                group, _ = record_group(traj.source, traj.task, traj.id, cfg.assignment.group_by)
                lineage = Lineage(group, "inhouse", traj.id)
                pool = choose_pool(cfg.assignment.ratios.pools, cfg.assignment.seed, group)
                if pool == "cpt":
                    rows["cpt"].append(cpt_row(traj, lineage, cfg, templates, counter))
                else:
                    rows["sft"].extend(sft_rows(traj, lineage, cfg, templates, counter)[0])
    for pool, items in rows.items():
        table = pa.Table.from_pylist(items, schema=POOL_SCHEMAS[pool]).sort_by("sample_id")
        (out / pool).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out / pool / "part-00000.parquet", compression="zstd", row_group_size=1000)
    return turns, time.perf_counter() - start, {pool: len(items) for pool, items in rows.items()}


def same_work(baseline_samples: dict[str, int], out: Path) -> str:
    """Whether the build wrote as many samples per pool as the baseline: the two sides did the same work."""
    built = {
        p: json.loads((out / "manifest.json").read_text())["stats"].get(f"samples.{p}", 0)
        for p in baseline_samples
    }
    verdict = "same" if built == baseline_samples else "DIFFERENT: the ratio compares different work"
    return f"samples per pool: baseline {baseline_samples}, build {built} ({verdict})"


RUNNERS: dict[str, list[str]] = {
    "in-process, 1 worker (default runner)": [],
    "multi-process, 1 worker": ["--direct_num_workers", "1", "--direct_running_mode", "multi_processing"],
    "multi-process, 2 workers": ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"],
}
"""The runner configurations timed: the default runner, and the multi-process runner at 1 and 2 workers
(the same runner at two worker counts: the scaling measurement)."""


def beam_build(shards: Path, out: Path, args: list[str]) -> float:
    """Wall time of one full `worldline pools build` in a fresh process; returns seconds."""
    cfg_path = out.parent / "bench.yaml"
    cfg_path.write_text(json.dumps(CONFIG))
    if out.exists():
        shutil.rmtree(out)
    cmd = [
        sys.executable,
        "-m",
        "worldline",
        "pools",
        "build",
        "--config",
        str(cfg_path),
        "--in",
        str(shards),
        "--out",
        str(out),
        *(["--", *args] if args else []),
    ]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


def dask_builds(shards: Path, root: Path, repeats: int) -> dict[int, float]:
    """Best wall time of the build on Beam's DaskRunner against a LocalCluster of 1 and of 2 workers."""
    import distributed

    best: dict[int, float] = {}
    for workers in (1, 2):
        with distributed.LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster:
            args = [f"--runner={DASK_RUNNER}", f"--dask_client_address={cluster.scheduler_address}"]
            best[workers] = min(beam_build(shards, root / f"dask{workers}-{i}", args) for i in range(repeats))
    return best


DATATROVE_FILES = 4
"""JSONL files the trajectories are exported to for datatrove: its readers share a task's input out by
file, so 2 tasks need at least 2 files (worldline reads the one Parquet shard of the bench input)."""

try:
    from datatrove.pipeline.base import PipelineStep as _DatatroveStep
    from datatrove.utils.word_tokenizers import WordTokenizer as _WordTokenizer
except ImportError:  # the `bench` extra is not installed: the datatrove part says so and is left out
    _DatatroveStep = _WordTokenizer = object


class SplitWords(_WordTokenizer):  # type: ignore[misc]
    """datatrove word tokeniser (its extension point for custom ones): `str.split`, the word split
    worldline shingles with, instead of datatrove's spaCy tokeniser for English."""

    def word_tokenize(self, text: str) -> list[str]:
        return text.split()

    def sent_tokenize(self, text: str) -> list[str]:
        return [line for line in text.splitlines() if line.strip()]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in re.finditer(r"[^\n]+", text)]


class QwenTokenCount(_DatatroveStep):  # type: ignore[misc]
    """datatrove step: each document's Qwen token count (`worldline.tokenizer.get_token_counter()`,
    the vocabulary the pools count in) into its metadata, counted in batches as datatrove's own
    TokensCounter does (which wants a Hugging Face tokenizer name, and nothing is downloaded here)."""

    name = "Qwen token count"
    type = "📊 - STATS"

    def run(self, data: Any, rank: int = 0, world_size: int = 1) -> Iterator[Any]:
        from itertools import islice

        from worldline.tokenizer import get_token_counter

        counter = get_token_counter(None)
        count_many = getattr(counter, "count_many", None)
        docs = iter(data)
        while batch := list(islice(docs, 1000)):
            with self.track_time(unit="batch"):
                texts = [doc.text for doc in batch]
                counts = count_many(texts) if count_many else [counter.count(t) for t in texts]
            for doc, n in zip(batch, counts, strict=True):
                doc.metadata["token_count"] = n
                self.stat_update("tokens", value=n)
                yield doc


def xxh64_utf8(text: str) -> int:
    """datatrove 0.10 hands xxhash a str, which xxhash >= 4 refuses: the same hash of its UTF-8 bytes."""
    import xxhash

    return int(xxhash.xxh64_intdigest(text.encode("utf-8")))


def document_text(turns: list[dict[str, Any]]) -> str:
    """What worldline deduplicates on, before its normalisation: every turn's action and observation."""
    return "\n".join(f"{t['action']['text']}\n{t['observation']['text']}" for t in turns)


def export_documents(shards: Path, out: Path, files: int = DATATROVE_FILES) -> int:
    """The trajectories as datatrove documents (JSONL, one {"id", "text"} per trajectory, dealt over
    `files` files); done once per input, not timed. Returns the number of documents."""
    import pyarrow.parquet as pq

    from schemas.shards import shard_files

    out.mkdir(parents=True)
    handles = [(out / f"docs-{k:02d}.jsonl").open("w", encoding="utf-8") for k in range(files)]
    n = 0
    try:
        for f in shard_files(shards):
            for batch in pq.ParquetFile(f).iter_batches(batch_size=1024, columns=["id", "turns"]):
                for rec in batch.to_pylist():
                    doc = {"id": rec["id"], "text": document_text(rec["turns"])}
                    handles[n % files].write(json.dumps(doc) + "\n")
                    n += 1
    finally:
        for h in handles:
            h.close()
    return n


def datatrove_run(spec: dict[str, Any]) -> None:
    """The datatrove build, in the process `datatrove_build` starts: its MinHash example's four
    stages, each a LocalPipelineExecutor run, with the Qwen token count before the filter and
    Parquet (zstd, like the pools) after it."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import ParquetWriter

    work, workers = Path(spec["work"]), int(spec["workers"])
    config = MinhashConfig(
        n_grams=spec["shingle_words"],
        num_buckets=spec["bands"],
        hashes_per_bucket=spec["rows"],
        seed=spec["seed"],
    )
    words = {"language": SplitWords()} if spec["words"] == "split" else {}  # else its English default
    signature = MinhashDedupSignature(output_folder=str(work / "signatures"), config=config, **words)
    signature._hash_func = xxh64_utf8
    stages = [
        (
            [JsonlReader(spec["docs"]), signature],
            workers,
        ),
        (
            [MinhashDedupBuckets(str(work / "signatures"), str(work / "buckets"), config=config)],
            config.num_buckets,
        ),
        ([MinhashDedupCluster(str(work / "buckets"), str(work / "remove_ids"), config=config)], 1),
        (
            [
                JsonlReader(spec["docs"]),
                QwenTokenCount(),
                MinhashDedupFilter(str(work / "remove_ids")),
                ParquetWriter(spec["out"], compression="zstd"),
            ],
            workers,
        ),
    ]
    for k, (pipeline, tasks) in enumerate(stages, 1):
        LocalPipelineExecutor(
            pipeline, tasks=tasks, workers=min(workers, tasks), logging_dir=str(work / f"logs{k}")
        ).run()


def datatrove_build(docs: Path, out: Path, workers: int, words: str, cfg: PoolsConfig) -> float:
    """Wall time of the datatrove build in a fresh process, as `beam_build` times worldline's: from
    the process's start (imports, spaCy and the tokenizer loaded) to its exit; returns seconds."""
    from pipelines.minhash import candidate_bands

    bands, rows = candidate_bands(cfg.dedup.threshold, cfg.dedup.num_perm)
    work = out.parent / f"{out.name}-work"
    for path in (out, work):
        if path.exists():
            shutil.rmtree(path)
    spec = {
        "docs": str(docs),
        "out": str(out),
        "work": str(work),
        "workers": workers,
        "words": words,
        "shingle_words": cfg.dedup.shingle_words,
        "bands": bands,
        "rows": rows,
        "seed": cfg.dedup.seed,
    }
    cmd = [sys.executable, str(Path(__file__).resolve()), "--datatrove-run", json.dumps(spec)]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def parquet_rows(folder: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in sorted(folder.rglob("*.parquet")))


DATATROVE_RUNS = {
    (1, "spacy"): "datatrove, 1 worker (1 task)",
    (2, "spacy"): "datatrove, 2 workers (2 tasks)",
    (1, "split"): "datatrove, 1 worker, str.split words",
}
"""The datatrove configurations timed: LocalPipelineExecutor workers (and reader tasks) 1 and 2 with
its English word tokeniser (spaCy), and 1 with worldline's word split (`SplitWords`)."""


def fmt_load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.1f}" for x in load)


def kept_counts(n: int, worldline_out: Path, datatrove_out: Path) -> str:
    """Trajectories each side kept after dedup (pooled by worldline, rows in datatrove's Parquet)."""
    stats = json.loads((worldline_out / "manifest.json").read_text())["stats"]
    pooled = sum(v for k, v in stats.items() if k.startswith("pooled."))
    return f"worldline {pooled:,} of {n:,} trajectories, datatrove {parquet_rows(datatrove_out):,} documents"


def datatrove_steps(out: Path) -> str:
    """Seconds per step of a datatrove build as its own stats report them (a step's time includes
    pulling documents from the steps before it)."""
    work = out.parent / f"{out.name}-work"
    parts = []
    for stats_file in sorted(work.glob("logs*/stats.json")):
        for step in json.loads(stats_file.read_text()):
            total = step["time_stats"]["total"] if isinstance(step.get("time_stats"), dict) else 0.0
            parts.append(f"{step['name'].split(': ')[-1]} {total:.1f}")
    return ", ".join(parts)


def verify_run(out: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of `worldline pools verify OUT` in a fresh process."""
    code = (
        "import resource,subprocess,sys,time;t=time.perf_counter();"
        f"subprocess.run([sys.executable,'-m','worldline','pools','verify',{str(out)!r}],check=True,"
        "capture_output=True);print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    res = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    wall, rss = res.stdout.strip().splitlines()[-1].split()
    return float(wall), int(rss) / 1024


def background_cpu_busy(seconds: float = 1.0) -> float:
    """Share of all CPUs busy over `seconds` before a measurement (other work on a shared machine)."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields) - idle, sum(fields)

    try:
        b0, t0 = sample()
        time.sleep(seconds)
        b1, t1 = sample()
    except (OSError, ValueError, IndexError):
        return float("nan")
    return (b1 - b0) / max(t1 - t0, 1)


def peak_rss_mib(shards: Path, out: Path, trajectories_per_part: int | None = None) -> float:
    """Peak RSS of a build process (the largest of it and its children), measured by the kernel."""
    extra: list[str] = []
    if trajectories_per_part is not None:
        cfg_path = out.parent / f"memory-{trajectories_per_part}.yaml"
        cfg_path.write_text(json.dumps({"trajectories_per_shard": trajectories_per_part}))
        extra = ["--config", str(cfg_path)]
    code = (
        "import resource,subprocess,sys;"
        f"subprocess.run([sys.executable,'-m','worldline','pools','build','--in',{str(shards)!r},"
        f"'--out',{str(out)!r},*{extra!r}],check=True,capture_output=True);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    res = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return int(res.stdout.strip().splitlines()[-1]) / 1024


def minhash_bench(n_docs: int) -> None:
    import datasketch
    import rensa

    from pipelines.minhash import estimated_jaccard, normalise, shingles, signatures

    rng = random.Random(7)
    base = [" ".join(rng.choice(VOCAB) for _ in range(300)) for _ in range(n_docs)]
    sets = [shingles(normalise(t), 5) for t in base]  # shared preparation, not timed
    encoded = [[s.encode() for s in ss] for ss in sets]
    start = time.perf_counter()
    rensa.RMinHash.digests_from_token_sets(sets, 128, 1)
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    for enc in encoded:
        m = datasketch.MinHash(num_perm=128, seed=1)
        m.update_batch(enc)
    t_ds = time.perf_counter() - start
    print(
        f"MinHash docs/s: rensa {n_docs / t_ours:,.0f}  datasketch {n_docs / t_ds:,.0f}  "
        f"ratio {t_ds / t_ours:.1f}x (goal >= 10x)"
    )
    # labelled near-duplicate set: mutate 1% of words (dup) or 60% (not dup)
    pairs = []
    for i in range(400):
        words = base[i].split()
        rate = 0.01 if i % 2 == 0 else 0.6
        mutated = [rng.choice(VOCAB) if rng.random() < rate else w for w in words]
        pairs.append((normalise(base[i]), normalise(" ".join(mutated)), i % 2 == 0))
    a = signatures([p[0] for p in pairs], num_perm=128, seed=1, width=5)
    b = signatures([p[1] for p in pairs], num_perm=128, seed=1, width=5)
    agree = correct_ours = correct_ds = 0
    for (x, y, label), sa, sb in zip(pairs, a, b, strict=True):
        ours_dup = estimated_jaccard(sa, sb) >= 0.8
        ma, mb = datasketch.MinHash(num_perm=128, seed=1), datasketch.MinHash(num_perm=128, seed=1)
        ma.update_batch([s.encode() for s in shingles(x, 5)])
        mb.update_batch([s.encode() for s in shingles(y, 5)])
        ds_dup = ma.jaccard(mb) >= 0.8
        agree += ours_dup == ds_dup
        correct_ours += ours_dup == label
        correct_ds += ds_dup == label
    n = len(pairs)
    print(
        f"labelled near-duplicates ({n} pairs): agreement {agree / n:.1%}, accuracy rensa {correct_ours / n:.1%}, "
        f"datasketch {correct_ds / n:.1%}"
    )


OPTIONAL_PARTS = ("baseline", "datatrove", "dask", "minhash", "memory", "verify")
"""Parts besides the worldline runners that `--skip` can leave out."""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trajectories", type=int, default=12000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=1, help="builds per runner; the best is compared")
    ap.add_argument("--memory-base", type=int, default=300)
    ap.add_argument(
        "--skip",
        default="",
        help=f"comma-separated parts not to run ({', '.join(OPTIONAL_PARTS)}), e.g. to time the runners "
        "alone on a large input",
    )
    ap.add_argument("--datatrove-run", help=argparse.SUPPRESS)  # the process `datatrove_build` starts
    args = ap.parse_args()
    if args.datatrove_run:
        datatrove_run(json.loads(args.datatrove_run))
        return
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if skip - set(OPTIONAL_PARTS):
        ap.error(
            f"--skip: unknown part(s) {', '.join(sorted(skip - set(OPTIONAL_PARTS)))}; known: {', '.join(OPTIONAL_PARTS)}"
        )
    from pipelines.config import PoolsConfig
    from schemas.shards import write_trajectories

    cfg = PoolsConfig.from_dict(CONFIG)
    print(
        f"machine: {os.cpu_count()} CPUs; other work before start: {background_cpu_busy():.0%} of all CPUs busy"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shards, tiny = root / "shards", root / "tiny"
        write_trajectories(shards, make_trajectories(args.trajectories, args.turns))
        write_trajectories(tiny, make_trajectories(10, args.turns, seed=3))
        turns = args.trajectories * args.turns
        if "datatrove" not in skip and _DatatroveStep is object:
            print("datatrove comparison skipped: datatrove is not installed (the `bench` extra)")
            skip.add("datatrove")
        # name -> (build function of (input, output), full input, tiny input, output name prefix)
        builds: dict[str, tuple[Callable[[Path, Path], float], Path, Path, str]] = {
            name: (partial(beam_build, args=runner_args), shards, tiny, "out")
            for name, runner_args in RUNNERS.items()
        }
        if "datatrove" not in skip:
            docs, docs_tiny = root / "docs", root / "docs-tiny"
            export_documents(shards, docs)
            export_documents(tiny, docs_tiny)
            for (w, words), name in DATATROVE_RUNS.items():
                dt_build = partial(datatrove_build, workers=w, words=words, cfg=cfg)
                builds[name] = (dt_build, docs, docs_tiny, f"dt{w}{words}-")
        if "baseline" not in skip:
            _, t_base, base_samples = baseline(shards, cfg, root / "base")
        full: dict[str, list[float]] = {name: [] for name in builds}
        fixed: dict[str, list[float]] = {name: [] for name in builds}
        for i in range(args.repeats):  # interleaved rounds: every build once per round
            load_start = os.getloadavg()
            for name, (build, big, small, prefix) in builds.items():
                full[name].append(build(big, root / f"{prefix}{i}"))
                fixed[name].append(build(small, root / f"{prefix}tiny{i}"))
            print(
                f"round {i + 1}: load average (1/5/15 min) {fmt_load(load_start)} at start, "
                f"{fmt_load(os.getloadavg())} at end; wall s (full / tiny): "
                + "; ".join(f"{name} {full[name][-1]:.1f} / {fixed[name][-1]:.1f}" for name in builds)
            )
        print(f"input: {args.trajectories} trajectories x {args.turns} turns = {turns} turns")
        if "baseline" not in skip:
            print(same_work(base_samples, root / "out0"))
            print(
                f"pyarrow baseline (single process, no Beam): {t_base:.1f} s wall, {turns / t_base:,.0f} turns/s"
            )
        print(
            "worldline: whole `worldline pools build` processes (start-up, validate, filter, dedup, "
            "decontaminate, assign, render, parts, exports, cards); fixed cost = the same build of a "
            "10-trajectory input"
        )
        best = {name: min(times) for name, times in full.items()}
        best_fixed = {name: min(times) for name, times in fixed.items()}
        for name in builds:
            if name == next(iter(DATATROVE_RUNS.values())):
                print(
                    "datatrove: whole processes (start-up, JSONL read, MinHash signatures, buckets, clusters, "
                    "filter, Qwen token count, Parquet); fixed cost = the same pipeline over the 10 documents"
                )
            raw = ", ".join(f"{t:.1f}" for t in full[name])
            raw_fixed = ", ".join(f"{t:.1f}" for t in fixed[name])
            print(
                f"  {name:38s} wall {raw} s (best {best[name]:.1f} s) -> {turns / best[name]:,.0f} turns/s;"
                f" fixed cost {raw_fixed} s"
            )
        ip, mp1, mp2 = (best[n] for n in RUNNERS)
        ip_f, mp1_f, mp2_f = (best_fixed[n] for n in RUNNERS)

        def net(t: float, f: float) -> float:
            return max(t - f, 1e-9)

        if "datatrove" not in skip:
            dt1, dt2, dts = (best[n] for n in DATATROVE_RUNS.values())
            dt1_f, dt2_f, dts_f = (best_fixed[n] for n in DATATROVE_RUNS.values())
            print(f"kept after dedup: {kept_counts(args.trajectories, root / 'out0', root / 'dt1spacy-0')}")
            print(
                f"datatrove, 1 worker, seconds by step (its own stats, last round): {datatrove_steps(root / f'dt1spacy-{args.repeats - 1}')}"
            )
            print(
                f"worldline / datatrove, turns/s, 1 worker (default runner vs 1 task): {dt1 / ip:.2f}x "
                f"(goal >= 1.5x); 2 workers (multi-process vs 2 tasks): {dt2 / mp2:.2f}x; without the "
                f"measured fixed costs {net(dt1, dt1_f) / net(ip, ip_f):.2f}x and "
                f"{net(dt2, dt2_f) / net(mp2, mp2_f):.2f}x"
            )
            print(
                f"worldline / datatrove with str.split words, turns/s, 1 worker: {dts / ip:.2f}x; without the "
                f"measured fixed costs {net(dts, dts_f) / net(ip, ip_f):.2f}x"
            )
        print(
            f"fixed cost of a tiny build, best: worldline default runner {ip_f:.1f} s (goal <= 2 s), "
            f"multi-process 1 / 2 workers {mp1_f:.1f} / {mp2_f:.1f} s"
            + (
                f"; datatrove 1 / 2 workers {dt1_f:.1f} / {dt2_f:.1f} s, with str.split words {dts_f:.1f} s"
                if "datatrove" not in skip
                else ""
            )
        )
        print(
            f"2 workers / 1 worker, worldline multi-process runner: {mp1 / mp2:.2f}x wall (goal >= 1.8x); "
            f"{net(mp1, mp1_f) / net(mp2, mp2_f):.2f}x without the measured fixed cost"
        )
        if "datatrove" not in skip:
            print(
                f"2 workers / 1 worker, datatrove: {dt1 / dt2:.2f}x wall; "
                f"{net(dt1, dt1_f) / net(dt2, dt2_f):.2f}x without the measured fixed cost"
            )
        print(
            f"2 workers (multi-process) / 1 worker (default in-process runner): {ip / mp2:.2f}x wall; "
            f"{net(ip, ip_f) / net(mp2, mp2_f):.2f}x without the measured fixed cost"
        )
        if "baseline" not in skip:
            print(
                f"retired goal: 1 worker (default runner) / pyarrow baseline {t_base / ip:.2f}x wall (was >= 0.8x)"
            )
        if "dask" not in skip:
            dask = dask_builds(shards, root, args.repeats)
            print(
                f"DaskRunner (dask.distributed LocalCluster): 1 worker {dask[1]:.1f} s, 2 workers {dask[2]:.1f} s "
                f"-> 2 workers / 1 worker {dask[1] / dask[2]:.2f}x wall; default runner / DaskRunner 1 worker "
                f"{dask[1] / ip:.2f}x slower"
            )
        if "minhash" not in skip:
            minhash_bench(2000)
        if {"memory", "verify"} <= skip:
            return
        small, large = root / "m1", root / "m10"
        write_trajectories(small, make_trajectories(args.memory_base, args.turns, seed=1))
        write_trajectories(large, make_trajectories(args.memory_base * 10, args.turns, seed=2))
        m1, m10 = peak_rss_mib(small, root / "mo1"), peak_rss_mib(large, root / "mo10")
        if "verify" not in skip:  # verifies the two builds just measured
            for label, out, n in (
                ("1x", root / "mo1", args.memory_base),
                ("10x", root / "mo10", args.memory_base * 10),
            ):
                wall, rss = verify_run(out)
                print(
                    f"pools verify {label} ({n} traj): {wall:.1f} s wall, {n / wall:,.0f} trajectories/s, "
                    f"peak RSS {rss:,.0f} MiB"
                )
        if "memory" in skip:
            return
        print(
            f"peak RSS (default runner, default config): 1x ({args.memory_base} traj) {m1:,.0f} MiB  "
            f"10x {m10:,.0f} MiB  ratio {m10 / m1:.2f} (goal: flat)"
        )
        # A part is sorted in memory, so memory grows until parts reach trajectories_per_shard
        # (2,000 by default) and stays flat after; with parts of the 1x input's size both inputs fill
        # whole parts, which shows what else grows with the input.
        p1 = peak_rss_mib(small, root / "mp1", args.memory_base)
        p10 = peak_rss_mib(large, root / "mp10", args.memory_base)
        print(
            f"peak RSS (default runner, trajectories_per_shard {args.memory_base}): 1x {p1:,.0f} MiB  "
            f"10x {p10:,.0f} MiB  ratio {p10 / p1:.2f}"
        )


if __name__ == "__main__":
    main()
