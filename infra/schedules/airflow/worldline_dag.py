"""Airflow DAG: one worldline cycle per run, one task per step, on new shards only.

Put this file in Airflow's dags folder on a worker where worldline is installed (`pip install -e .`
from a checkout, with `make setup` done for the sandboxes), and set the Airflow Variable
`worldline_schedule` (or the environment variable WORLDLINE_SCHEDULE) to the schedule file
(infra/schedules/schedule.example.yaml shows one). Each task calls `pipelines.schedule.run_step`, the
same call as `worldline schedule step NAME FILE`; a step with nothing new returns at once.
`max_active_runs=1` keeps runs from overlapping (the schedule's lock refuses a second one anyway).
"""

from __future__ import annotations

import os
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
    from pipelines.schedule import run_step as worldline_step

    worldline_step(schedule_file(), step)


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
