"""Airflow DAG: one worldline cycle per run, one task per step, on new shards only.

Put this file in Airflow's dags folder on a worker that can run worldline (a checkout with `make setup`
done; point WORLDLINE_BIN at its `.venv/bin/worldline` unless `worldline` is on PATH), and set the
Airflow Variable
`worldline_schedule` (or the environment variable WORLDLINE_SCHEDULE) to the schedule file
(infra/schedules/schedule.example.yaml shows one). Each task runs `worldline schedule step NAME FILE`;
a step with nothing new returns at once.
`max_active_runs=1` keeps runs from overlapping (the schedule's lock refuses a second one anyway).
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta

try:  # Airflow 3
    from airflow.sdk import DAG, Variable, task
except ImportError:  # Airflow 2
    from airflow import DAG  # type: ignore[no-redef]
    from airflow.decorators import task  # type: ignore[no-redef]
    from airflow.models import Variable  # type: ignore[no-redef]

STEPS = ("collect", "clean", "increment", "build", "verify", "report")


def schedule_file() -> str:
    """The schedule the tasks run: the Airflow Variable, else WORLDLINE_SCHEDULE."""
    try:
        return str(Variable.get("worldline_schedule"))
    except Exception:  # no Variable set (or no metadata database, as under `dags test`)
        path = os.environ.get("WORLDLINE_SCHEDULE")
        if not path:
            raise RuntimeError(
                "set the Airflow Variable worldline_schedule or WORLDLINE_SCHEDULE to the schedule file"
            ) from None
        return path


def run_step(step: str) -> None:
    """One step, through worldline's own command line: Airflow and worldline keep separate
    environments (Airflow pins many libraries), so the task only needs the `worldline` executable
    (WORLDLINE_BIN, default: `worldline` on PATH)."""
    command = [os.environ.get("WORLDLINE_BIN", "worldline"), "schedule", "step", step, schedule_file()]
    done = subprocess.run(command, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(done.stdout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed with exit code {done.returncode}")


with DAG(
    dag_id="worldline_cycle",
    description="worldline: collect -> clean -> incremental pools build -> verify -> report",
    schedule=timedelta(hours=6),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=10)},
    tags=["worldline"],
) as dag:
    previous = None
    for name in STEPS:
        current = task(task_id=name)(run_step)(name)
        if previous is not None:
            previous >> current
        previous = current
