"""The collection job: tasks in, trajectories out, in parallel sandboxes, resumable after any crash.

Each finished trajectory (including failures, with their partial turns and a reason) is written through
schemas.shards.ShardWriter, which publishes parts atomically. `--resume` reads what was published and
skips exactly the tasks whose recorded outcome is final; an aborted episode and missing infrastructure
(an engine outage, no device, the LLM endpoint down or its budget spent) are not final and run again.
Nothing that was not published counts, so a SIGKILL loses only unpublished work.

Faults of the run itself are not tasks' outcomes: SIGINT, SIGTERM and SIGHUP all stop the run the same
way (publish what is final, abort what is in flight, remove its recordings); a full disk stops it with
one line naming the path and the space needed, publishing nothing torn; a spent LLM budget stops it
before the next sandbox. A task keeps its trajectory id however often it was interrupted.
"""

from __future__ import annotations

import errno
import hashlib
import re
import shutil
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

import docker.errors
import requests.exceptions

from collectors import engine
from collectors.environment import (
    INFO_EPISODE_END,
    INFO_INFRA_FAILURE,
    INFO_SYNC_LOST,
    Environment,
    EnvironmentOptions,
    InfrastructureUnavailable,
    Task,
    TaskError,
    environment_class,
    load_tasks,
)
from collectors.personas import PersonaError, PersonaSetting
from collectors.policies import POLICIES, Policy, PolicyError, make_policy
from collectors.recording import remove_unpublished, take_redactions
from collectors.sandbox import (
    SandboxError,
    SandboxLimits,
    reap_orphans,
    remove_all_live,
    reopen_sandboxes,
    shutdown_sandboxes,
)
from collectors.shell import keys_to_bytes
from schemas import (
    ActionSpace,
    Domain,
    Observation,
    ShardWriter,
    Source,
    SourceKind,
    Trajectory,
    TrajectoryStatus,
    Turn,
    iter_trajectories,
    read_manifest,
    stable_id,
    utc_now,
)
from schemas.atomic import atomic_write_json
from schemas.shards import MANIFEST_NAME, Manifest, ShardError
from schemas.turn_facts import OUT_OF_ACTION_SPACE
from schemas.turn_facts import has as has_fact
from worldline.redaction.records import redact_trajectory

CASTS_DIR = "casts"
# Outcomes that are not final (aborted, engine outage) are kept here, a dataset of its own inside OUT:
# OUT's manifest lists final outcomes only, exactly one per task (and rollout), so readers of OUT (pools
# build) never see an attempt that a resumed run superseded.
ATTEMPTS_DIR = "attempts"
_SIGNAL_POLL_S = 0.2
# Engine/transport failures: the environment did not fail, the infrastructure did; retried on resume.
_INFRA_ERRORS: tuple[type[BaseException], ...] = (
    engine.EngineUnavailable,
    requests.exceptions.ConnectionError,
    docker.errors.NotFound,
    InfrastructureUnavailable,
)
_STOP_SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if s is not None)
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class CollectError(RuntimeError):
    """The run cannot start (bad task file, engine down, missing image, occupied output folder)."""


class DiskFull(CollectError):
    """The disk of the output folder filled up: an error of the run, never a task's outcome. What was
    published before stays valid; the run resumes with `--resume` once there is space."""

    def __init__(self, path: Path, needed_bytes: int) -> None:
        self.path = path
        self.needed_bytes = needed_bytes
        free = _free_bytes(path)
        super().__init__(
            f"disk full: cannot write {path} (No space left on device; {_size(free)} free there, about "
            f"{_size(needed_bytes)} needed to finish the run); free space, then rerun with --resume"
        )


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP stopped the run after what was final was published; `signum` says
    which (the CLI ends the way the signal asks)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class CollectConfig:
    """One `worldline collect` run."""

    env: str
    tasks_path: Path
    policy: str
    out: Path
    concurrency: int = 1
    resume: bool = False
    max_turns: int = 30
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    flush_every: int = 8
    source_name: str | None = None
    rollouts: int = 1  # episodes per task; each rollout samples the policy with its own sample index
    temperature: float | None = 0.0  # the openai policy's sampling temperature without a persona
    persona: PersonaSetting = field(default_factory=PersonaSetting)  # the openai policy's (none by default)
    context_tokens: int | None = None  # the openai policy drops old turns beyond this estimate
    episode_deadline_s: float = 1800.0
    shard: tuple[int, int] | None = (
        None  # (K, N): collect only shard K of N into OUT/shard-K-of-N  # wall-clock limit per episode unless the task sets deadline_s
    )
    llm_config: Any = None  # worldline.llm.LLMConfig for the openai policy; None reads the environment


@dataclass
class CollectSummary:
    """What the run did; `by_status` counts trajectories written in this run."""

    total_tasks: int
    skipped: int
    written: int
    by_status: Counter[str]
    seconds: float
    out: Path
    redactions: Counter[str] = field(default_factory=Counter)  # secrets and PII redacted, per class
    llm_usage: dict[str, Any] | None = None  # the openai policy's client ledger (calls, tokens, retries)
    stopped: str | None = None  # why the run started no more episodes (a spent LLM budget), if it stopped
    not_started: int = 0  # episodes left for `--resume` because the run stopped


def shard_of(task_id: str, count: int) -> int:
    """The shard (0..count-1) a task belongs to: a hash of its id, so the partition depends on nothing
    but the ids (not the order of the task file, not the machine) and every task is in exactly one."""
    return int.from_bytes(hashlib.sha256(task_id.encode("utf-8")).digest()[:8], "big") % count


def shard_dir(index: int, count: int) -> str:
    return f"shard-{index}-of-{count}"


def parse_shard(text: str) -> tuple[int, int]:
    """`K/N` with 0 <= K < N (K is Kubernetes' JOB_COMPLETION_INDEX); errors say what is expected."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match or not 0 <= int(match.group(1)) < int(match.group(2)):
        raise CollectError(f"--shard {text!r}: expected K/N with 0 <= K < N, e.g. 0/4")
    return int(match.group(1)), int(match.group(2))


def merge_shards(out: Path, *, allow_missing: bool = False) -> Manifest:
    """Write OUT/manifest.json listing the published parts of every OUT/shard-K-of-N folder, so OUT reads
    as one dataset (`pools build --in OUT`). Refuses mixed shard counts, and missing shards unless
    `allow_missing`."""
    found: dict[int, Manifest] = {}
    counts: set[int] = set()
    for folder in sorted(out.glob("shard-*-of-*")):
        match = re.fullmatch(r"shard-(\d+)-of-(\d+)", folder.name)
        manifest = read_manifest(folder) if match and folder.is_dir() else None
        if match is None or manifest is None:
            continue
        counts.add(int(match.group(2)))
        found[int(match.group(1))] = manifest
    if not found:
        raise CollectError(f"{out}: no shard folders (shard-K-of-N with a manifest.json) to merge")
    if len(counts) > 1:
        raise CollectError(f"{out}: shard folders of different shard counts {sorted(counts)}; merge one run")
    (count,) = counts
    missing = sorted(set(range(count)) - set(found))
    if missing and not allow_missing:
        raise CollectError(
            f"{out}: shard(s) {', '.join(map(str, missing))} of {count} have no published dataset yet; "
            "run them (worldline collect --shard K/N) or pass --allow-missing"
        )
    merged = Manifest(extra={"merged_shards": sorted(found), "shard_count": count})
    for index in sorted(found):
        for f in found[index].files:
            merged.files.append(replace(f, path=f"{shard_dir(index, count)}/{f.path}"))
    atomic_write_json(out / MANIFEST_NAME, merged.to_json())
    return merged


def is_final(trajectory: Trajectory) -> bool:
    """A recorded outcome that resume must not redo: anything but an abort or a failure of the
    infrastructure (engine, device, LLM endpoint or budget: `retryable` in the metadata)."""
    if trajectory.status == TrajectoryStatus.ABORTED:
        return False
    return not trajectory.metadata.get("retryable")


def episode_key(task_id: str, rollout: int = 0) -> str:
    """One episode of a run: a task, or one of its rollouts (`--rollouts N`)."""
    return task_id if rollout == 0 else f"{task_id}#{rollout}"


def recorded_outcomes(out: Path) -> tuple[set[str], Counter[str]]:
    """(episode keys with a final outcome, attempts so far per key) from what is published in OUT; a key
    is the task id, with `#<rollout>` for rollouts after the first (see `episode_key`)."""
    final: set[str] = set()
    attempts: Counter[str] = Counter()
    for folder in (out, out / ATTEMPTS_DIR):
        if read_manifest(folder) is None:
            continue
        _count_outcomes(folder, final, attempts, set())
    return final, attempts


def _count_outcomes(folder: Path, final: set[str], attempts: Counter[str], casts: set[str]) -> None:
    for trajectory in iter_trajectories(folder):
        key = episode_key(
            str(trajectory.metadata.get("task_id", "")), int(trajectory.metadata.get("rollout", 0))
        )
        attempts[key] += 1
        if is_final(trajectory):
            final.add(key)
        if trajectory.metadata.get("asciicast"):
            casts.add(str(trajectory.metadata["asciicast"]))


def remove_orphan_casts(out: Path) -> int:
    """Delete the recordings in OUT/casts that no published trajectory of OUT names (an episode that was
    interrupted, or whose trajectory a killed or stopped run never published); returns how many."""
    folder = out / CASTS_DIR
    if not folder.is_dir():
        return 0
    named: set[str] = set()
    if read_manifest(out) is not None:
        _count_outcomes(out, set(), Counter(), named)
    removed = 0
    for cast in folder.iterdir():
        if cast.is_file() and f"{CASTS_DIR}/{cast.name}" not in named:
            cast.unlink(missing_ok=True)
            removed += 1
    return removed


def preflight(config: CollectConfig, tasks: list[Task]) -> Any:
    """Everything that can fail before the first task: each task's domain configuration, the output
    folder, and (only when some task runs in a container) the engine and the images. Returns the
    engine client, or None when no task needs one."""
    env_cls = environment_class(config.env)
    for task in tasks:
        try:
            env_cls.validate_task(task, f"{config.tasks_path}")
        except TaskError as exc:
            raise CollectError(f"cannot collect: {exc}") from exc
    if read_manifest(config.out) is not None and not config.resume:
        raise CollectError(
            f"{config.out} already holds a dataset; pass --resume to continue it or choose another --out"
        )
    engine_tasks = [t for t in tasks if env_cls.needs_engine(t)]
    if not engine_tasks:
        return None
    try:
        client = engine.connect()
    except engine.EngineUnavailable as exc:
        raise CollectError(f"cannot collect: {exc}") from exc
    for image in sorted({t.image or env_cls.default_image or "" for t in engine_tasks} - {""}):
        try:
            engine.image_reference(client, image)
        except docker.errors.ImageNotFound as exc:
            raise CollectError(f"cannot collect: {exc}") from exc
    return client


def collect(
    config: CollectConfig,
    *,
    on_progress: Callable[[Trajectory], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> CollectSummary:
    """Run every task of the task file (minus final ones when resuming) and write the trajectories.

    Raises CollectError when the run cannot start, DiskFull when the output's disk fills up, and
    Interrupted (a KeyboardInterrupt) on SIGINT / SIGTERM / SIGHUP, each after publishing what was final."""
    started = time.monotonic()
    try:
        Domain(config.env)
        environment_class(config.env)
    except (KeyError, ValueError) as exc:
        raise CollectError(str(exc)) from exc
    if config.policy not in POLICIES:
        raise CollectError(f"unknown policy {config.policy!r}; choose one of {', '.join(POLICIES)}")
    tasks = load_tasks(config.tasks_path)
    if not tasks:
        raise CollectError(f"{config.tasks_path}: no tasks (one JSON object per line); nothing to collect")
    if config.shard is not None:
        index, count = config.shard
        tasks = [t for t in tasks if shard_of(t.id, count) == index]
        config = replace(config, out=config.out / shard_dir(index, count), shard=None)
    if config.policy == "openai":
        try:  # a misspelt persona fails the run before any sandbox starts
            for task in tasks:
                config.persona.check().for_task(task.id, task.metadata)
        except PersonaError as exc:
            raise CollectError(f"cannot collect: {exc}") from exc
    client = preflight(config, tasks)
    llm_client = None
    if config.policy == "openai":
        from worldline.llm import LLMNotConfigured, SyncLLMClient

        try:
            llm_client = SyncLLMClient(config.llm_config)
        except LLMNotConfigured as exc:
            raise CollectError(f"cannot collect with the openai policy: {exc}") from exc
    if client is not None:
        reap_orphans(client)
    final, attempts = recorded_outcomes(config.out) if config.resume else (set(), Counter())
    # A killed run's recordings: unredacted temporary files, and published casts whose trajectories never were.
    remove_unpublished(config.out / CASTS_DIR)
    remove_orphan_casts(config.out)
    episodes = [(t, r) for t in tasks for r in range(max(1, config.rollouts))]
    pending = [(t, r) for t, r in episodes if episode_key(t.id, r) not in final]
    if on_start is not None:
        on_start(len(episodes), len(episodes) - len(pending))
    stop = threading.Event()
    active = _ActiveEnvironments()
    by_status: Counter[str] = Counter()
    redactions: Counter[str] = Counter()
    written = 0
    final_written = 0
    stopped: str | None = None
    queue = list(pending)
    writers: list[ShardWriter] = []  # OUT, then OUT/attempts on the first outcome that is not final

    def publish(trajectory: Trajectory) -> None:
        nonlocal written, final_written
        root = config.out if is_final(trajectory) else config.out / ATTEMPTS_DIR
        writer = next((w for w in writers if w.root == root), None)
        if writer is None:
            writer = ShardWriter(root)
            writers.append(writer)
        writer.write(trajectory)
        written += 1
        final_written += int(root == config.out)
        by_status[trajectory.status.value] += 1
        redactions.update(trajectory.metadata.get("redaction_kinds") or {})
        if written % max(1, config.flush_every) == 0:
            for w in writers:
                w.flush()

    run_label = f"collect-{int(time.time())}"
    failure: BaseException | None = None
    with _stop_signals() as received:
        try:
            with ThreadPoolExecutor(
                max_workers=max(1, config.concurrency), thread_name_prefix="collect"
            ) as pool:
                futures: dict[Future[Trajectory], tuple[Task, int]] = {}
                try:
                    while queue or futures:
                        if stopped is None:
                            stopped = _budget_spent(llm_client)
                        while queue and stopped is None and len(futures) < max(1, config.concurrency):
                            task, rollout = queue.pop(0)
                            policy = make_policy(
                                config.policy,
                                llm_client=llm_client,
                                max_turns=config.max_turns,
                                temperature=config.temperature,
                                sample_index=rollout,
                                context_tokens=config.context_tokens,
                                persona=config.persona,
                            )
                            attempt = attempts[episode_key(task.id, rollout)] + 1
                            fut = pool.submit(
                                run_episode,
                                config,
                                client,
                                task,
                                policy,
                                attempt,
                                stop,
                                run_label,
                                rollout,
                                active,
                            )
                            futures[fut] = (task, rollout)
                        if not futures:
                            break  # stopped with tasks left: they stay for --resume
                        # A timeout, so the main thread sees a stop signal within a fraction of a second.
                        done, _ = wait(futures, timeout=_SIGNAL_POLL_S, return_when=FIRST_COMPLETED)
                        for fut in done:
                            futures.pop(fut)
                            trajectory = fut.result()
                            publish(trajectory)
                            if trajectory.metadata.get("run_stop") and stopped is None:
                                stopped = str(trajectory.metadata["run_stop"])
                            if on_progress is not None:
                                on_progress(trajectory)
                        if received:
                            raise Interrupted(received[0])
                except BaseException as exc:
                    # A stop signal, a full disk or a crash: episodes in flight are interrupted and come back
                    # aborted (partial turns kept, not final, recordings removed); queued ones never start.
                    failure = exc
                    stop.set()
                    shutdown_sandboxes(wait_s=0)  # also refuses sandboxes the engine is still creating
                    active.interrupt_all()
                    for fut in futures:
                        try:
                            trajectory = fut.result()
                        except BaseException as late:  # a second fault while stopping
                            failure = failure if _disk_full(failure) or not _disk_full(late) else late
                            continue
                        if not _disk_full(failure):
                            try:
                                publish(trajectory)
                            except OSError as late:
                                failure = late if _disk_full(late) else failure
        except BaseException as exc:
            failure = failure or exc
        finally:
            for w in writers:
                try:
                    w.close()
                except (
                    OSError,
                    ShardError,
                ) as exc:  # its unfinished part is removed: nothing torn is published
                    if failure is None or not _disk_full(exc):
                        failure = failure or exc
            if failure is not None:
                remove_all_live()
                reopen_sandboxes()
                try:
                    remove_orphan_casts(config.out)
                except OSError:
                    pass
            usage = llm_client.usage if llm_client is not None else None
            if llm_client is not None:
                llm_client.close()
    if failure is not None:
        if _disk_full(failure):
            needed = _space_needed(config.out, written, len(pending) - final_written)
            raise DiskFull(_failed_path(failure, config.out), needed) from None
        raise failure
    return CollectSummary(
        total_tasks=len(tasks),
        skipped=len(tasks) - len(pending),
        written=written,
        by_status=by_status,
        seconds=time.monotonic() - started,
        out=config.out,
        redactions=redactions,
        llm_usage=usage,
        stopped=stopped,
        not_started=len(queue),
    )


class _ActiveEnvironments:
    """The environments of episodes in flight, so a stopping run can interrupt them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: set[Environment] = set()

    def add(self, env: Environment) -> None:
        with self._lock:
            self._items.add(env)

    def discard(self, env: Environment) -> None:
        with self._lock:
            self._items.discard(env)

    def interrupt_all(self) -> None:
        with self._lock:
            items = list(self._items)
        for env in items:
            try:
                env.interrupt()
            except Exception:  # stopping goes on for the others
                pass


@contextmanager
def _stop_signals() -> Iterator[list[int]]:
    """SIGINT, SIGTERM and SIGHUP only note the signal (the first one); the collection loop stops at its
    next poll, so a signal never lands in the middle of a shard write. Outside the main thread (a
    library caller's worker) the process's handlers stay as they are."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def note(signum: int, frame: FrameType | None) -> None:
        if not received:
            received.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in _STOP_SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _budget_spent(llm_client: Any) -> str | None:
    """Why no further episode can get an LLM call (the call or token budget is spent), else None."""
    ledger = getattr(getattr(llm_client, "client", None), "ledger", None)
    if ledger is None:
        return None
    if ledger.calls_remaining == 0:
        return f"the LLM call budget is spent (max_calls={ledger.max_calls})"
    if ledger.tokens_remaining == 0:
        return f"the LLM token budget is spent (max_total_tokens={ledger.max_total_tokens})"
    return None


def _disk_full(exc: BaseException | None) -> bool:
    """Whether EXC (or an error it was raised from) says the disk is full."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, DiskFull):
            return True
        # By errno only: an environment's own failure (an OSError with a message, such as a GUI app that
        # reports a full disk inside its sandbox) is the task's outcome, not the host's disk.
        if isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _failed_path(exc: BaseException, out: Path) -> Path:
    if isinstance(exc, DiskFull):
        return exc.path
    name = getattr(exc, "filename", None)
    return Path(name) if isinstance(name, str) and name else out


def _space_needed(out: Path, written: int, remaining: int) -> int:
    """About how much the rest of the run needs: what OUT holds per trajectory so far, times the
    episodes left (at least 1 MiB)."""
    used = 0
    for path in out.rglob("*") if out.is_dir() else []:
        try:
            used += path.stat().st_size if path.is_file() else 0
        except OSError:
            continue
    return max(1 << 20, used // max(1, written) * max(1, remaining))


def _free_bytes(path: Path) -> int:
    for folder in (path, *path.parents):
        try:
            return shutil.disk_usage(folder).free
        except OSError:
            continue
    return 0


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def run_episode(
    config: CollectConfig,
    client: Any,
    task: Task,
    policy: Policy,
    attempt: int,
    stop: threading.Event,
    run_label: str,
    rollout: int = 0,
    active: _ActiveEnvironments | None = None,
) -> Trajectory:
    """One task end to end in its own sandbox; every outcome of the task becomes a trajectory. Only a
    fault of the run itself raises: DiskFull when the output's disk is full."""
    source_name = config.source_name or f"worldline-collect/{config.env}"
    parts = [source_name, str(config.tasks_path.name), task.id]
    parts += [f"rollout-{rollout}"] if rollout else []
    # The id of the task's final trajectory, whichever attempt gets there; an attempt that is not final
    # (aborted, infrastructure down) is kept apart in OUT/attempts under an id of its own.
    trajectory_id = stable_id(*parts)
    cast_rel = f"{CASTS_DIR}/{trajectory_id}.cast"
    env_cls = environment_class(config.env)
    deadline_s = task.deadline_s or config.episode_deadline_s
    limits = config.limits
    if deadline_s and limits.ttl_s < deadline_s + 600:
        limits = limits.with_overrides({"ttl_s": deadline_s + 600})  # the sandbox outlives its episode
    env = env_cls(
        EnvironmentOptions(client=client, limits=limits, cast_path=config.out / cast_rel, run_label=run_label)
    )
    if active is not None:
        active.add(env)
    turns: list[Turn] = []
    status, reason = TrajectoryStatus.COMPLETE, None
    metadata: dict[str, Any] = {"task_id": task.id, "attempt": attempt, "tasks_file": str(config.tasks_path)}
    if config.rollouts > 1:
        metadata["rollout"] = rollout
    metadata.update({f"task.{k}": v for k, v in task.metadata.items()})
    initial_state: str | None = None
    simulation_instruction = task.simulation_instruction
    # What is known before the environment runs; replaced by what reset() reports (an MCP server's
    # tools/list), so a trajectory whose environment failed to start still records its declared space.
    action_space = env_cls.declared_action_space(task) or ActionSpace()
    deadline_hit = threading.Event()
    disk_error: BaseException | None = None

    def on_deadline() -> None:
        deadline_hit.set()
        try:
            env.interrupt()
        except Exception:  # a failing interrupt must not end the timer thread with a traceback
            pass

    watchdog = threading.Timer(deadline_s, on_deadline) if deadline_s and deadline_s > 0 else None
    if watchdog is not None:
        watchdog.daemon = True
        watchdog.start()
    try:
        reset = env.reset(task)
        action_space = reset.action_space
        initial_state = reset.initial_state
        simulation_instruction = reset.simulation_instruction or simulation_instruction
        metadata["initial_observation"] = reset.observation.text
        metadata.update(reset.info)
        policy.begin(task, action_space, reset.observation, env.domain.value)
        observation: Observation | None = None
        max_turns = task.max_turns or config.max_turns
        while True:
            if deadline_hit.is_set():
                break
            if stop.is_set():
                status, reason = TrajectoryStatus.ABORTED, "the collection was interrupted"
                break
            if len(turns) >= max_turns:
                status, reason = TrajectoryStatus.TRUNCATED, f"max_turns reached ({max_turns})"
                break
            decision = policy.next_action(observation)
            if decision.action is None:
                metadata["stop_reason"] = decision.note
                if decision.note == "max_turns":
                    status, reason = TrajectoryStatus.TRUNCATED, f"max_turns reached ({max_turns})"
                break
            started_at, t0 = utc_now(), time.monotonic()
            result = env.step(decision.action)
            turns.append(
                Turn(
                    action=result.action,
                    observation=result.observation,
                    started_at=started_at,
                    duration_s=round(time.monotonic() - t0, 6),
                    exit_code=result.exit_code,
                    state_changed=result.state_changed,
                    metadata={**result.info, "policy": decision.info} if decision.info else result.info,
                )
            )
            observation = result.observation
            if result.env_failure:
                status, reason = TrajectoryStatus.ENV_FAILURE, result.env_failure
                if result.info.get(INFO_INFRA_FAILURE):
                    metadata["retryable"] = True
                break
            if result.info.get(INFO_SYNC_LOST):
                status = TrajectoryStatus.ENV_FAILURE
                reason = f"terminal synchronisation lost: {result.info[INFO_SYNC_LOST]}"
                break
            end = result.info.get(INFO_EPISODE_END)
            if isinstance(end, dict):
                status = TrajectoryStatus(str(end.get("status", "env_failure")))
                if status == TrajectoryStatus.COMPLETE:
                    metadata["stop_reason"] = str(end.get("reason", ""))
                else:
                    reason = str(end.get("reason", "the environment ended the episode"))
                break
    except PolicyError as exc:
        status, reason = TrajectoryStatus.POLICY_ERROR, str(exc)
        if exc.retryable:
            metadata["retryable"] = True
        if exc.stops_run:
            metadata["run_stop"] = str(exc)
    except InfrastructureUnavailable as exc:
        status, reason = TrajectoryStatus.ENV_FAILURE, str(exc)
        metadata["retryable"] = True
    except _INFRA_ERRORS as exc:
        status, reason = TrajectoryStatus.ENV_FAILURE, f"container engine failure: {exc}"
        metadata["retryable"] = True
    except (SandboxError, docker.errors.DockerException, ValueError, OSError) as exc:
        if _disk_full(exc):
            disk_error = exc
        status, reason = TrajectoryStatus.ENV_FAILURE, f"{type(exc).__name__}: {exc}"
    finally:
        if watchdog is not None:
            watchdog.cancel()
        try:
            env.close()
        except OSError as exc:  # publishing the recording failed
            if not _disk_full(exc):
                raise
            disk_error = exc
        if active is not None:
            active.discard(env)
    if disk_error is not None:
        # The host's disk, not the sandbox's (a task filling its /work sees ENOSPC as output): the run stops.
        for path in env.casts:
            path.unlink(missing_ok=True)
        raise DiskFull(_failed_path(disk_error, config.out), 1 << 20) from disk_error
    usage = getattr(policy, "usage", None)
    if usage:
        metadata["llm_usage"] = dict(usage)
    persona = getattr(policy, "persona_record", None)
    if persona:
        metadata["persona"] = persona
    if status == TrajectoryStatus.COMPLETE and not turns:
        # Nothing happened: an agent that answers without acting has not completed the task.
        said = getattr(policy, "final_text", "") or ""
        status = TrajectoryStatus.POLICY_ERROR
        reason = (
            f"the policy ended the episode before any action ({metadata.get('stop_reason') or 'no action'})"
        )
        reason += f"; its answer: {said[:300]!r}" if said else ""
    if stop.is_set() and status in (TrajectoryStatus.ENV_FAILURE, TrajectoryStatus.POLICY_ERROR):
        # The collection job was interrupted while this episode ran: its sandbox may have been removed under
        # it (Ctrl-C, SIGTERM), so the failure says nothing about the task. Not final: resume redoes it.
        status = TrajectoryStatus.ABORTED
        reason = f"the collection was interrupted ({reason})" if reason else "the collection was interrupted"
        metadata.pop("retryable", None)
        metadata.pop("run_stop", None)
    if deadline_hit.is_set():
        status = TrajectoryStatus.ENV_FAILURE
        reason = (
            f"episode deadline of {deadline_s:g} s exceeded (task field deadline_s or --episode-deadline); "
            "the environment was stopped"
        )
        metadata["deadline_exceeded"] = True
    oas = sum(
        1 for t in turns if t.metadata.get("out_of_action_space") or has_fact(t.metadata, OUT_OF_ACTION_SPACE)
    )
    if oas:
        metadata["out_of_action_space_calls"] = oas
    # The recording was redacted when it was published; the trajectory is redacted before it is
    # written, and loses whatever its recording shows was typed without echo. Counts per class only.
    redactions: Counter[str] = Counter()
    typed_secrets: list[str] = []
    for path in env.casts:
        typed, counts = take_redactions(path)
        typed_secrets += typed
        redactions.update(counts)
    final = status != TrajectoryStatus.ABORTED and not metadata.get("retryable")
    if not final:
        # The episode runs again under the same id and recording path; this attempt leaves no recording.
        for path in env.casts:
            path.unlink(missing_ok=True)
        trajectory_id = stable_id(*parts, f"attempt-{attempt}")
    elif any(p.exists() for p in env.casts):
        metadata["asciicast"] = cast_rel
    trajectory = Trajectory(
        id=trajectory_id,
        domain=Domain(config.env),
        source=Source(
            kind=SourceKind.INFRA,
            name=source_name,
            uri=f"{config.tasks_path}#{task.id}",
            collected_at=utc_now(),
            agent=policy.name,
            model=policy.model,
            # Every run of one task is one source group: pools never split a task across CPT/SFT/RL.
            group=f"{source_name}/{task.id}",
        ),
        task=task.instruction,
        action_space=action_space,
        turns=turns,
        initial_state=initial_state,
        simulation_instruction=simulation_instruction,
        status=status,
        status_reason=reason,
        metadata=metadata,
    )
    trajectory = redact_trajectory(
        trajectory, redactions, is_key_name=_is_key_name, typed_secrets=typed_secrets
    )
    if redactions:
        trajectory = replace(
            trajectory, metadata={**trajectory.metadata, "redaction_kinds": dict(redactions)}
        )
    return trajectory


def _is_key_name(keystrokes: str) -> bool:
    """Whether a keystrokes item names a key (`Enter`, `C-c`) rather than spelling text."""
    return keys_to_bytes(keystrokes) != keystrokes.encode("utf-8")
