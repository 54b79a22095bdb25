"""Inputs besides trajectory shards: world-knowledge corpora and evaluation sets for decontamination.

Knowledge documents (JSONL with a `text` field, Parquet with a `text` column, or plain .txt/.md files)
become single-turn CPT samples. Evaluation sets come as AgentWorldBench JSONL (prompt = action
prompts, response = ground-truth observations, one per turn) or as trajectory shards; only their
per-turn MinHash signatures are kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pipelines.config import PoolsConfig
from pipelines.minhash import normalise, signatures
from pipelines.ngrams import ngram_hashes
from schemas.shards import iter_trajectories
from schemas.trajectory import stable_id
from worldline.agentworldbench import (
    domain_of,
    parse_action_prompt,
    parse_observation,
    parse_system_str,
    read_samples,
)


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


def read_knowledge_file(path: str) -> Iterator[KnowledgeDoc]:
    """Documents of one corpus file; records without text are skipped (they carry nothing to learn)."""
    p = Path(path)
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
        with open(p, encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{p}:{i + 1}: not JSON ({exc.msg}); one JSON object per line") from exc
                d = doc(rec, i)
                if d:
                    yield d
    elif p.suffix == ".parquet":
        i = 0
        for batch in pq.ParquetFile(p).iter_batches(batch_size=1024):
            for rec in batch.to_pylist():
                d = doc(rec, i)
                i += 1
                if d:
                    yield d
    elif p.suffix in (".txt", ".md"):
        d = doc({"text": p.read_text("utf-8")}, 0)
        if d:
            yield d
    else:
        raise InputError(f"{p}: knowledge corpora are .jsonl, .parquet, .txt or .md files")


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


def eval_texts(paths: list[str], cfg: PoolsConfig) -> Iterator[tuple[str, int, str]]:
    """(eval_id, turn_index, text) of every evaluation turn (turn_index 0: the task) of every set."""
    from pipelines.actions import canonicalise_actions

    for item in paths:
        p = Path(item)
        if not p.exists():
            raise InputError(f"evaluation set {p} does not exist")
        jsonl = sorted(p.rglob("*.jsonl")) if p.is_dir() else ([p] if p.suffix == ".jsonl" else [])
        if jsonl:
            for f in jsonl:
                yield from awb_turns(f)
        else:
            for traj in iter_trajectories(p):
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
