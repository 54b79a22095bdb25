"""The Airflow DAG of the scheduled cycle: Airflow parses it, and `airflow dags test` runs every task
(collect -> clean -> increment -> build -> verify -> report) against a real schedule, through the real
`worldline` executable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW = ROOT / ".venv-airflow" / "bin" / "airflow"
DAGS = ROOT / "infra" / "schedules" / "airflow"
STEPS = ["collect", "clean", "increment", "build", "verify", "report"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    assert AIRFLOW.exists(), "Airflow is not installed: run `make setup` (infra/install-airflow.sh)"
    home = tmp_path_factory.mktemp("airflow")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "WORLDLINE_BIN": str(Path(sys.executable).with_name("worldline")),
        "PYTHONWARNINGS": "ignore",
    }
    migrated = subprocess.run(
        [str(AIRFLOW), "db", "migrate"], env=env, capture_output=True, text=True, timeout=600
    )
    assert migrated.returncode == 0, migrated.stdout[-2000:] + migrated.stderr[-2000:]
    return env


def test_airflow_parses_the_dag_with_the_steps_in_order(airflow_env: dict[str, str]) -> None:
    errors = subprocess.run(
        [str(AIRFLOW), "dags", "list-import-errors", "--output", "json"],
        env=airflow_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert errors.returncode == 0, errors.stderr[-2000:]
    # Airflow may print warnings before the JSON: the listing is the last line.
    assert json.loads(errors.stdout.strip().splitlines()[-1]) == []
    tasks = subprocess.run(
        [str(AIRFLOW), "tasks", "list", "worldline_cycle"],
        env=airflow_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert tasks.returncode == 0, tasks.stderr[-2000:]
    listed = [line.strip() for line in tasks.stdout.splitlines() if line.strip() in STEPS]
    assert sorted(listed) == sorted(STEPS)
    from pipelines.schedule import STEPS as SCHEDULE_STEPS

    assert list(SCHEDULE_STEPS) == STEPS


def test_dags_test_runs_a_cycle_and_builds_the_pools(airflow_env: dict[str, str], tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    shutil.copy(ROOT / "curation_agents" / "samples" / "dev_basics.cast", incoming)
    schedule = tmp_path / "schedule.yaml"
    schedule.write_text(
        "data: data\npools_out: data/pools\n"
        f"pools_config: {ROOT / 'pipelines/configs/demo.yaml'}\n"
        f"eval: [{ROOT / 'worldline/samples'}]\n"
        "clean:\n  - {name: recordings, inputs: [incoming/*.cast], source_kind: public, source_name: rec, licence: MIT}\n"
    )
    env = {**airflow_env, "WORLDLINE_SCHEDULE": str(schedule)}
    run = subprocess.run(
        [str(AIRFLOW), "dags", "test", "worldline_cycle", "2026-12-01"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    for step in STEPS:
        assert f"worldline_cycle.{step}" in log
    assert "new_state=failed" not in log
    manifest = json.loads((tmp_path / "data" / "pools" / "manifest.json").read_text())
    assert manifest["counts"]["reconciles"] and manifest["counts"]["records_in"] > 0
    assert (tmp_path / "data" / "pools" / "report.html").is_file()
