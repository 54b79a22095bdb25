"""The provisioning scripts are idempotent and the doctor reports a healthy engine."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worldline.cli import app

INFRA = Path(__file__).resolve().parent.parent / "infra"


@pytest.mark.parametrize("script", ["install-system.sh", "engine.sh", "build-images.sh"])
def test_scripts_are_valid_bash(script: str) -> None:
    assert subprocess.run(["bash", "-n", str(INFRA / script)], capture_output=True).returncode == 0


@pytest.mark.engine
def test_provisioning_is_idempotent_and_fast_when_done() -> None:
    for script, expect in (
        (["install-system.sh"], "already installed"),
        (["engine.sh", "start"], "DOCKER_HOST=unix://"),
        (["build-images.sh"], "worldline/debian exists (cached)"),
    ):
        result = subprocess.run(
            [str(INFRA / script[0]), *script[1:]], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        assert expect in result.stdout
    status = subprocess.run([str(INFRA / "engine.sh"), "status"], capture_output=True, text=True)
    assert status.returncode == 0 and "running" in status.stdout


@pytest.mark.engine
def test_sandbox_doctor_reports_every_check_ok() -> None:
    result = CliRunner().invoke(app, ["sandbox", "doctor"])
    assert result.exit_code == 0, result.output
    for name in ("container engine", "worldline/busybox", "worldline/debian", "sandbox round trip"):
        assert name in result.output


def test_doctor_names_the_fix_when_the_engine_is_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLDLINE_DOCKER_HOST", f"unix://{tmp_path}/down.sock")
    from collectors.doctor import run_checks

    checks = run_checks()
    failed = [c for c in checks if not c.ok and c.domain == "engine"]
    assert failed and failed[-1].name == "container engine answers"
    assert "engine.sh start" in failed[-1].fix
