#!/usr/bin/env bash
# Apache Airflow in its own virtualenv (.venv-airflow), for the scheduled-cycle DAG in
# infra/schedules/airflow/ and its test. Airflow pins many libraries of its own, so it never shares
# worldline's .venv; its tasks call the `worldline` executable. Skipped when already installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-airflow"
SPEC="apache-airflow>=3.0,<4"
if [ -x "$VENV/bin/airflow" ] && "$VENV/bin/python" -c 'import airflow, sys; sys.exit(0 if airflow.__version__.startswith("3.") else 1)' 2>/dev/null; then
  echo "install-airflow: $("$VENV/bin/python" -c 'import airflow; print(airflow.__version__)') already in $VENV"
  exit 0
fi
echo "install-airflow: $SPEC into $VENV (a few minutes, once)"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
"$VENV/bin/python" -m pip install -q "$SPEC" 2>&1 | grep -v '^WARNING: Location' || true
"$VENV/bin/python" -c 'import airflow; print("install-airflow: airflow", airflow.__version__)'
