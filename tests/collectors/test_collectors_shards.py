"""Sharded collection (a deterministic partition, per-shard folders merged into one dataset), resume
that publishes one final record per task, and the Kubernetes Indexed Job manifest."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from collectors import engine
from collectors.collection import (
    ATTEMPTS_DIR,
    CollectConfig,
    CollectError,
    collect,
    merge_shards,
    parse_shard,
    shard_of,
)
from collectors.sandbox import LABEL_OWNER_PID
from pipelines.build import resolve_inputs
from pipelines.config import PoolsConfig
from schemas import TrajectoryStatus, iter_trajectories, read_manifest

K8S = Path(__file__).resolve().parents[2] / "infra" / "k8s"


@given(st.lists(st.text(min_size=1, max_size=20), unique=True, max_size=60), st.integers(1, 9), st.randoms())
def test_partition_is_deterministic_and_complete(ids: list[str], count: int, rnd) -> None:  # type: ignore[no-untyped-def]
    shards = [[i for i in ids if shard_of(i, count) == k] for k in range(count)]
    assert sorted(i for shard in shards for i in shard) == sorted(ids)  # each id in exactly one shard
    shuffled = list(ids)
    rnd.shuffle(shuffled)
    assert [[i for i in shuffled if shard_of(i, count) == k] for k in range(count)] == [
        [i for i in shuffled if i in set(s)] for s in shards
    ]


@pytest.mark.parametrize("text", ["3/3", "-1/2", "1", "a/b", "1/0"])
def test_bad_shard_specs_are_refused(text: str) -> None:
    with pytest.raises(CollectError, match="expected K/N"):
        parse_shard(text)


@pytest.mark.engine
def test_shards_merge_into_one_dataset_pools_can_read(tmp_path: Path) -> None:
    ids = [f"task-{i}" for i in range(7)]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"id": i, "instruction": "x", "actions": [f"echo {i}"]}) + "\n" for i in ids)
    )
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(CollectError, match="no shard folders"):
        merge_shards(out)
    for k in range(3):
        collect(CollectConfig(env="terminal", tasks_path=tasks, policy="scripted", out=out, shard=(k, 3)))
        if k == 1:
            with pytest.raises(CollectError, match="shard\\(s\\) 2 of 3"):
                merge_shards(out)
    for k in range(3):
        got = {t.metadata["task_id"] for t in iter_trajectories(out / f"shard-{k}-of-3")}
        assert got == {i for i in ids if shard_of(i, 3) == k}
    merged = merge_shards(out)
    assert merged.rows == len(ids)
    assert Counter(t.metadata["task_id"] for t in iter_trajectories(out)) == Counter(ids)
    inputs = resolve_inputs([str(out)], [], [], PoolsConfig())
    assert inputs.total_rows == len(ids)


@pytest.mark.slow
@pytest.mark.engine
def test_resume_after_ctrl_c_publishes_one_final_record_per_task(tmp_path: Path) -> None:
    ids = [f"r{i}" for i in range(10)]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"id": i, "instruction": "x", "actions": ["sleep 3", f"echo {i}"]}) + "\n" for i in ids
        )
    )
    out = tmp_path / "out"
    argv = [
        "collect",
        "--env",
        "terminal",
        "--tasks",
        str(tasks),
        "--out",
        str(out),
        "-j",
        "8",
        "--no-progress",
    ]
    runner = subprocess.Popen(
        [sys.executable, "-c", "from worldline.cli import main; main()", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = engine.connect()
    deadline = time.monotonic() + 60
    label = f"{LABEL_OWNER_PID}={runner.pid}"
    while not client.containers.list(filters={"label": label}) and time.monotonic() < deadline:
        time.sleep(0.1)
    # Sandboxes exist: the first episodes are starting or in their first step (3 s long). Whichever it
    # is, Ctrl-C makes each of them an aborted attempt, never a final failure.
    time.sleep(0.5)
    os.kill(runner.pid, signal.SIGINT)
    assert runner.wait(timeout=60) == 130
    assert client.containers.list(all=True, filters={"label": label}) == []  # Ctrl-C left no sandbox
    aborted = list(iter_trajectories(out / ATTEMPTS_DIR))
    assert aborted and all(t.status == TrajectoryStatus.ABORTED for t in aborted)
    # Nothing the interrupted run did (a sandbox removed under a starting episode included) is final.
    published = list(iter_trajectories(out)) if read_manifest(out) is not None else []
    assert [(t.status, t.status_reason, len(t.turns)) for t in published] == []
    collect(
        CollectConfig(
            env="terminal", tasks_path=tasks, policy="scripted", out=out, resume=True, concurrency=4
        )
    )
    final = list(iter_trajectories(out))
    assert Counter(t.metadata["task_id"] for t in final) == Counter(ids)  # one final record per task
    assert all(t.status == TrajectoryStatus.COMPLETE for t in final)
    assert {t.id for t in final}.isdisjoint({t.id for t in aborted})  # retries have their own ids
    inputs = resolve_inputs([str(out)], [], [], PoolsConfig())
    assert inputs.total_rows == len(ids)  # pools never see the superseded attempts


def test_indexed_job_manifest_is_valid() -> None:
    doc = yaml.safe_load((K8S / "collect-indexed-job.yaml").read_text())
    schema = json.loads((K8S / "indexed-job.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
    spec = doc["spec"]
    assert spec["completionMode"] == "Indexed"
    pod = spec["template"]["spec"]
    (collector,) = pod["containers"]
    command = " ".join(collector["command"] + collector["args"])
    shard = re.search(r'--shard "\$\{JOB_COMPLETION_INDEX\}/(\d+)"', command)
    assert shard and int(shard.group(1)) == spec["completions"]  # N matches the number of indexes
    assert "--resume" in command
    # The collector reaches the pod's own engine through the socket the sidecar serves.
    (sidecar,) = pod["initContainers"]
    assert sidecar["restartPolicy"] == "Always"
    host = next(e["value"] for e in collector["env"] if e["name"] == "WORLDLINE_DOCKER_HOST")
    socket_dir = os.path.dirname(host.removeprefix("unix://"))
    mounts = {m["name"]: m["mountPath"] for m in collector["volumeMounts"]}
    sidecar_mounts = {m["name"]: m["mountPath"] for m in sidecar["volumeMounts"]}
    shared = [n for n, p in mounts.items() if p == socket_dir]
    assert shared and sidecar_mounts.get(shared[0]) == socket_dir
    assert any(host.removeprefix("unix://") in a for a in sidecar["args"])
    volumes = {v["name"] for v in pod["volumes"]}
    assert set(mounts) | set(sidecar_mounts) <= volumes


def test_schema_check_catches_a_broken_manifest() -> None:
    doc = yaml.safe_load((K8S / "collect-indexed-job.yaml").read_text())
    schema = json.loads((K8S / "indexed-job.schema.json").read_text())
    doc["spec"]["completions"] = "8"
    doc["spec"]["template"]["spec"]["containers"][0]["env"][0]["valu"] = "typo"
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    assert len(errors) == 2


def test_a_generated_task_file_splits_across_the_jobs_pods(tmp_path: Path) -> None:
    """The Indexed Job's pods (N from the manifest) split a generated task file into disjoint shares
    that together are the whole file, none of them empty or far above the mean."""
    from typer.testing import CliRunner

    from collectors.environment import load_tasks
    from worldline.cli import app

    doc = yaml.safe_load((K8S / "collect-indexed-job.yaml").read_text())
    count = doc["spec"]["completions"]
    path = tmp_path / "tasks.jsonl"
    result = CliRunner().invoke(
        app, ["tasks", "generate", "--env", "terminal", "--n", "1000", "--seed", "5", "--out", str(path)]
    )
    assert result.exit_code == 0, result.output
    ids = [t.id for t in load_tasks(path)]
    assert len(ids) == len(set(ids)) == 1000
    shares = [{i for i in ids if shard_of(i, count) == k} for k in range(count)]
    assert sum(len(s) for s in shares) == len(ids) and set().union(*shares) == set(ids)
    mean = len(ids) / count
    assert all(0.7 * mean <= len(s) <= 1.3 * mean for s in shares), [len(s) for s in shares]
