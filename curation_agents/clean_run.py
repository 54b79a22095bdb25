"""Run the cleaner over files: accepted trajectories to shards, the rest to DIR/quarantine/, counts to
DIR/summary.json.

Resume: every record has a key (dataset path + locator) that appears in its outputs (a trajectory's
`source.uri`, a quarantine row's `record_key`). Outputs are published atomically in batches, quarantine
before accepted, so after a kill the published outputs say exactly which records are finished; a rerun
skips those and redoes the rest, and each record lands once. With per-node checkpoints on (`--checkpoint
always`, or `auto` with an LLM endpoint) a record interrupted mid-graph also resumes from its last
finished stage, which saves the LLM calls it already paid for.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import multiprocessing.connection
import os
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from curation_agents.executor import DirectGraphExecutor, UnsupportedGraph
from curation_agents.formats import Format
from curation_agents.graph import build_graph
from curation_agents.model import CHECKPOINT_TYPES, CleanConfig, CleanState, RecordRef, as_trajectory
from curation_agents.reader import RawRecord, discover, is_file_payload, iter_records
from schemas import ShardWriter, Trajectory
from schemas.atomic import atomic_write_json
from schemas.quarantine import CLEAN_QUARANTINE_SCHEMA
from schemas.reasons import ReasonCode
from schemas.shards import iter_record_batches, read_manifest
from worldline.redaction.detect import json_text_is_clean, redact, redact_json

QUARANTINE_DIR = "quarantine"
QUARANTINE_PARTS = "parts"
CHECKPOINT_DB = ".clean-checkpoints.sqlite"
ACCEPTED_ROW_GROUP = 128
PROGRESS_INTERVAL_S = 0.2


@dataclass
class Outcome:
    """What the graph decided for one record."""

    record: RecordRef
    trajectories: list[Trajectory]  # the accepted episodes
    quarantine: list[dict[str, Any]]

    @property
    def accepted(self) -> list[dict[str, Any]]:
        """The accepted episodes as JSON objects (`Trajectory.to_json()`)."""
        return [t.to_json() for t in self.trajectories]


@dataclass
class RunStats:
    records_in: int = 0
    resumed: int = 0
    processed: int = 0
    files: int = 0
    worker_deaths: int = 0
    started: float = field(default_factory=time.monotonic)


_CHECKPOINT_BUSY_TIMEOUT_S = 120.0


def prepare_checkpoints(path: Path) -> None:
    """Create the checkpoint database (tables, WAL journal) so that parallel workers only open it."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(path), timeout=_CHECKPOINT_BUSY_TIMEOUT_S)
    try:
        SqliteSaver(conn).setup()
    finally:
        conn.close()


def checkpoint_serde() -> Any:
    """LangGraph's serializer, allowed to restore the typed trajectories the graph state holds."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    return JsonPlusSerializer(allowed_msgpack_modules=list(CHECKPOINT_TYPES))


def checkpoint_thread_id(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def record_ref(raw: RawRecord, path: Path, dataset_path: str) -> RecordRef:
    return {
        "key": f"{dataset_path}#{raw.locator}",
        "source_path": str(path),
        "dataset_path": dataset_path,
        "locator": raw.locator,
        "format": raw.format.value,
    }


class GraphSession:
    """Runs records through the compiled graph, with or without durable per-node checkpoints."""

    def __init__(self, config: CleanConfig, checkpoint_path: Path | None, curator: Any = None) -> None:
        self.config = config
        self.saver = None
        self.conn: sqlite3.Connection | None = None
        if checkpoint_path is not None:
            from langgraph.checkpoint.sqlite import SqliteSaver

            # Parallel workers share the file: wait for each other's writes instead of failing.
            self.conn = sqlite3.connect(
                str(checkpoint_path), check_same_thread=False, timeout=_CHECKPOINT_BUSY_TIMEOUT_S
            )
            self.saver = SqliteSaver(self.conn, serde=checkpoint_serde())
        self.graph = build_graph(config, curator=curator, checkpointer=self.saver)
        # Without checkpoints, the same graph runs through the direct executor (Pregel's per-step
        # machinery costs more than the deterministic stages); with them, Pregel persists every step.
        # A graph the direct executor cannot reproduce exactly still runs, through Pregel.
        self.direct: DirectGraphExecutor | None = None
        if self.saver is None:
            try:
                self.direct = DirectGraphExecutor(self.graph)
            except UnsupportedGraph:
                self.direct = None
        self.finished_threads: list[str] = []

    def run(self, raw: RawRecord, ref: RecordRef) -> Outcome:
        # Decoded records are redacted before the graph sees them: the graph's input is checkpointed too.
        counts: Counter[str] = Counter()
        payload = raw.payload
        pii = frozenset(self.config.pii)
        if not is_file_payload(payload) and not (
            raw.source_text is not None and json_text_is_clean(raw.source_text, pii)
        ):
            payload = redact_json(payload, counts, pii)
        state: CleanState = {
            "record": ref,
            "payload": payload,
            "payload_redacted": True,
            "quarantine": [],
            "failed": False,
            "redactions": sum(counts.values()),
            "redaction_kinds": dict(counts),
        }
        if raw.failure is not None:
            state["preflight"] = {"reason": raw.failure.reason.value, "detail": raw.failure.detail}
        if self.direct is not None:
            final = self.direct.invoke(dict(state))
        elif self.saver is None:
            final = self.graph.invoke(state)
        else:
            thread = checkpoint_thread_id(ref["key"])
            cfg = {"configurable": {"thread_id": thread}}
            snapshot = self.graph.get_state(cfg)
            if snapshot.values and snapshot.next:
                final = self.graph.invoke(None, cfg, durability="sync")  # resume mid-graph
            elif snapshot.values and snapshot.values.get("record", {}).get("key") == ref["key"]:
                final = snapshot.values  # finished before a kill, not yet published
            else:
                final = self.graph.invoke(state, cfg, durability="sync")
            self.finished_threads.append(thread)
        accepted = [as_trajectory(t) for t in final.get("accepted") or []]
        return Outcome(ref, accepted, list(final.get("quarantine") or []))

    def forget_published(self) -> None:
        """Drop checkpoints of records whose outputs are now published."""
        if self.saver is not None:
            for thread in self.finished_threads:
                self.saver.delete_thread(thread)
        self.finished_threads = []

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def _records(
    paths: list[str], config: CleanConfig, files: list[tuple[Path, str]] | None = None
) -> Iterator[tuple[RawRecord, RecordRef]]:
    for path, dataset_path in files if files is not None else discover(paths):
        for raw in iter_records(path, config.limits):
            yield raw, record_ref(raw, path, dataset_path)


# -- worker processes -------------------------------------------------------------------------------

# Files handed to a worker ahead of the one it cleans, so it never waits for the writer to send more.
FILES_IN_FLIGHT = 2
# The locator of the quarantine row of a file whose worker died: the file, not one of its records.
WORKER_DIED_LOCATOR = "worker-died"


def _worker(
    conn: Any,
    config: CleanConfig,
    done: set[str],
    checkpoint: str | None,
    use_llm: bool,
    budget: Any = None,
) -> None:
    """Clean the files the parent sends over CONN, in order, and send back batches of results.

    Each worker has a pipe of its own, so a worker killed mid-write (OOM killer, kill -9) damages only
    its own channel and holds no lock the others need. A closed pipe means the parent is gone: exit.
    """
    curator = _make_curator(budget) if use_llm else None
    session = GraphSession(config, Path(checkpoint) if checkpoint else None, curator)
    batch: list[Any] = []
    try:
        while True:
            task = conn.recv()
            if task is None:
                break
            path, dataset_path = task
            for raw, ref in _records([], config, [(Path(path), dataset_path)]):
                if ref["key"] in done:
                    batch.append(("resumed", ref["key"]))
                else:
                    batch.append(("outcome", session.run(raw, ref)))
                if len(batch) >= 16:
                    conn.send(batch)
                    batch = []
            batch.append(("file_done", path))
            conn.send(batch)
            batch = []
        if curator is not None:
            conn.send([("llm_report", curator.report())])
        conn.send(None)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        os._exit(1)  # the parent was killed: no orphan keeps working
    finally:
        session.close()


@dataclass
class _WorkerSlot:
    """A worker process, its pipe, and the files sent to it that it has not finished (oldest first)."""

    process: Any
    conn: Any
    assigned: list[tuple[str, str]] = field(default_factory=list)
    closing: bool = False
    heard_from: bool = False  # it sent something: it started


def _death_cause(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"killed by {name}" + (" (the OOM killer or kill -9)" if name == "SIGKILL" else "")
    return f"exited with status {exitcode}"


def _make_curator(budget: Any = None) -> Any:
    from curation_agents.llm_stages import LLMCurator

    return LLMCurator(budget=budget)


def _make_budget() -> Any:
    """One LLM budget for the whole run (WORLDLINE_LLM_MAX_CALLS / _MAX_TOKENS), shared by the workers."""
    from curation_agents.llm_stages import SharedBudget
    from worldline.llm import LLMConfig

    config = LLMConfig.from_env()
    return SharedBudget(config.max_calls, config.max_total_tokens)


# -- the run ----------------------------------------------------------------------------------------


class CleanSettingsError(ValueError):
    """A rerun into an output folder asks for settings other than the ones its records were made with."""


# The settings a record's outcome depends on, with the option that sets each: a resume skips the
# records finished before, so it must run under the same settings or the output would mix them.
RESUME_SETTINGS = {
    "source_kind": "--source-kind",
    "source_name": "--source-name",
    "licence": "--licence",
    "accept_threshold": "--threshold",
    "max_episode_turns": "--max-episode-turns",
    "max_record_bytes": "--max-record-mb",
    "pii": "--redact-pii",
    "llm": "--llm/--no-llm (or the endpoint)",
}
SETTINGS_KEY = "clean_settings"


def resume_settings(config: CleanConfig, use_llm: bool) -> dict[str, Any]:
    """The RESUME_SETTINGS of a run, as recorded in its output manifests."""
    return {
        "source_kind": config.source_kind,
        "source_name": config.source_name,
        "licence": config.licence,
        "accept_threshold": config.accept_threshold,
        "max_episode_turns": config.max_episode_turns,
        "max_record_bytes": config.limits.max_record_bytes,
        "pii": sorted(config.pii),
        "llm": use_llm,
    }


def check_resume_settings(out: Path, settings: dict[str, Any]) -> None:
    """Refuse to resume OUT under other settings than its records were made with, naming each one.

    The settings are read from the manifests a run records them in; outputs written before they were
    recorded are checked against the provenance in their summary.json."""
    recorded: dict[str, Any] | None = None
    for folder in (out, out / QUARANTINE_DIR):
        manifest = read_manifest(folder)
        if manifest is not None and isinstance(manifest.extra.get(SETTINGS_KEY), dict):
            recorded = manifest.extra[SETTINGS_KEY]
            break
    if recorded is None and (out / "summary.json").is_file():
        summary = json.loads((out / "summary.json").read_text("utf-8"))
        recorded = {k: summary[k] for k in settings if k in summary}
    if not recorded:
        return
    changed = [
        f"{RESUME_SETTINGS[k]} was {recorded[k]!r}, now {settings[k]!r}"
        for k in settings
        if k in recorded and recorded[k] != settings[k]
    ]
    if changed:
        raise CleanSettingsError(
            f"{out} holds records cleaned with other settings ({'; '.join(changed)}): rerun with the "
            "earlier settings to resume, or clean into another --out"
        )


class CleanRun:
    """One `worldline clean` invocation."""

    def __init__(
        self,
        paths: list[str],
        out: Path,
        config: CleanConfig,
        *,
        workers: int = 1,
        checkpoint: str = "auto",
        flush_every: int = 500,
        on_progress: Callable[[int, int, int], None] | None = None,
    ) -> None:
        self.paths = paths
        self.out = Path(out)
        self.config = config
        self.workers = max(1, workers)
        self.use_llm = config.use_llm
        self.checkpoint = checkpoint == "always" or (checkpoint == "auto" and self.use_llm)
        self.flush_every = max(1, flush_every)
        self.on_progress = on_progress
        self.stats = RunStats()
        self.seen: set[str] = set()
        self.llm_reports: list[dict[str, Any]] = []
        self.budget: Any = _make_budget() if self.use_llm else None
        self._last_progress = 0.0

    # outputs ------------------------------------------------------------------------------------
    def _open_writers(self) -> None:
        # Small row groups: the writer buffers a row group of trajectories in memory before encoding it.
        self.accepted_writer = ShardWriter(self.out, row_group_rows=ACCEPTED_ROW_GROUP)
        self.quarantine_writer = ShardWriter(
            self.out / QUARANTINE_DIR, schema=CLEAN_QUARANTINE_SCHEMA, subdir=QUARANTINE_PARTS
        )
        self.quarantine_writer.manifest.extra["content"] = "curation quarantine"
        settings = resume_settings(self.config, self.use_llm)
        self.accepted_writer.manifest.extra[SETTINGS_KEY] = settings
        self.quarantine_writer.manifest.extra[SETTINGS_KEY] = settings
        self.pending = 0

    def _write(self, outcome: Outcome) -> None:
        rec = outcome.record
        record_outcome = "accepted" if outcome.trajectories else "quarantined"
        rows = [
            {
                "record_key": rec["key"],
                "source_path": rec["source_path"],
                "locator": rec["locator"],
                "format": rec["format"],
                "stage": q["stage"],
                "reason": q["reason"],
                "detail": redact(q["detail"]),
                "episode": q.get("episode"),
                "record_outcome": record_outcome,
            }
            for q in outcome.quarantine
        ]
        if rows:
            self.quarantine_writer.write_records(rows)
        for trajectory in outcome.trajectories:
            self.accepted_writer.write(trajectory)
        self.pending += 1

    def _flush(self, session: GraphSession | None) -> None:
        # Quarantine first: a kill between the two publishes leaves accepted records unpublished, so
        # they are redone; their episode rows may then appear twice, and summaries count distinct rows.
        self.quarantine_writer.flush()
        self.accepted_writer.flush()
        if session is not None:
            session.forget_published()
        self.pending = 0

    def finished_keys(self) -> tuple[set[str], set[str]]:
        """(accepted record keys, quarantined record keys) already published in the output folder."""
        accepted: set[str] = set()
        if read_manifest(self.out) is not None:
            for _, batch in iter_record_batches(self.out, columns=["source"], batch_size=4096):
                for source in batch.column("source").to_pylist():
                    if source and source.get("uri"):
                        accepted.add(source["uri"])
        quarantined: set[str] = set()
        for table in self._quarantine_tables(["record_key", "record_outcome"]):
            for key, outcome in zip(
                table.column("record_key").to_pylist(),
                table.column("record_outcome").to_pylist(),
                strict=True,
            ):
                if outcome == "quarantined":
                    quarantined.add(key)
        return accepted, quarantined

    def _quarantine_tables(self, columns: list[str]) -> Iterator[pa.Table]:
        root = self.out / QUARANTINE_DIR
        manifest = read_manifest(root)
        if manifest is None:
            return
        for f in manifest.files:
            yield pq.read_table(root / f.path, columns=columns, schema=CLEAN_QUARANTINE_SCHEMA)

    # main loop ----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        check_resume_settings(self.out, resume_settings(self.config, self.use_llm))
        self.out.mkdir(parents=True, exist_ok=True)
        accepted_before, quarantined_before = self.finished_keys()
        done = accepted_before | quarantined_before
        self._open_writers()
        files = list(discover(self.paths))
        self.total_files = len(files)
        files = self._skip_files_whose_worker_died(files, done)
        try:
            if self.workers == 1:
                self._run_inline(files, done)
            else:
                self._run_parallel(files, done)
        finally:
            self._flush(None)
            self.accepted_writer.close()
            self.quarantine_writer.close()
        return self.write_summary()

    def _count(self, key: str, resumed: bool) -> None:
        if key in self.seen:
            raise RuntimeError(
                f"record key {key!r} occurs twice; two inputs resolve to the same dataset path"
            )
        self.seen.add(key)
        self.stats.records_in += 1
        if resumed:
            self.stats.resumed += 1
        else:
            self.stats.processed += 1

    def _progress(self, *, force: bool = False) -> None:
        # At most a few updates a second: a progress callback per record costs more than some records.
        if self.on_progress is None:
            return
        now = time.monotonic()
        if force or now - self._last_progress >= PROGRESS_INTERVAL_S:
            self._last_progress = now
            self.on_progress(self.stats.files, self.total_files, self.stats.records_in)

    def _run_inline(self, files: list[tuple[Path, str]], done: set[str]) -> None:
        curator = _make_curator(self.budget) if self.use_llm else None
        session = GraphSession(self.config, self.out / CHECKPOINT_DB if self.checkpoint else None, curator)
        try:
            for path, dataset_path in files:
                for raw, ref in _records([], self.config, [(path, dataset_path)]):
                    resumed = ref["key"] in done
                    self._count(ref["key"], resumed)
                    if not resumed:
                        self._write(session.run(raw, ref))
                        if self.pending >= self.flush_every:
                            self._flush(session)
                    self._progress()
                self.stats.files += 1
                self._progress(force=True)
            self._flush(session)
        finally:
            session.close()
            if curator is not None:
                self.llm_reports.append(curator.report())

    def _run_parallel(self, files: list[tuple[Path, str]], done: set[str]) -> None:
        """Spread FILES over worker processes; a worker that dies costs its file, never the run.

        The file a dead worker was cleaning is quarantined as `worker_died` (what it finished before
        is kept), the files sent ahead to it go to the next worker, and a new worker takes its place.
        """
        ctx = mp.get_context("spawn")
        pending = [(str(path), dataset_path) for path, dataset_path in files]
        pending.reverse()  # popped from the end: files go out in order
        checkpoint = str(self.out / CHECKPOINT_DB) if self.checkpoint else None
        if checkpoint is not None:
            # Create the tables and switch to WAL once, before the workers open the file: two workers
            # doing it at the same moment fail with "database is locked" (the journal-mode switch
            # needs the file to itself).
            prepare_checkpoints(Path(checkpoint))

        def start() -> _WorkerSlot:
            parent_end, child_end = ctx.Pipe()
            process = ctx.Process(
                target=_worker,
                args=(child_end, self.config, done, checkpoint, self.use_llm, self.budget),
                daemon=True,
            )
            process.start()
            child_end.close()  # the parent keeps only its end: a dead worker's pipe reads as closed
            return _WorkerSlot(process, parent_end)

        def feed(slot: _WorkerSlot) -> None:
            if slot.closing:
                return  # told to stop: files handed back by a dead worker go to its replacement
            while len(slot.assigned) < FILES_IN_FLIGHT and pending:
                task = pending.pop()
                slot.assigned.append(task)
                slot.conn.send(task)
            if not pending and not slot.closing:
                slot.conn.send(None)
                slot.closing = True

        slots = [start() for _ in range(min(self.workers, max(1, len(pending))))]
        try:
            for slot in slots:
                feed(slot)
            while slots:
                waitables = [s.conn for s in slots] + [s.process.sentinel for s in slots]
                for ready in mp.connection.wait(waitables, timeout=5):
                    owner = next((s for s in slots if ready in (s.conn, s.process.sentinel)), None)
                    if owner is None:
                        continue  # its pipe and its end were both ready: handled already
                    finished = self._receive(owner, feed, drain=ready is not owner.conn)
                    if finished is None:
                        continue
                    slots.remove(owner)
                    owner.conn.close()
                    owner.process.join(timeout=10)
                    if finished:
                        continue
                    code = owner.process.exitcode
                    if not owner.heard_from and code is not None and code > 0:
                        # Not killed: it failed before cleaning anything (its error is above), and
                        # so would every worker started in its place.
                        raise RuntimeError(f"a clean worker exited with status {code} before it started")
                    self._worker_died(owner, pending)
                    if pending:
                        replacement = start()
                        slots.append(replacement)
                        feed(replacement)
        finally:
            for slot in slots:  # left only when the run stops early: a closed pipe stops each worker
                slot.conn.close()
            for slot in slots:
                slot.process.join(timeout=10)

    def _receive(self, slot: _WorkerSlot, feed: Callable[[_WorkerSlot], None], drain: bool) -> bool | None:
        """Read what SLOT's worker sent: True once it finished, False if it died, None while it works.

        DRAIN (its process ended) reads everything left in the pipe before deciding.
        """
        while True:
            try:
                if drain and not slot.conn.poll():
                    return False  # ended without saying it finished
                batch = slot.conn.recv()
            except (EOFError, OSError):
                return False  # its pipe closed mid-message or without the end mark: it died
            slot.heard_from = True
            if batch is None:
                return True
            for kind, item in batch:
                if kind == "resumed":
                    self._count(item, True)
                elif kind == "llm_report":
                    self.llm_reports.append(item)
                    continue
                elif kind == "outcome":
                    self._count(item.record["key"], False)
                    self._write(item)
                    if self.pending >= self.flush_every:
                        self._flush(None)
                else:
                    self.stats.files += 1
                    slot.assigned.pop(0)
                    try:
                        feed(slot)
                    except (BrokenPipeError, OSError):
                        pass  # it died since: its sentinel tells, and its files are handed on then
                self._progress(force=kind == "file_done")
            if not drain:
                return None

    def _worker_died(self, slot: _WorkerSlot, pending: list[tuple[str, str]]) -> None:
        """Quarantine the file a dead worker was cleaning; hand the files sent ahead to it to others."""
        self.stats.worker_deaths += 1
        if not slot.assigned:
            return
        (path, dataset_path), *ahead = slot.assigned
        pending.extend(reversed(ahead))
        key = f"{dataset_path}#{WORKER_DIED_LOCATOR}"
        ref: RecordRef = {
            "key": key,
            "source_path": path,
            "dataset_path": dataset_path,
            "locator": WORKER_DIED_LOCATOR,
            "format": Format.UNKNOWN.value,
        }
        detail = (
            f"{Path(path).name}: the worker process cleaning it {_death_cause(slot.process.exitcode)}; "
            "records it finished before are kept, the rest of the file is not read again on resume"
        )
        quarantine = {
            "stage": "worker",
            "reason": ReasonCode.WORKER_DIED.value,
            "detail": detail,
            "episode": None,
        }
        self._count(key, False)
        self._write(Outcome(ref, [], [quarantine]))
        self.stats.files += 1
        self._progress(force=True)

    def _skip_files_whose_worker_died(
        self, files: list[tuple[Path, str]], done: set[str]
    ) -> list[tuple[Path, str]]:
        """Files an earlier run quarantined as `worker_died` are not read again (they would kill again):
        their published records count as resumed."""
        died = {dp for _, dp in files if f"{dp}#{WORKER_DIED_LOCATOR}" in done}
        if not died:
            return files
        for key in sorted(done):
            if key.rsplit("#", 1)[0] in died:
                self._count(key, True)
        self.stats.files += len(died)
        return [(path, dp) for path, dp in files if dp not in died]

    # summary ------------------------------------------------------------------------------------
    def _llm_usage(self) -> dict[str, Any]:
        """Real LLM use of this invocation: calls, tokens, cost, decisions and fallbacks with reasons."""
        from curation_agents.llm_stages import merge_llm_reports

        usage = merge_llm_reports(self.llm_reports)
        if self.budget is not None:
            usage["budget"] = self.budget.used
        return usage

    def write_summary(self) -> dict[str, Any]:
        accepted_keys, quarantined_keys = self.finished_keys()
        accepted = self.seen & accepted_keys
        quarantined = (self.seen & quarantined_keys) - accepted
        per_reason: Counter[str] = Counter()
        per_stage: Counter[str] = Counter()
        episode_reasons: Counter[str] = Counter()
        first_reason: dict[str, tuple[str, str]] = {}
        episode_rows: set[tuple[str, int]] = set()
        for table in self._quarantine_tables(["record_key", "stage", "reason", "episode", "record_outcome"]):
            for key, stage, reason, episode, outcome in zip(
                *(table.column(c).to_pylist() for c in table.column_names), strict=True
            ):
                if key not in self.seen:
                    continue
                if outcome == "quarantined" and key in quarantined:
                    first_reason.setdefault(key, (stage, reason))
                elif outcome == "accepted" and key in accepted and (key, episode) not in episode_rows:
                    episode_rows.add((key, episode))
                    episode_reasons[reason] += 1
        for stage, reason in first_reason.values():
            per_reason[reason] += 1
            per_stage[stage] += 1
        trajectories = 0
        redactions: Counter[str] = Counter()  # per class, from the trajectories written (never values)
        if read_manifest(self.out) is not None:
            for _, batch in iter_record_batches(self.out, columns=["source", "metadata"], batch_size=4096):
                for source, metadata in zip(
                    batch.column("source").to_pylist(), batch.column("metadata").to_pylist(), strict=True
                ):
                    if source and source.get("uri") in self.seen:
                        trajectories += 1
                        redactions.update(_redaction_kinds(metadata))
        summary: dict[str, Any] = {
            "records_in": self.stats.records_in,
            "accepted": len(accepted),
            "quarantined": len(quarantined),
            "per_reason": dict(sorted(per_reason.items())),
            "per_stage": dict(sorted(per_stage.items())),
            "trajectories_written": trajectories,
            "redactions": dict(sorted(redactions.items())),
            "episodes_quarantined_in_accepted_records": dict(sorted(episode_reasons.items())),
            "resumed_records": self.stats.resumed,
            "processed_records": self.stats.processed,
            "files": self.stats.files,
            "worker_deaths": self.stats.worker_deaths,
            "source_kind": self.config.source_kind,
            "source_name": self.config.source_name,
            "licence": self.config.licence,
            "accept_threshold": self.config.accept_threshold,
            "llm": self.use_llm,
            **({"llm_usage": self._llm_usage()} if self.use_llm else {}),
            "seconds": round(time.monotonic() - self.stats.started, 3),
        }
        if summary["records_in"] != summary["accepted"] + summary["quarantined"]:
            missing = sorted(self.seen - accepted - quarantined)[:5]
            raise RuntimeError(f"counts do not reconcile: {summary}; records without an outcome: {missing}")
        atomic_write_json(self.out / "summary.json", summary)
        return summary


def _redaction_kinds(metadata: Any) -> dict[str, int]:
    """The redaction counts per class of a trajectory's metadata column (a JSON text or a mapping)."""
    if isinstance(metadata, str):
        if "redaction_kinds" not in metadata:
            return {}  # most trajectories: nothing was redacted, nothing to parse
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return {}
    kinds = metadata.get("redaction_kinds") if isinstance(metadata, dict) else None
    return {str(k): int(v) for k, v in kinds.items() if isinstance(v, int)} if isinstance(kinds, dict) else {}
