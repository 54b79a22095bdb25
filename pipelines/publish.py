"""Where a build writes and how it becomes visible: staging folder, atomic publish, incremental plans.

A build never writes into `--out` directly. It runs into a sibling staging folder
(`.OUT.staging-<pid>-<id>`) and, once the job, the cards and the manifest are complete, the staging
folder replaces OUT by rename: readers see the old pools or the new ones, never a mix. On an object
store (gs://...) the manifest is the commit point instead (see `publish`). An existing
non-empty OUT is replaced only with `--overwrite` (or extended with `--incremental`).

`--incremental` is the scheduled-job path: pass only the new input shards. The previous manifest
names every input the pools were built from (with a digest of each); the new build reads those plus
the new ones, under the same configuration, and so equals a full rebuild over all of them by
construction (dedup, decontamination and group assignment are global decisions, so earlier inputs
take part again). An earlier input that changed or vanished, or a changed configuration, stops the
incremental build with the reason: run a full build with `--overwrite` then.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines import fs
from schemas.atomic import replace_dir


class PublishError(RuntimeError):
    """The output folder cannot be (re)built as asked; the message says why and what to pass."""


def input_digest(path: str) -> str:
    """A digest of one input: its dataset manifest when it has one, else the bytes of its part files."""
    if fs.is_file(path):
        return fs.sha256(path)
    manifest = fs.join(path, "manifest.json")
    if fs.is_file(manifest):
        return fs.sha256(manifest)
    h = hashlib.sha256()
    for f in fs.list_files(path, "*.parquet"):
        h.update(f"{fs.relative(f, path)}\0{fs.sha256(f)}\n".encode())
    return h.hexdigest()


def check_target(out: str, *, overwrite: bool, incremental: bool) -> None:
    """Refuse to build into an existing non-empty OUT unless told how to treat it."""
    if fs.is_file(out):
        raise PublishError(f"--out {out} is a file; give a folder")
    if fs.list_files(out) and not (overwrite or incremental):
        raise PublishError(
            f"--out {out} already holds files; pass --overwrite to replace it (published atomically "
            "when the new build is complete), --incremental to add new input shards, or another --out"
        )
    if incremental and not fs.is_file(fs.join(out, MANIFEST)):
        raise PublishError(f"--incremental: {out}/{MANIFEST} is missing; run a full build first")


MANIFEST = "manifest.json"


STAGING_ENV = "WORLDLINE_POOLS_STAGING"
"""Set to the staging folder while the Beam job runs: every worker process the job starts inherits
it, so the workers of a build can be found (and stopped) by the build or, after a kill -9, by the next
build of the same OUT."""


def staging_folder(out: str) -> str:
    """A fresh sibling of OUT (same file system and bucket, so publishing is a rename), named after
    the building process (`.OUT.staging-<pid>-<id>`) so a later build can tell a dead build's folder."""
    parent, name = fs.split(out)
    staging = fs.join(parent, f".{name}.staging-{os.getpid()}-{uuid.uuid4().hex[:12]}")
    fs.mkdirs(staging)
    return staging


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def job_processes(staging: str) -> list[int]:
    """Processes (other than this one) started for the build that writes `staging`: the Beam workers,
    found by the STAGING_ENV they inherited (Linux /proc; none elsewhere)."""
    tag = f"{STAGING_ENV}={staging}".encode() + b"\0"
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if tag in environ and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return sorted(found)


def stop_job_processes(staging: str, grace_s: float = 3.0) -> list[int]:
    """Stop the build's worker processes: SIGTERM, then SIGKILL for those still there after `grace_s`."""
    pids = job_processes(staging)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)
        pids = [p for p in pids if _alive(p)]
        if not pids:
            break
    return pids


def reap_stale_staging(out: str) -> list[str]:
    """Remove the staging folders of OUT's builds whose process is gone (killed with kill -9 or by the
    OOM killer), after stopping the worker processes they left. Folders of running builds stay."""
    if fs.is_url(out):
        return []  # other machines may build into the same bucket: their process ids mean nothing here
    parent, name = os.path.split(os.path.abspath(out))
    pattern = re.compile(rf"\.{re.escape(name)}\.staging-(\d+)-[0-9a-f]+")
    removed = []
    for entry in sorted(Path(parent).glob(f".{name}.staging-*")):
        match = pattern.fullmatch(entry.name)
        if match is None or _alive(int(match.group(1))):
            continue
        stop_job_processes(str(entry))
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(str(entry))
    return removed


@contextlib.contextmanager
def signals_raise(staging: str) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise SystemExit and SIGINT KeyboardInterrupt in the
    main thread (Python's default for SIGTERM ends the process without cleanup), so an interrupted
    build discards its staging. The job's worker processes are stopped first: Beam's multi-process
    runner, unwinding, waits for its workers to exit, and they would wait for work forever."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_exit(signum: int, frame: Any) -> None:
        stop_job_processes(staging)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    signals = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    previous = {sig: signal.signal(sig, raise_exit) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def publish(staging: str, out: str) -> None:
    """Replace OUT by the complete staging folder.

    Local: two renames of whole folders (the old pools are removed after), atomic for readers.
    Object store: objects cannot be renamed together, so OUT/manifest.json is the commit point: it is
    removed first, the old objects are deleted, the new ones moved in, and the new manifest is moved
    last. A reader that starts from OUT/manifest.json (`pools verify`, `pools summary`) sees the old
    pools or the new ones; one that lists OUT/*/part-*.parquet while a publish runs may see a mix.
    """
    if not fs.is_url(out):
        replace_dir(staging, out)
        return
    fs.delete_file(fs.join(out, MANIFEST))
    fs.delete_tree(out)
    files = fs.list_files(staging)
    last = fs.join(staging, MANIFEST)
    moved = [f for f in files if f != last]
    fs.move_files(moved, [fs.join(out, fs.relative(f, staging)) for f in moved])
    if fs.is_file(last):
        fs.move_files([last], [fs.join(out, MANIFEST)])
    fs.delete_tree(staging)  # what is left: hidden temporary files of the job


def discard(staging: str) -> None:
    fs.delete_tree(staging)


@dataclass(slots=True)
class IncrementalPlan:
    """The inputs of an incremental build: the previous build's and the new ones."""

    inputs: list[str]
    knowledge: list[str]
    evals: list[str]
    new_inputs: list[str]


def incremental_plan(
    out: str, config_fingerprint: str, inputs: list[str], knowledge: list[str], evals: list[str]
) -> IncrementalPlan:
    """Merge the previous manifest's inputs with the new ones, after checking nothing earlier changed."""
    manifest: dict[str, Any] = fs.read_json(fs.join(out, MANIFEST))
    if manifest.get("config_fingerprint") != config_fingerprint:
        raise PublishError(
            f"--incremental: the configuration differs from the one {out} was built with "
            f"({manifest.get('config_fingerprint')} -> {config_fingerprint}); run a full build with --overwrite"
        )
    previous: list[str] = []
    for item in manifest.get("inputs", []):
        path, digest = item["path"], item.get("digest")
        if not fs.exists(path):
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
