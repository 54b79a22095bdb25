"""Where a build writes and how it becomes visible: staging folder, atomic publish, incremental plans.

A build never writes into `--out` directly. It runs into a sibling staging folder
(`.OUT.staging-<id>`) and, once the job, the cards and the manifest are complete, the staging
folder replaces OUT by rename: readers see the old pools or the new ones, never a mix. An existing
non-empty OUT is replaced only with `--overwrite` (or extended with `--incremental`).

`--incremental` is the scheduled-job path: pass only the new input shards. The previous manifest
names every input the pools were built from (with a digest of each); the new build reads those plus
the new ones, under the same configuration, and so equals a full rebuild over all of them by
construction (dedup, decontamination and group assignment are global decisions, so earlier inputs
take part again). An earlier input that changed or vanished, or a changed configuration, stops the
incremental build with the reason: run a full build with `--overwrite` then.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.shards import sha256_file


class PublishError(RuntimeError):
    """The output folder cannot be (re)built as asked; the message says why and what to pass."""


def input_digest(path: str) -> str:
    """A digest of one input: its dataset manifest when it has one, else the bytes of its part files."""
    p = Path(path)
    if p.is_file():
        return sha256_file(p)
    manifest = p / "manifest.json"
    if manifest.is_file():
        return sha256_file(manifest)
    h = hashlib.sha256()
    for f in sorted(p.rglob("*.parquet")):
        h.update(f"{f.relative_to(p)}\0{sha256_file(f)}\n".encode())
    return h.hexdigest()


def is_nonempty_dir(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def check_target(out: Path, *, overwrite: bool, incremental: bool) -> None:
    """Refuse to build into an existing non-empty OUT unless told how to treat it."""
    if out.exists() and not out.is_dir():
        raise PublishError(f"--out {out} is a file; give a folder")
    if is_nonempty_dir(out) and not (overwrite or incremental):
        raise PublishError(
            f"--out {out} already holds files; pass --overwrite to replace it (published atomically "
            "when the new build is complete), --incremental to add new input shards, or another --out"
        )
    if incremental and not (out / "manifest.json").is_file():
        raise PublishError(f"--incremental: {out}/manifest.json is missing; run a full build first")


def staging_folder(out: Path) -> Path:
    """A fresh sibling of OUT (same file system, so publishing is a rename)."""
    staging = out.parent / f".{out.name}.staging-{uuid.uuid4().hex[:12]}"
    staging.mkdir(parents=True)
    return staging


def publish(staging: Path, out: Path) -> None:
    """Replace OUT by the complete staging folder (two renames; the old pools are removed after)."""
    old: Path | None = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:12]}"
        os.rename(out, old)
    os.rename(staging, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)


@dataclass(slots=True)
class IncrementalPlan:
    """The inputs of an incremental build: the previous build's and the new ones."""

    inputs: list[str]
    knowledge: list[str]
    evals: list[str]
    new_inputs: list[str]


def incremental_plan(
    out: Path, config_fingerprint: str, inputs: list[str], knowledge: list[str], evals: list[str]
) -> IncrementalPlan:
    """Merge the previous manifest's inputs with the new ones, after checking nothing earlier changed."""
    manifest: dict[str, Any] = json.loads((out / "manifest.json").read_text("utf-8"))
    if manifest.get("config_fingerprint") != config_fingerprint:
        raise PublishError(
            f"--incremental: the configuration differs from the one {out} was built with "
            f"({manifest.get('config_fingerprint')} -> {config_fingerprint}); run a full build with --overwrite"
        )
    previous: list[str] = []
    for item in manifest.get("inputs", []):
        path, digest = item["path"], item.get("digest")
        if not Path(path).exists():
            raise PublishError(
                f"--incremental: earlier input {path} is gone; run a full build with --overwrite"
            )
        if digest is None or input_digest(path) != digest:
            raise PublishError(
                f"--incremental: earlier input {path} changed since the last build; "
                "run a full build with --overwrite"
            )
        previous.append(path)
    new = [p for p in inputs if p not in previous]
    know = list(dict.fromkeys([*manifest.get("knowledge", []), *knowledge]))
    ev = list(dict.fromkeys([*manifest.get("evaluation_sets", []), *evals]))
    return IncrementalPlan([*previous, *new], know, ev, new)
