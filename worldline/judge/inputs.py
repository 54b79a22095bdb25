"""Reading what `worldline judge` scores: prediction lines and the reference samples they answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from schemas.agentworldbench import AgentWorldBenchSample, read_samples
from worldline.judge.samples import JudgeSample, from_prediction_record, sample_key


@dataclass(frozen=True)
class RejectedLine:
    """A prediction line that could not become a judge sample: where, and why."""

    path: str
    line: int
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "reason": self.reason}


def reference_files(path: Path) -> list[Path]:
    """AgentWorldBench files under `path`: the file itself, or every `*_test.jsonl` below a folder
    (a pools output folder holds them in exports/agentworldbench/)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(
            f"reference data {path} does not exist: pass an AgentWorldBench file or folder"
        )
    files = sorted(path.rglob("*_test.jsonl"))
    if not files:
        raise FileNotFoundError(
            f"no *_test.jsonl under {path}: pass AgentWorldBench data or a pools output folder with "
            f"exports/agentworldbench/"
        )
    return files


def load_reference(path: Path) -> dict[str, AgentWorldBenchSample]:
    """Reference samples keyed `domain/id/turn_idx`."""
    samples: dict[str, AgentWorldBenchSample] = {}
    for file in reference_files(path):
        for sample in read_samples(file):
            samples[sample_key(sample.domain_name, sample.id, sample.turn_idx)] = sample
    return samples


def read_predictions(
    path: Path, reference: dict[str, AgentWorldBenchSample] | None
) -> Iterator[JudgeSample | RejectedLine]:
    """One judge sample per usable line; a RejectedLine (never an exception) for each bad one."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:
                yield RejectedLine(str(path), number, f"not JSON: {error}")
                continue
            if not isinstance(record, dict):
                yield RejectedLine(str(path), number, "not a JSON object")
                continue
            try:
                yield from_prediction_record(record, reference)
            except ValueError as error:
                yield RejectedLine(str(path), number, str(error))
