"""Inputs besides trajectory shards: world-knowledge corpora and evaluation sets for decontamination.

Knowledge documents (JSONL with a `text` field, Parquet with a `text` column, or plain .txt/.md files)
become single-turn CPT samples. Evaluation sets come as AgentWorldBench JSONL (prompt = action
prompts, response = ground-truth observations, one per turn) or as trajectory shards; only their
per-turn MinHash signatures are kept.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow.parquet as pq

from pipelines import fs
from pipelines.config import PoolsConfig
from pipelines.minhash import normalise, signatures
from pipelines.ngrams import ngram_hashes
from schemas.agentworldbench import domain_of, parse_system_str, read_samples
from schemas.shards import ShardError, check_file_schema, check_version, shard_files
from schemas.trajectory import SCHEMA_METADATA_KEY, Trajectory, stable_id
from schemas.worldmodel import parse_action_prompt, parse_observation


class InputError(ValueError):
    """An input file cannot be read; the message names the file, the line and the fix."""


@dataclass(frozen=True, slots=True)
class KnowledgeDoc:
    """One world-knowledge document."""

    id: str
    group: str
    text: str
    uri: str
    licence: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "group": self.group,
            "text": self.text,
            "uri": self.uri,
            "licence": self.licence,
        }


def knowledge_files(path: str) -> list[str]:
    """The files of one --knowledge corpus: the file itself, or every file under a folder / prefix."""
    return fs.list_files(path) if fs.is_dir(path) else [path]


def read_knowledge_file(path: str) -> Iterator[KnowledgeDoc]:
    """Documents of one corpus file (local or any Beam filesystem); records without text are skipped
    (they carry nothing to learn)."""
    p = PurePosixPath(fs.split(path)[1])
    default_group = f"knowledge:{p.stem}"

    def doc(rec: dict[str, Any], i: int) -> KnowledgeDoc | None:
        text = rec.get("text")
        if not isinstance(text, str) or not text.strip():
            return None
        rid = str(rec.get("id") or stable_id("knowledge", p.name, str(i), prefix="kn"))
        group = f"knowledge:{rec['source']}" if rec.get("source") else default_group
        licence = rec.get("licence") or rec.get("license")
        return KnowledgeDoc(rid, group, text, f"{p.name}#{i}", str(licence) if licence else None)

    if p.suffix == ".jsonl":
        with fs.open_read(path) as raw, io.TextIOWrapper(raw, encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(
                        f"{path}:{i + 1}: not JSON ({exc.msg}); one JSON object per line"
                    ) from exc
                d = doc(rec, i)
                if d:
                    yield d
    elif p.suffix == ".parquet":
        i = 0
        with fs.open_read(path) as part:
            for batch in pq.ParquetFile(part).iter_batches(batch_size=1024):
                for rec in batch.to_pylist():
                    d = doc(rec, i)
                    i += 1
                    if d:
                        yield d
    elif p.suffix in (".txt", ".md"):
        d = doc({"text": fs.read_bytes(path).decode("utf-8")}, 0)
        if d:
            yield d
    else:
        raise InputError(f"{path}: knowledge corpora are .jsonl, .parquet, .txt or .md files")


@contextmanager
def local_copy(path: str) -> Iterator[Path]:
    """A local file with `path`'s bytes and name (a URL is downloaded to a temporary folder)."""
    if not fs.is_url(path):
        yield Path(path)
        return
    folder = tempfile.mkdtemp(prefix="worldline-")
    try:
        local = Path(folder) / fs.split(path)[1]
        with fs.open_read(path) as src, open(local, "wb") as dst:
            shutil.copyfileobj(src, dst)
        yield local
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def input_parts(item: str) -> list[str]:
    """The trajectory part files of one input: a dataset folder, a folder of parts or one part, local
    or on any Beam filesystem (a dataset's parts are under `trajectories/`)."""
    if not fs.is_url(item):
        return [str(f) for f in shard_files(item)]
    if fs.is_file(item):
        return [item]
    base = fs.join(item, "trajectories")
    folder = base if fs.is_dir(base) else item
    parts = fs.list_files(folder, "*.parquet")
    if not parts and not fs.exists(item):
        raise ShardError(f"{item}: no such file or prefix")
    return parts


def open_part(path: str) -> pq.ParquetFile:
    """One trajectory part, its schema and version checked (errors name the file)."""
    if not fs.is_url(path):
        return check_file_schema(Path(path))
    pf = pq.ParquetFile(fs.open_read(path))
    version = (pf.schema_arrow.metadata or {}).get(SCHEMA_METADATA_KEY)
    if version is not None:
        check_version(version.decode("utf-8", "replace"), path)
    return pf


def iter_input_records(item: str, batch_size: int = 256) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(part file, records) batch by batch from every part of one input (bounded memory)."""
    for f in input_parts(item):
        for batch in open_part(f).iter_batches(batch_size=batch_size):
            yield f, batch.to_pylist()


def iter_input_trajectories(item: str) -> Iterator[Trajectory]:
    for _, records in iter_input_records(item):
        for rec in records:
            yield Trajectory.from_record(rec)


def awb_turns(path: Path) -> Iterator[tuple[str, int, str]]:
    """(eval_id, turn_index, action + observation) for every turn of every AgentWorldBench sample,
    and (eval_id, 0, task) for its task (the system prompt's task part, else the whole prompt)."""
    tasks_seen: set[str] = set()
    for sample in read_samples(path):
        eval_id = f"{sample.task}:{sample.id}"
        if eval_id not in tasks_seen:
            tasks_seen.add(eval_id)
            parts = None
            try:
                parts = parse_system_str(domain_of(sample, path), sample.system_str)
            except ValueError:
                parts = None
            yield eval_id, 0, parts.task if parts is not None else sample.system_str
        for i, (prompt, response) in enumerate(zip(sample.prompt, sample.response, strict=False), start=1):
            parsed = parse_action_prompt(prompt)
            action = parsed.action if parsed else prompt
            observation = parse_observation(response)
            yield eval_id, i, f"{action}\n{observation if observation is not None else response}"


def eval_jsonl_files(item: str) -> list[str]:
    """The AgentWorldBench JSONL files of one evaluation set (none: the set is trajectory shards)."""
    return fs.list_files(item, "*.jsonl") if fs.is_dir(item) else ([item] if item.endswith(".jsonl") else [])


def eval_files(item: str) -> list[str]:
    """The files one --eval set is read from: its AgentWorldBench JSONL files, else its trajectory parts."""
    if not fs.exists(item):
        raise InputError(f"evaluation set {item} does not exist")
    return eval_jsonl_files(item) or input_parts(item)


def eval_texts(paths: list[str], cfg: PoolsConfig) -> Iterator[tuple[str, int, str]]:
    """(eval_id, turn_index, text) of every evaluation turn (turn_index 0: the task) of every set."""
    from pipelines.actions import canonicalise_actions

    for item in paths:
        if not fs.exists(item):
            raise InputError(f"evaluation set {item} does not exist")
        jsonl = eval_jsonl_files(item)
        if jsonl:
            for f in jsonl:
                with local_copy(f) as local:
                    yield from awb_turns(local)
        else:
            for traj in iter_input_trajectories(item):
                if cfg.filters.canonical_actions:
                    canonicalise_actions(traj)
                yield traj.id, 0, traj.task
                for i, t in enumerate(traj.turns, start=1):
                    yield traj.id, i, f"{t.action.text}\n{t.observation.text}"


def read_eval_turns(paths: list[str], cfg: PoolsConfig) -> list[tuple[str, int, list[int]]]:
    """Per-turn signatures of the evaluation sets, deduplicated by normalised turn text."""
    texts: dict[str, tuple[str, int]] = {}
    for eval_id, i, text in eval_texts(paths, cfg):
        if i:
            texts.setdefault(normalise(text), (eval_id, i))
    dc = cfg.decontamination
    usable = sorted((t, k) for t, k in texts.items() if len(t.split()) >= dc.min_turn_words)
    sigs = signatures(
        [t for t, _ in usable], num_perm=cfg.dedup.num_perm, seed=cfg.dedup.seed, width=dc.shingle_words
    )
    return [(k[0], k[1], s) for (_, k), s in zip(usable, sigs, strict=True)]


def read_eval_ngrams(paths: list[str], cfg: PoolsConfig) -> list[tuple[str, list[int]]]:
    """(`eval_id#turn` or `eval_id#task`, n-gram hashes) of every evaluation turn and task, for
    containment checks (`pipelines.ngrams`); identical texts are kept once."""
    dc = cfg.decontamination
    seen: set[str] = set()
    entries: list[tuple[str, list[int]]] = []
    for eval_id, i, text in eval_texts(paths, cfg):
        norm = normalise(text)
        if norm in seen:
            continue
        seen.add(norm)
        grams = ngram_hashes(norm, dc.ngram_words, dc.min_turn_words)
        if len(grams):
            entries.append((f"{eval_id}#{i if i else 'task'}", grams.tolist()))
    return entries
