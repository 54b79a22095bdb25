"""Scheduled runs: collect -> clean -> `pools build --incremental` -> verify -> report, on new shards only.

A schedule file (YAML) names the data folder, the pools folder and what to collect and clean:

    data: /srv/worldline                  # collected/, cleaned/, increments/ and state live here
    pools_out: /srv/worldline/pools
    pools_config: pipelines/configs/demo.yaml
    eval: [worldline/samples]            # decontamination sets of the first (full) build
    collect:
      - {name: terminal, env: terminal, tasks: tasks/terminal.jsonl, policy: scripted, concurrency: 4}
    clean:
      - {name: public, inputs: [/srv/incoming/*.jsonl], source_kind: public, source_name: team-logs, licence: MIT}

Each step is one call (`run_step`), so an orchestrator (Airflow, systemd, cron, Dataflow's scheduler)
can run them as separate tasks; `run_cycle` runs all of them under a lock. Collection and cleaning
resume in their own folders, so a cycle only adds what is new. The manifests tell which parts are new:
the `increment` step links the parts no earlier cycle used into DATA/increments/CYCLE/NAME (a dataset of
its own), and the build adds those folders with `--incremental`, so earlier inputs never change under
it. A cycle with nothing new skips the build, the verification and the report, and says so.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from schemas.atomic import atomic_write_json
from schemas.shards import MANIFEST_NAME, Manifest, read_manifest

STEPS = ("collect", "clean", "increment", "build", "verify", "report")
STATE = "schedule-state.json"
LOCK = "schedule.lock"


class ScheduleError(ValueError):
    """The schedule file is wrong, or a step failed; the message names the field or the command."""


@dataclass(frozen=True)
class CollectSource:
    name: str
    env: str
    tasks: str
    policy: str = "scripted"
    concurrency: int = 2
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class CleanSource:
    name: str
    inputs: tuple[str, ...]
    source_kind: str = "public"
    source_name: str | None = None
    licence: str | None = None
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Schedule:
    data: Path
    pools_out: Path
    pools_config: Path
    evals: tuple[str, ...] = ()
    collect: tuple[CollectSource, ...] = ()
    clean: tuple[CleanSource, ...] = ()
    worldline: tuple[str, ...] = field(default_factory=lambda: (sys.executable, "-m", "worldline"))

    @property
    def state_path(self) -> Path:
        return self.data / STATE

    def datasets(self) -> dict[str, Path]:
        """Every dataset the schedule feeds, by a stable name (collected/NAME, cleaned/NAME)."""
        out = {f"collected/{c.name}": self.data / "collected" / c.name for c in self.collect}
        out.update({f"cleaned/{c.name}": self.data / "cleaned" / c.name for c in self.clean})
        return out


def _require(obj: dict[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise ScheduleError(f"{where}: missing field {key!r}")
    return obj[key]


def load_schedule(path: str | Path) -> Schedule:
    """Read and check a schedule file; relative paths are relative to the file's folder."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ScheduleError(f"{path}: cannot read the schedule ({exc})") from exc
    if not isinstance(raw, dict):
        raise ScheduleError(
            f"{path}: a schedule is a mapping with data, pools_out, pools_config, collect, clean"
        )
    unknown = set(raw) - {"data", "pools_out", "pools_config", "eval", "collect", "clean"}
    if unknown:
        raise ScheduleError(f"{path}: unknown field(s) {', '.join(sorted(unknown))}")
    base = path.parent

    def p(value: str) -> Path:
        return (base / os.path.expanduser(value)).resolve()

    collect = []
    for i, item in enumerate(raw.get("collect") or []):
        where = f"{path}: collect[{i}]"
        if not isinstance(item, dict):
            raise ScheduleError(f"{where}: expected a mapping with name, env, tasks")
        collect.append(
            CollectSource(
                name=str(_require(item, "name", where)),
                env=str(_require(item, "env", where)),
                tasks=str(p(str(_require(item, "tasks", where)))),
                policy=str(item.get("policy", "scripted")),
                concurrency=int(item.get("concurrency", 2)),
                extra_args=tuple(str(a) for a in item.get("args", [])),
            )
        )
    clean = []
    for i, item in enumerate(raw.get("clean") or []):
        where = f"{path}: clean[{i}]"
        if not isinstance(item, dict):
            raise ScheduleError(f"{where}: expected a mapping with name and inputs")
        inputs = _require(item, "inputs", where)
        if isinstance(inputs, str):
            inputs = [inputs]
        clean.append(
            CleanSource(
                name=str(_require(item, "name", where)),
                inputs=tuple(str(p(str(x))) for x in inputs),
                source_kind=str(item.get("source_kind", "public")),
                source_name=item.get("source_name"),
                licence=item.get("licence"),
                extra_args=tuple(str(a) for a in item.get("args", [])),
            )
        )
    names = [f"collected/{c.name}" for c in collect] + [f"cleaned/{c.name}" for c in clean]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ScheduleError(f"{path}: source names must be unique; repeated: {', '.join(duplicated)}")
    if not names:
        raise ScheduleError(f"{path}: nothing to do; add a `collect` or a `clean` source")
    return Schedule(
        data=p(str(_require(raw, "data", str(path)))),
        pools_out=p(str(_require(raw, "pools_out", str(path)))),
        pools_config=p(str(_require(raw, "pools_config", str(path)))),
        evals=tuple(str(p(str(e))) for e in raw.get("eval") or []),
        collect=tuple(collect),
        clean=tuple(clean),
    )


# --- state --------------------------------------------------------------------------------------------


def read_state(schedule: Schedule) -> dict[str, Any]:
    if not schedule.state_path.is_file():
        return {"cycles": 0, "used_parts": {}, "pending": [], "built": []}
    state: dict[str, Any] = json.loads(schedule.state_path.read_text("utf-8"))
    return state


def write_state(schedule: Schedule, state: dict[str, Any]) -> None:
    schedule.data.mkdir(parents=True, exist_ok=True)
    atomic_write_json(schedule.state_path, state)


@contextmanager
def cycle_lock(schedule: Schedule) -> Iterator[None]:
    """One cycle at a time: a second scheduler firing while one runs is refused, not queued."""
    schedule.data.mkdir(parents=True, exist_ok=True)
    with open(schedule.data / LOCK, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ScheduleError(
                f"{schedule.data}: another cycle is running (lock {schedule.data / LOCK})"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --- steps --------------------------------------------------------------------------------------------


def _run(schedule: Schedule, args: list[str], log: Callable[[str], None]) -> None:
    cmd = [*schedule.worldline, *args]
    log("$ worldline " + " ".join(args))
    done = subprocess.run(cmd, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in done.stdout.splitlines()[-20:]:
        log("  " + line)
    if done.returncode != 0:
        raise ScheduleError(f"`worldline {' '.join(args[:2])}` failed with exit code {done.returncode}")


def step_collect(schedule: Schedule, log: Callable[[str], None]) -> None:
    for src in schedule.collect:
        out = schedule.data / "collected" / src.name
        args = ["collect", "--env", src.env, "--tasks", src.tasks, "--policy", src.policy]
        args += ["--out", str(out), "--concurrency", str(src.concurrency), *src.extra_args]
        if (out / MANIFEST_NAME).is_file():
            args.append("--resume")
        _run(schedule, args, log)


def step_clean(schedule: Schedule, log: Callable[[str], None]) -> None:
    for src in schedule.clean:
        files = sorted({f for pattern in src.inputs for f in glob.glob(pattern)})
        if not files:
            log(f"clean {src.name}: no input matches {', '.join(src.inputs)} yet")
            continue
        args = [
            "clean",
            *files,
            "--out",
            str(schedule.data / "cleaned" / src.name),
            "--source-kind",
            src.source_kind,
        ]
        if src.source_name:
            args += ["--source-name", src.source_name]
        if src.licence:
            args += ["--licence", src.licence]
        _run(schedule, [*args, *src.extra_args], log)


def step_increment(schedule: Schedule, log: Callable[[str], None]) -> None:
    """Link the parts no earlier cycle used into a new increment dataset per source."""
    state = read_state(schedule)
    cycle = f"cycle-{state['cycles'] + 1:05d}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    used: dict[str, list[str]] = state["used_parts"]
    pending: list[str] = list(state["pending"])
    for name, folder in schedule.datasets().items():
        manifest = read_manifest(folder)
        if manifest is None:
            continue
        seen = set(used.get(name, []))
        new = [f for f in manifest.files if f.sha256 not in seen]
        if not new:
            continue
        target = schedule.data / "increments" / cycle / name.replace("/", "-")
        (target / "trajectories").mkdir(parents=True, exist_ok=True)
        files = []
        for i, f in enumerate(new):
            rel = f"trajectories/part-{i:05d}.parquet"
            dest = target / rel
            if not dest.exists():
                try:
                    os.link(folder / f.path, dest)
                except OSError:
                    dest.write_bytes((folder / f.path).read_bytes())
            files.append(type(f)(path=rel, rows=f.rows, bytes=f.bytes, sha256=f.sha256))
        atomic_write_json(target / MANIFEST_NAME, Manifest(manifest.schema_version, files).to_json())
        used[name] = [*seen, *(f.sha256 for f in new)]
        pending.append(str(target))
        log(f"increment {name}: {len(new)} new part(s), {sum(f.rows for f in new)} trajectories -> {target}")
    state.update(cycles=state["cycles"] + 1, used_parts=used, pending=pending)
    write_state(schedule, state)
    if not pending:
        log("increment: nothing new since the last build")


def step_build(schedule: Schedule, log: Callable[[str], None]) -> None:
    state = read_state(schedule)
    pending = [p for p in state["pending"] if (Path(p) / MANIFEST_NAME).is_file()]
    if not pending:
        log("build: nothing new; the pools stay as they are")
        return
    args = ["pools", "build", "--config", str(schedule.pools_config), "--out", str(schedule.pools_out)]
    for p in pending:
        args += ["--in", p]
    if (schedule.pools_out / MANIFEST_NAME).is_file():
        args.append("--incremental")
    else:
        for e in schedule.evals:
            args += ["--eval", e]
    _run(schedule, args, log)
    state["built"] = [*state["built"], *pending]
    state["pending"] = []
    state["last_build"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_state(schedule, state)


def _built_since_report(schedule: Schedule) -> bool:
    state = read_state(schedule)
    return bool(state.get("last_build")) and state.get("last_build") != state.get("last_report")


def step_verify(schedule: Schedule, log: Callable[[str], None]) -> None:
    if not _built_since_report(schedule):
        log("verify: no new build")
        return
    _run(schedule, ["pools", "verify", str(schedule.pools_out)], log)


def step_report(schedule: Schedule, log: Callable[[str], None]) -> None:
    if not _built_since_report(schedule):
        log("report: no new build")
        return
    _run(schedule, ["report", str(schedule.pools_out)], log)
    state = read_state(schedule)
    state["last_report"] = state.get("last_build")
    write_state(schedule, state)


STEP_FUNCTIONS: dict[str, Callable[[Schedule, Callable[[str], None]], None]] = {
    "collect": step_collect,
    "clean": step_clean,
    "increment": step_increment,
    "build": step_build,
    "verify": step_verify,
    "report": step_report,
}


def run_step(schedule_path: str | Path, step: str, log: Callable[[str], None] = print) -> None:
    """Run one step of a schedule (what an orchestrator's task calls)."""
    if step not in STEP_FUNCTIONS:
        raise ScheduleError(f"unknown step {step!r}; the steps are {', '.join(STEPS)}")
    schedule = load_schedule(schedule_path)
    with cycle_lock(schedule):
        STEP_FUNCTIONS[step](schedule, log)


def run_cycle(schedule_path: str | Path, log: Callable[[str], None] = print) -> None:
    """Run every step in order under one lock (what a timer or cron job calls)."""
    schedule = load_schedule(schedule_path)
    with cycle_lock(schedule):
        for step in STEPS:
            STEP_FUNCTIONS[step](schedule, log)
