"""The collection runner: tasks in, trajectories out, in parallel sandboxes, resumable after any crash.

Each finished trajectory (including failures, with their partial turns and a reason) is written through
schemas.shards.ShardWriter, which publishes parts atomically. `--resume` reads what was published and
skips exactly the tasks whose recorded outcome is final; an aborted episode or an engine outage is not
final and runs again. Nothing that was not published counts, so a SIGKILL loses only unpublished work.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker.errors
import requests.exceptions

from collectors import engine
from collectors.environment import EnvironmentOptions, Task, TaskError, environment_class, load_tasks
from collectors.policies import Policy, PolicyError, make_policy
from collectors.sandbox import SandboxError, SandboxLimits, install_signal_cleanup, reap_orphans
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

CASTS_DIR = "casts"
# Engine/transport failures: the environment did not fail, the infrastructure did; retried on resume.
_INFRA_ERRORS: tuple[type[BaseException], ...] = (
    engine.EngineUnavailable,
    requests.exceptions.ConnectionError,
    docker.errors.NotFound,
)


class CollectError(RuntimeError):
    """The run cannot start (bad task file, engine down, missing image, occupied output folder)."""


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


def is_final(trajectory: Trajectory) -> bool:
    """A recorded outcome that resume must not redo: anything but an abort or an infrastructure outage."""
    if trajectory.status == TrajectoryStatus.ABORTED:
        return False
    return not (trajectory.status == TrajectoryStatus.ENV_FAILURE and trajectory.metadata.get("retryable"))


def recorded_outcomes(out: Path) -> tuple[set[str], Counter[str]]:
    """(task ids with a final outcome, attempts so far per task id) from what is published in OUT."""
    final: set[str] = set()
    attempts: Counter[str] = Counter()
    if read_manifest(out) is None:
        return final, attempts
    for trajectory in iter_trajectories(out):
        task_id = str(trajectory.metadata.get("task_id", ""))
        attempts[task_id] += 1
        if is_final(trajectory):
            final.add(task_id)
    return final, attempts


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
    """Run every task of the task file (minus final ones when resuming) and write the trajectories."""
    started = time.monotonic()
    try:
        Domain(config.env)
        environment_class(config.env)
    except (KeyError, ValueError) as exc:
        raise CollectError(str(exc)) from exc
    tasks = load_tasks(config.tasks_path)
    client = preflight(config, tasks)
    if client is not None:
        reap_orphans(client)
    install_signal_cleanup()
    final, attempts = recorded_outcomes(config.out) if config.resume else (set(), Counter())
    pending = [t for t in tasks if t.id not in final]
    if on_start is not None:
        on_start(len(tasks), len(tasks) - len(pending))
    llm_client = None
    if config.policy == "openai":
        from worldline.llm import LLMNotConfigured, SyncLLMClient

        try:
            llm_client = SyncLLMClient(config.llm_config)
        except LLMNotConfigured as exc:
            raise CollectError(f"cannot collect with the openai policy: {exc}") from exc
    stop = threading.Event()
    by_status: Counter[str] = Counter()
    written = 0
    writer = ShardWriter(config.out)
    run_label = f"collect-{int(time.time())}"
    try:
        with ThreadPoolExecutor(max_workers=max(1, config.concurrency), thread_name_prefix="collect") as pool:
            futures: dict[Future[Trajectory], Task] = {}
            queue = list(pending)
            try:
                while queue or futures:
                    while queue and len(futures) < max(1, config.concurrency):
                        task = queue.pop(0)
                        policy = make_policy(config.policy, llm_client=llm_client, max_turns=config.max_turns)
                        fut = pool.submit(
                            run_episode, config, client, task, policy, attempts[task.id] + 1, stop, run_label
                        )
                        futures[fut] = task
                    done, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for fut in done:
                        futures.pop(fut)
                        trajectory = fut.result()
                        writer.write(trajectory)
                        written += 1
                        by_status[trajectory.status.value] += 1
                        if written % max(1, config.flush_every) == 0:
                            writer.flush()
                        if on_progress is not None:
                            on_progress(trajectory)
            except BaseException:
                # Ctrl-C or a crash: in-flight episodes stop at their next step and are recorded as
                # aborted (partial turns kept, not final); queued tasks are simply not started.
                stop.set()
                for fut in futures:
                    try:
                        trajectory = fut.result()
                    except BaseException:
                        continue
                    writer.write(trajectory)
                    written += 1
                    by_status[trajectory.status.value] += 1
                raise
    finally:
        writer.close()
        if llm_client is not None:
            llm_client.close()
    return CollectSummary(
        total_tasks=len(tasks),
        skipped=len(tasks) - len(pending),
        written=written,
        by_status=by_status,
        seconds=time.monotonic() - started,
        out=config.out,
    )


def run_episode(
    config: CollectConfig,
    client: Any,
    task: Task,
    policy: Policy,
    attempt: int,
    stop: threading.Event,
    run_label: str,
) -> Trajectory:
    """One task end to end in its own sandbox; every outcome becomes a trajectory, never an exception."""
    source_name = config.source_name or f"worldline-collect/{config.env}"
    parts = [source_name, str(config.tasks_path.name), task.id] + (
        [f"attempt-{attempt}"] if attempt > 1 else []
    )
    trajectory_id = stable_id(*parts)
    cast_rel = f"{CASTS_DIR}/{trajectory_id}.cast"
    env_cls = environment_class(config.env)
    env = env_cls(
        EnvironmentOptions(
            client=client, limits=config.limits, cast_path=config.out / cast_rel, run_label=run_label
        )
    )
    turns: list[Turn] = []
    status, reason = TrajectoryStatus.COMPLETE, None
    metadata: dict[str, Any] = {"task_id": task.id, "attempt": attempt, "tasks_file": str(config.tasks_path)}
    metadata.update({f"task.{k}": v for k, v in task.metadata.items()})
    initial_state: str | None = None
    simulation_instruction = task.simulation_instruction
    # What is known before the environment runs; replaced by what reset() reports (an MCP server's
    # tools/list), so a trajectory whose environment failed to start still records its declared space.
    action_space = env_cls.declared_action_space(task) or ActionSpace()
    try:
        reset = env.reset(task)
        action_space = reset.action_space
        initial_state = reset.initial_state
        simulation_instruction = reset.simulation_instruction or simulation_instruction
        metadata["initial_observation"] = reset.observation.text
        metadata.update(reset.info)
        policy.begin(task, action_space, reset.observation)
        observation: Observation | None = None
        max_turns = task.max_turns or config.max_turns
        while True:
            if stop.is_set():
                status, reason = TrajectoryStatus.ABORTED, "the runner was interrupted"
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
                    metadata=result.info,
                )
            )
            observation = result.observation
    except PolicyError as exc:
        status, reason = TrajectoryStatus.POLICY_ERROR, str(exc)
    except _INFRA_ERRORS as exc:
        status, reason = TrajectoryStatus.ENV_FAILURE, f"container engine failure: {exc}"
        metadata["retryable"] = True
    except (SandboxError, docker.errors.DockerException, ValueError, OSError) as exc:
        status, reason = TrajectoryStatus.ENV_FAILURE, f"{type(exc).__name__}: {exc}"
    finally:
        env.close()
    oas = sum(1 for t in turns if t.metadata.get("out_of_action_space"))
    if oas:
        metadata["out_of_action_space_calls"] = oas
    if any(p.exists() for p in env.casts):
        metadata["asciicast"] = cast_rel
    return Trajectory(
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
