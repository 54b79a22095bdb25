"""Harbor job folders: `jobs/<job>/<trial>/` as `harbor run` writes them (`harbor.trial.Trial`).

A trial folder holds `result.json` (the `TrialResult`: `task_name`, `trial_name`, `source` (the
dataset), `agent_info`, `verifier_result.rewards`, `exception_info`, timings), `config.json`, and the
agent's ATIF trajectory at `agent/trajectory.json` (harbor names further ATIF files of the trial
`agent/trajectory.<part>.json`: continuations and sub-agents it keeps apart). Those trajectories are
the records, read by the ATIF parser (`curation_agents.formats.atif`) and given the trial's
provenance; every other file of the trial (the asciinema cast, the agent's own logs, the verifier's
output) and the job's own `config.json`, `result.json` and `job.log` are read with them, never as
records of their own. A trial that left no trajectory (it failed before the agent wrote one) is one
record too, quarantined with the trial's exception.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from curation_agents.formats import Format, atif
from curation_agents.formats.common import as_dict, as_str, decode_json, read_limited
from curation_agents.model import ParsedRecord, StageFailure
from schemas.reasons import ReasonCode

RESULT = "result.json"
TRAJECTORY = re.compile(r"trajectory(\.[^/]+)?\.json")
JOB_FILES = frozenset({"config.json", RESULT, "job.log"})
_TRIAL_KEYS = frozenset({"task_name", "trial_name"})
_RESULT_LIMIT = 8 << 20
_TRIAL_DEPTH = 4  # the deepest a trial's own file sits below it (agent/episode-0/debug.json: 3)
TIMEOUTS = frozenset({"AgentTimeoutError"})
"""Harbor exceptions that cut the agent's run short (the trajectory is truncated, not failed)."""


@lru_cache(maxsize=4096)
def trial_result(folder: str) -> dict[str, Any] | None:
    """The `result.json` of a trial folder, or None when FOLDER is not a harbor trial."""
    path = Path(folder) / RESULT
    try:
        if not path.is_file() or path.stat().st_size > _RESULT_LIMIT:
            return None
        result = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if isinstance(result, dict) and _TRIAL_KEYS <= result.keys() and "agent_info" in result:
        return result
    return None


@lru_cache(maxsize=1024)
def _is_job(folder: str) -> bool:
    """Whether FOLDER is a harbor job (its `config.json` names the job)."""
    try:
        config = json.loads((Path(folder) / "config.json").read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(config, dict) and "job_name" in config and "jobs_dir" in config


def _trial_of(path: Path) -> Path | None:
    """The trial folder PATH belongs to, if any."""
    for folder in list(path.parents)[:_TRIAL_DEPTH]:
        if trial_result(str(folder)) is not None:
            return folder
    return None


def is_record(path: Path) -> bool:
    """An ATIF file in a trial's `agent/`, or the `result.json` of a trial that has none."""
    if path.parent.name == "agent" and TRAJECTORY.fullmatch(path.name):
        return trial_result(str(path.parent.parent)) is not None
    if path.name == RESULT and trial_result(str(path.parent)) is not None:
        return not any(TRAJECTORY.fullmatch(p.name) for p in _agent_files(path.parent))
    return False


def _agent_files(trial: Path) -> list[Path]:
    agent = trial / "agent"
    return sorted(agent.iterdir()) if agent.is_dir() else []


def is_companion(path: Path) -> bool:
    """Any other file of a trial or of its job: read with the trajectories, no record of its own."""
    if _trial_of(path) is not None:
        return True
    return path.name in JOB_FILES and _is_job(str(path.parent))


def provenance(trial: Path) -> dict[str, Any]:
    """What the trial's `result.json` (and the job's `config.json`) say about the run."""
    result = trial_result(str(trial)) or {}
    info = as_dict(result.get("agent_info"))
    model_info = as_dict(info.get("model_info"))
    provider, name = as_str(model_info.get("provider")), as_str(model_info.get("name"))
    exception = as_dict(result.get("exception_info"))
    rewards = as_dict(as_dict(result.get("verifier_result")).get("rewards"))
    return {
        "benchmark": _dataset(trial, as_str(result.get("source"))),
        "task_id": as_str(result.get("task_name")),
        "trial_name": as_str(result.get("trial_name")),
        "harbor_job": trial.parent.name if _is_job(str(trial.parent)) else None,
        "harbor_agent": as_str(info.get("name")),
        "harbor_agent_version": as_str(info.get("version")),
        "model": f"{provider}/{name}" if provider and name else name,
        "reward": rewards.get("reward") if isinstance(rewards.get("reward"), int | float) else None,
        "rewards": rewards or None,
        "exception_type": as_str(exception.get("exception_type")),
        "exception_message": as_str(exception.get("exception_message")),
        "started_at": as_str(result.get("started_at")),
        "finished_at": as_str(result.get("finished_at")),
    }


def _dataset(trial: Path, source: str | None) -> str | None:
    """The trial's dataset, with the registry version the job ran (`terminal-bench@2.0`) when known."""
    if source is None:
        return None
    try:
        config = json.loads((trial.parent / "config.json").read_bytes())
    except (OSError, ValueError, RecursionError):
        return source
    for dataset in as_dict(config).get("datasets") or []:
        dataset = as_dict(dataset)
        if dataset.get("name") == source and as_str(dataset.get("version")):
            return f"{source}@{dataset['version']}"
    return source


def iter_payloads(path: str, limit: int) -> Iterator[tuple[str, Any]]:
    """(locator, payload) for a trial record: the trajectory and each sub-agent embedded in it, or
    the trial alone when it left no trajectory."""
    file = Path(path)
    if file.name == RESULT:
        yield "file", {"harbor_trial": provenance(file.parent), "trajectory": None}
        return
    doc = decode_json(read_limited(path, limit), file.name)
    if not isinstance(doc, dict) or not atif.looks_like(doc):
        raise StageFailure(ReasonCode.PARSE_ERROR, f"{file.name}: not an ATIF trajectory")
    trial = provenance(file.parent.parent)
    for locator, payload in atif.split(doc, "file"):
        yield locator, {"harbor_trial": trial, "trajectory": payload}


def parse(payload: dict[str, Any]) -> ParsedRecord:
    """One trial trajectory as a parsed ATIF record with the trial's provenance."""
    trial = as_dict(payload.get("harbor_trial"))
    doc = payload.get("trajectory")
    if doc is None:
        cause = f"{trial.get('exception_type')}: {trial.get('exception_message')}"
        raise StageFailure(
            ReasonCode.NO_TURNS,
            f"trial {trial.get('trial_name')} left no agent/trajectory.json"
            + (f" ({cause})" if trial.get("exception_type") else ""),
        )
    parsed = atif.parse(as_dict(doc))
    parsed["format"] = Format.HARBOR
    parsed["model"] = parsed.get("model") or trial.get("model")
    parsed["agent"] = parsed.get("agent") or trial.get("harbor_agent")
    parsed["collected_at"] = parsed.get("collected_at") or trial.get("finished_at")
    if trial.get("exception_type") in TIMEOUTS:
        parsed["status"], parsed["status_reason"] = "truncated", str(trial.get("exception_message"))[:500]
    meta = {k: v for k, v in trial.items() if k not in ("model", "harbor_agent")}
    parsed["metadata"] = {**parsed.get("metadata", {}), **meta}
    return parsed
