"""`worldline import agentworldbench`: AgentWorldBench sample files -> redacted trajectory shards.

Samples with the same domain and `id` are turn variants of one trajectory and become ONE
trajectory: its turns come from the variant with the longest lists, and what differs per variant (the
set of `turn_idx` present, list lengths, a `current_prompt` that is not `prompt[turn_idx-1]`) is kept in
`metadata["agentworldbench"]`. A variant whose history contradicts the others (different system prompt,
turns or total) becomes its own trajectory with an id derived from its content, and is counted.
Import reads each file twice (index, then convert), so memory holds small per-id fingerprints, never
the samples. Every trajectory and every quarantined line is redacted before it is written.

The format itself (sample, IO, conversion) is `schemas.agentworldbench`; the import lives here, with the
cleaner, because every trajectory it writes is public data redacted on the way in (worldline.redaction),
which schemas/ may not import.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas import Domain
from schemas.agentworldbench import (
    SOURCE_NAME,
    AgentWorldBenchSample,
    AtomicTextFile,
    SampleError,
    SampleFieldError,
    domain_of,
    iter_sample_lines,
    sample_to_trajectory,
    trajectory_id_for,
)
from worldline.redaction import DEFAULT_PII, redact_text_or_json
from worldline.redaction.records import redact_trajectory


def _turn_hashes(sample: AgentWorldBenchSample) -> list[bytes]:
    return [
        hashlib.blake2b(f"{p}\x00{r}".encode("utf-8", "surrogatepass"), digest_size=12).digest()
        for p, r in zip(sample.prompt, sample.response, strict=True)
    ]


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).digest()


@dataclass(slots=True)
class _Group:
    """What the index remembers of one trajectory's turn variants (fingerprints, never the texts)."""

    domain: Domain
    sample_id: int | str
    variant: str | None
    best: tuple[int, int]  # (file number, line number) of the variant with the longest lists
    hashes: list[bytes]
    system: bytes
    total_turns: int
    turn_indices: set[int] = field(default_factory=set)
    list_lengths: dict[int, int] = field(default_factory=dict)
    current_prompts: dict[int, str] = field(default_factory=dict)
    samples: int = 0

    def compatible(self, sample: AgentWorldBenchSample, hashes: list[bytes], system: bytes) -> bool:
        """Same system prompt, same length, and one history is a prefix of the other."""
        n = min(len(hashes), len(self.hashes))
        return (
            system == self.system and sample.total_turns == self.total_turns and hashes[:n] == self.hashes[:n]
        )

    def add(self, loc: tuple[int, int], sample: AgentWorldBenchSample, hashes: list[bytes]) -> None:
        if len(hashes) > len(self.hashes):
            self.best, self.hashes = loc, hashes
        self.turn_indices.add(sample.turn_idx)
        self.list_lengths[sample.turn_idx] = len(sample.prompt)
        if sample.current_prompt != sample.prompt[sample.turn_idx - 1]:
            self.current_prompts[sample.turn_idx] = sample.current_prompt
        self.samples += 1


@dataclass(slots=True)
class ImportReport:
    """Counts that reconcile: samples_read = samples_imported + samples_quarantined + samples_already_present."""

    files: list[str] = field(default_factory=list)
    samples_read: int = 0
    samples_imported: int = 0
    samples_already_present: int = 0
    trajectories_written: int = 0
    conflicting_variants: int = 0
    quarantined: dict[str, int] = field(default_factory=dict)
    quarantine_file: str | None = None
    redactions: dict[str, int] = field(default_factory=dict)  # secrets and PII redacted, per class

    @property
    def samples_quarantined(self) -> int:
        return sum(self.quarantined.values())

    def reconciles(self) -> bool:
        return (
            self.samples_read
            == self.samples_imported + self.samples_quarantined + self.samples_already_present
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "samples_read": self.samples_read,
            "samples_imported": self.samples_imported,
            "samples_quarantined": self.samples_quarantined,
            "samples_already_present": self.samples_already_present,
            "trajectories_written": self.trajectories_written,
            "conflicting_variants": self.conflicting_variants,
            "quarantined": self.quarantined,
            "quarantine_file": self.quarantine_file,
            "redactions": self.redactions,
        }


def _existing_ids(out_dir: Path) -> set[str]:
    from schemas.shards import open_dataset, read_manifest

    manifest = read_manifest(out_dir)
    if manifest is None or manifest.rows == 0:
        return set()
    return set(open_dataset(out_dir).select("id").collect()["id"].to_list())


def import_agentworldbench(
    paths: Iterable[str | Path],
    out_dir: str | Path,
    *,
    source_name: str = SOURCE_NAME,
    licence: str | None = None,
    pii: frozenset[str] = DEFAULT_PII,
) -> ImportReport:
    """Import sample files into a trajectory dataset; bad lines go to `out_dir/quarantine/`.

    Every trajectory is redacted before it is written (secrets always, the personal-data classes in
    PII), and so is every quarantined line.

    Turn variants of one trajectory (same domain and id) become one trajectory; trajectories already
    in out_dir (same stable id) are not written again, so re-running an import adds nothing.
    """
    from schemas.shards import ShardWriter

    files = [Path(p) for p in paths]
    out = Path(out_dir)
    report = ImportReport(files=[str(f) for f in files])
    groups: dict[tuple[Any, ...], _Group] = {}
    quarantine: AtomicTextFile | None = None
    redactions: Counter[str] = Counter()

    def reject(error: SampleError) -> None:
        nonlocal quarantine
        if quarantine is None:
            quarantine = AtomicTextFile(out / "quarantine" / "agentworldbench.jsonl")
        # An error quotes the sample it rejects: redacted like the trajectories.
        quarantine.write_line(
            redact_text_or_json(json.dumps(error.to_json(), ensure_ascii=False), redactions, pii)
        )
        report.quarantined[error.reason] = report.quarantined.get(error.reason, 0) + 1

    # Pass 1: validate every line and index the turn variants by fingerprint.
    try:
        for fno, path in enumerate(files):
            for lineno, item in iter_sample_lines(path):
                report.samples_read += 1
                if isinstance(item, SampleError):
                    reject(item)
                    continue
                try:
                    dom = domain_of(item, path)
                except SampleFieldError as exc:
                    reject(SampleError(path, lineno, exc.field, exc.reason, str(exc)))
                    continue
                hashes, system = _turn_hashes(item), _digest(item.system_str)
                key: tuple[Any, ...] = (dom, json.dumps(item.id))
                group = groups.get(key)
                if group is not None and not group.compatible(item, hashes, system):
                    # Same id, contradicting history: its own trajectory, keyed by its content.
                    fingerprint = hashlib.blake2b(system + b"".join(hashes), digest_size=8).hexdigest()
                    report.conflicting_variants += 1
                    key = (dom, json.dumps(item.id), fingerprint)
                    group = groups.get(key)
                if group is not None and item.turn_idx in group.turn_indices:
                    reject(
                        SampleError(
                            path,
                            lineno,
                            "turn_idx",
                            "duplicate_sample",
                            f"turn {item.turn_idx} of id {item.id!r} appeared before; keep one copy",
                        )
                    )
                    continue
                if group is None:
                    variant = key[2] if len(key) > 2 else None
                    group = groups[key] = _Group(
                        dom, item.id, variant, (fno, lineno), hashes, system, item.total_turns
                    )
                group.add((fno, lineno), item, hashes)

        present = _existing_ids(out)
        chosen: dict[tuple[int, int], _Group] = {}
        for group in groups.values():
            if trajectory_id_for(group.domain, group.sample_id, group.variant) in present:
                report.samples_already_present += group.samples
            else:
                chosen[group.best] = group
                report.samples_imported += group.samples

        # Pass 2: convert the longest variant of each trajectory, in file order.
        with ShardWriter(out) as writer:
            for fno, path in enumerate(files):
                if not any(loc[0] == fno for loc in chosen):
                    continue
                for lineno, item in iter_sample_lines(path):
                    group = chosen.get((fno, lineno))
                    if group is None or isinstance(item, SampleError):
                        continue
                    trajectory = sample_to_trajectory(
                        item,
                        domain=group.domain,
                        source_uri=str(path),
                        source_name=source_name,
                        licence=licence,
                        turn_indices=group.turn_indices,
                        list_lengths=group.list_lengths,
                        current_prompts=group.current_prompts,
                        variant=group.variant,
                    )
                    # Public samples carry what their authors' sessions showed: redacted on the way in.
                    writer.write(redact_trajectory(trajectory, redactions, pii))
                    report.trajectories_written += 1
    except BaseException:
        if quarantine is not None:
            quarantine.abort()
        raise
    if quarantine is not None:
        quarantine.commit()
        report.quarantine_file = str(quarantine.path)
    report.redactions = dict(redactions)
    return report
