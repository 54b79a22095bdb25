"""The replay job: run a trajectory's recorded actions again from the same initial state, and label
which parts of each observation the environment reproduces.

For each trajectory of a replayable domain, the task it was collected from (named in its metadata:
`tasks_file` and `task_id`) rebuilds the initial state in a fresh sandbox, exactly as collection
does (the same `run_episode`, the same environment class); the recorded actions are then sent in
order, `times` times, each in a sandbox of its own. What the collector controls is as at collection
time: the actions are the recorded ones (no policy samples again), the task's files, setup and
domain configuration (the search seed, the MCP seed state) are the task's own. What still differs
is the environment's own variability, which `schemas.span_labels` labels per character.

Output, beside nothing it rewrites:

    OUT/span_labels.parquet        the attribute table, keyed by (trajectory id, turn)
    OUT/replays/run-K/             the replayed trajectories of run K (a trajectory dataset)
    OUT/manifest.json              kind worldline.replay: files, settings, per-domain figures
"""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from collectors.collection import CollectConfig, run_episode
from collectors.environment import Task, TaskError, load_tasks
from collectors.policy_base import Decision, Policy
from schemas import Action, ActionSpace, Observation
from schemas.atomic import atomic_write_json
from schemas.domains import domain_spec, is_registered
from schemas.shards import iter_trajectories, sha256_file, write_trajectories
from schemas.span_labels import (
    SPAN_LABELS_NAME,
    SpanLabel,
    TurnLabels,
    label_observation,
    write_span_labels,
)
from schemas.trajectory import Trajectory, TrajectoryStatus, Turn

MANIFEST_KIND = "worldline.replay"


class RecordedActionsPolicy(Policy):
    """Sends a trajectory's recorded actions in order, then stops: the replay's policy."""

    name = "replay"

    def __init__(self, actions: Iterable[Action]) -> None:
        self._actions = list(actions)
        self._next = 0

    def begin(
        self, task: Task, action_space: ActionSpace, first_observation: Observation, domain: str | None = None
    ) -> None:
        self._next = 0

    def next_action(self, observation: Observation | None) -> Decision:
        if self._next >= len(self._actions):
            return Decision(None, "recorded actions finished")
        action = self._actions[self._next]
        self._next += 1
        return Decision(action)


@dataclass
class ReplayConfig:
    """One `worldline replay` run."""

    source: Path
    out: Path
    times: int = 2
    tasks_path: Path | None = None  # overrides the tasks file recorded in each trajectory's metadata
    concurrency: int = 1  # trajectories replayed at once, each in sandboxes of its own
    episode_deadline_s: float = 600.0


@dataclass
class DomainFigures:
    """Per domain: what replayed, how much of it identically, and why the rest diverged."""

    trajectories: int = 0
    replayed: int = 0
    turns: int = 0
    identical_turns: int = 0
    characters: int = 0
    deterministic_characters: int = 0
    diverged_trajectories: int = 0
    causes: Counter[str] = field(default_factory=Counter)
    not_replayable: Counter[str] = field(default_factory=Counter)

    @property
    def identical_share(self) -> float:
        return self.identical_turns / self.turns if self.turns else 0.0

    @property
    def deterministic_share(self) -> float:
        return self.deterministic_characters / self.characters if self.characters else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "trajectories": self.trajectories,
            "replayed": self.replayed,
            "turns": self.turns,
            "identical_turns": self.identical_turns,
            "identical_share": round(self.identical_share, 6),
            "characters": self.characters,
            "deterministic_characters": self.deterministic_characters,
            "deterministic_share": round(self.deterministic_share, 6),
            "diverged_trajectories": self.diverged_trajectories,
            "divergence_causes": dict(self.causes),
            "not_replayable": dict(self.not_replayable),
        }


@dataclass
class TrajectoryReplay:
    """One trajectory's replays and labels; `first_divergent_turn` is None when none diverged."""

    trajectory: Trajectory
    replays: list[Trajectory]
    labels: list[TurnLabels]
    first_divergent_turn: int | None
    not_replayable: str | None = None


@dataclass
class ReplaySummary:
    out: Path
    by_domain: dict[str, DomainFigures]
    results: list[TrajectoryReplay]


# --------------------------------------------------------------------------------------------------
# Finding the task
# --------------------------------------------------------------------------------------------------


def recorded_task(trajectory: Trajectory, tasks_path: Path | None = None) -> tuple[Task, Path]:
    """The task a trajectory was collected from and its tasks file; TaskError naming what is missing."""
    task_id = trajectory.metadata.get("task_id")
    path = tasks_path or (
        Path(str(trajectory.metadata["tasks_file"])) if "tasks_file" in trajectory.metadata else None
    )
    if not isinstance(task_id, str) or path is None:
        raise TaskError(
            f"trajectory {trajectory.id}: its metadata names no task (task_id, tasks_file); only trajectories "
            "`worldline collect` wrote can be replayed"
        )
    if not path.is_file():
        raise TaskError(f"trajectory {trajectory.id}: tasks file {path} is missing; give it with --tasks")
    for task in load_tasks(path):
        if task.id == task_id:
            return task, path
    raise TaskError(f"trajectory {trajectory.id}: task {task_id!r} is not in {path}")


def replayability(trajectory: Trajectory) -> str | None:
    """Why a trajectory cannot be replayed, or None when it can."""
    domain = trajectory.domain.value
    refusal = (
        domain_spec(domain).not_replayable if is_registered(domain) else f"the {domain} domain has no replay"
    )
    if refusal:
        return refusal
    if not trajectory.turns:
        return "no turns recorded"
    if (
        trajectory.status in (TrajectoryStatus.ABORTED, TrajectoryStatus.POLICY_ERROR)
        and not trajectory.turns
    ):
        return f"status {trajectory.status.value}"
    return None


# --------------------------------------------------------------------------------------------------
# Running and comparing
# --------------------------------------------------------------------------------------------------


def replay_once(
    trajectory: Trajectory, task: Task, tasks_path: Path, out: Path, run: int, deadline_s: float
) -> Trajectory:
    """Run the recorded actions once in a fresh sandbox, through the collection job's own episode."""
    config = CollectConfig(
        env=trajectory.domain.value,
        tasks_path=tasks_path,
        policy="replay",
        out=out,
        max_turns=len(trajectory.turns),
        source_name=f"worldline-replay/run-{run}",
        episode_deadline_s=deadline_s,
    )
    from collectors import engine

    client = engine.shared_client() if _needs_engine(trajectory.domain.value, task) else None
    task = replace(task, max_turns=len(trajectory.turns))
    policy = RecordedActionsPolicy(t.action for t in trajectory.turns)
    rollout = trajectory.metadata.get("rollout", 0)  # rollouts of one task keep distinct replay ids
    replayed = run_episode(
        config,
        client,
        task,
        policy,
        attempt=run,
        stop=threading.Event(),
        run_label="replay",
        rollout=rollout if isinstance(rollout, int) else 0,
    )
    metadata = {
        **replayed.metadata,
        "replay": {"of": trajectory.id, "run": run, "controlled": controlled_conditions(trajectory, task)},
    }
    return replace(replayed, metadata=metadata)


def _needs_engine(domain: str, task: Task) -> bool:
    from collectors.environment import environment_class

    return environment_class(domain).needs_engine(task)


def controlled_conditions(trajectory: Trajectory, task: Task) -> dict[str, Any]:
    """What the collector fixes, recorded with each replay: the actions, the task's state and seeds."""
    conditions: dict[str, Any] = {
        "actions": "recorded",
        "tasks_file_task": task.id,
        "files": sorted(task.files),
        "setup": list(task.setup),
        "image": task.image,
    }
    for key in ("search_seed", "search_backend", "mcp_server"):
        if key in trajectory.metadata:
            conditions[key] = trajectory.metadata[key]
    if task.config:
        conditions["domain_config"] = task.config
    return conditions


def _prompt(text: str) -> str:
    lines = text.rstrip("\n").splitlines()
    return lines[-1] if lines else ""


def divergence(original: Turn, replayed: Turn | None, replay: Trajectory, terminal: bool) -> str | None:
    """Why a replayed turn diverges structurally from the original, or None when it does not."""
    if replayed is None:
        return f"turn missing in the replay ({replay.status.value}: {replay.status_reason or 'no reason'})"
    if replayed.action.text != original.action.text:
        return "a different action was sent"
    if bool(replayed.observation.is_error) and not original.observation.is_error:
        return "an error appeared"
    if bool(original.observation.is_error) and not replayed.observation.is_error:
        return "an error vanished"
    if replayed.exit_code != original.exit_code:
        return "exit code differs"
    if terminal and _prompt(replayed.observation.text) != _prompt(original.observation.text):
        return "next prompt differs"
    return None


def compare(trajectory: Trajectory, replays: list[Trajectory]) -> tuple[list[TurnLabels], int | None]:
    """Label every turn of `trajectory` against its replays; the first structurally divergent turn."""
    terminal = is_registered(trajectory.domain.value) and domain_spec(trajectory.domain.value).shell
    labels: list[TurnLabels] = []
    first: int | None = None
    for index, turn in enumerate(trajectory.turns):
        replayed = [r.turns[index] if index < len(r.turns) else None for r in replays]
        causes = [divergence(turn, rt, r, terminal) for rt, r in zip(replayed, replays, strict=True)]
        cause = next((c for c in causes if c), None)
        texts = [rt.observation.text if rt is not None else "" for rt in replayed]
        spans = tuple(label_observation(turn.observation.text, texts))
        labels.append(TurnLabels(trajectory.id, index, spans, len(replays), cause is not None, cause))
        if cause is not None and first is None:
            first = index
    return labels, first


def replay_trajectory(trajectory: Trajectory, config: ReplayConfig, staging: Path) -> TrajectoryReplay:
    """Replay one trajectory `config.times` times and label it; a task that cannot be found or a
    domain that cannot replay is reported, never raised."""
    reason = replayability(trajectory)
    if reason is None:
        try:
            task, tasks_path = recorded_task(trajectory, config.tasks_path)
        except TaskError as exc:
            reason = str(exc)
    if reason is not None:
        return TrajectoryReplay(trajectory, [], [], None, not_replayable=reason)
    replays = [
        replay_once(trajectory, task, tasks_path, staging / f"run-{run}", run, config.episode_deadline_s)
        for run in range(1, config.times + 1)
    ]
    labels, first = compare(trajectory, replays)
    return TrajectoryReplay(trajectory, replays, labels, first)


def _add_figures(figures: DomainFigures, result: TrajectoryReplay) -> None:
    figures.trajectories += 1
    if result.not_replayable is not None:
        figures.not_replayable[result.not_replayable.split(";")[0][:120]] += 1
        return
    figures.replayed += 1
    for turn, labels in zip(result.trajectory.turns, result.labels, strict=True):
        figures.turns += 1
        text = turn.observation.text
        same = not labels.diverged and all(s.label == SpanLabel.DETERMINISTIC for s in labels.spans)
        figures.identical_turns += int(same)
        figures.characters += len(text)
        figures.deterministic_characters += sum(
            s.end - s.start for s in labels.spans if s.label == SpanLabel.DETERMINISTIC
        )
        if labels.divergence_cause:
            figures.causes[labels.divergence_cause.split(" (")[0]] += 1
    if result.first_divergent_turn is not None:
        figures.diverged_trajectories += 1


def replay(
    config: ReplayConfig,
    *,
    on_start: Callable[[int], object] | None = None,
    on_progress: Callable[[TrajectoryReplay], object] | None = None,
) -> ReplaySummary:
    """Replay every trajectory of `config.source`; write the label table, the replays and the manifest."""
    if config.times < 1:
        raise ValueError("--times must be at least 1")
    trajectories = list(iter_trajectories(config.source))
    if on_start is not None:
        on_start(len(trajectories))
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    staging = out / ".replay-episodes"
    by_domain: dict[str, DomainFigures] = {}
    results: list[TrajectoryReplay] = []
    rows: list[TurnLabels] = []
    runs: dict[int, list[Trajectory]] = {run: [] for run in range(1, config.times + 1)}
    try:
        with ThreadPoolExecutor(max_workers=max(1, config.concurrency)) as pool:
            futures = [pool.submit(replay_trajectory, t, config, staging) for t in trajectories]
            for future in futures:  # in input order, so the table's rows follow the dataset's
                result = future.result()
                trajectory = result.trajectory
                results.append(result)
                rows.extend(result.labels)
                for run, replayed in enumerate(result.replays, start=1):
                    runs[run].append(replayed)
                _add_figures(by_domain.setdefault(trajectory.domain.value, DomainFigures()), result)
                if on_progress is not None:
                    on_progress(result)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    labels_path = out / SPAN_LABELS_NAME
    write_span_labels(labels_path, rows)
    files = [
        {
            "path": SPAN_LABELS_NAME,
            "rows": len(rows),
            "bytes": labels_path.stat().st_size,
            "sha256": sha256_file(labels_path),
        }
    ]
    for run, run_trajectories in runs.items():
        folder = out / "replays" / f"run-{run}"
        if folder.exists():
            shutil.rmtree(folder)
        if run_trajectories:
            write_trajectories(folder, run_trajectories)
            files.append({"path": f"replays/run-{run}", "rows": len(run_trajectories)})
    divergent = {
        r.trajectory.id: r.first_divergent_turn for r in results if r.first_divergent_turn is not None
    }
    not_replayable = {r.trajectory.id: r.not_replayable for r in results if r.not_replayable is not None}
    atomic_write_json(
        out / "manifest.json",
        {
            "kind": MANIFEST_KIND,
            "source": str(config.source),
            "times": config.times,
            "files": files,
            "first_divergent_turn": divergent,
            "not_replayable": not_replayable,
            "by_domain": {d: f.to_json() for d, f in sorted(by_domain.items())},
        },
    )
    return ReplaySummary(out, by_domain, results)


def replay_report(summary: ReplaySummary) -> list[str]:
    """The per-domain figures as lines for the terminal."""
    lines = []
    for domain, f in sorted(summary.by_domain.items()):
        causes = ", ".join(f"{c}={n}" for c, n in f.causes.most_common()) or "none"
        line = (
            f"{domain}: {f.replayed}/{f.trajectories} replayed, {f.identical_share:.1%} of {f.turns} turns "
            f"identical, {f.deterministic_share:.1%} of {f.characters} characters deterministic, "
            f"{f.diverged_trajectories} diverged (causes: {causes})"
        )
        if f.not_replayable:
            line += "; not replayable: " + json.dumps(dict(f.not_replayable), ensure_ascii=False)
        lines.append(line)
    return lines
