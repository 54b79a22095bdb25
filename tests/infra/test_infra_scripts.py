"""The provisioning scripts are idempotent and the doctor reports a healthy engine."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worldline.cli import app

INFRA = Path(__file__).resolve().parents[2] / "infra"


@pytest.mark.parametrize(
    "script",
    ["install-system.sh", "engine.sh", "build-images.sh", "build-desktop-image.sh", "build-browser-image.sh"],
)
def test_scripts_are_valid_bash(script: str) -> None:
    assert subprocess.run(["bash", "-n", str(INFRA / script)], capture_output=True).returncode == 0


@pytest.mark.engine
def test_provisioning_is_idempotent_and_fast_when_done() -> None:
    for script, expect in (
        (["install-system.sh"], "already installed"),
        (["engine.sh", "start"], "DOCKER_HOST=unix://"),
        (["build-images.sh"], "worldline/debian exists (cached)"),
        (["build-desktop-image.sh"], "worldline/desktop exists (cached)"),
        (["build-browser-image.sh"], "worldline/browser exists (cached)"),
    ):
        result = subprocess.run(
            [str(INFRA / script[0]), *script[1:]], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        assert expect in result.stdout
    status = subprocess.run([str(INFRA / "engine.sh"), "status"], capture_output=True, text=True)
    assert status.returncode == 0 and "running" in status.stdout


ORPHAN_SCRIPT = """
import time
from collectors import engine
from collectors.sandbox import Sandbox, SandboxLimits
box = Sandbox.create(engine.connect(), engine.BUSYBOX_IMAGE, SandboxLimits(), run_label="doctor-test-orphan")
print(box.name, box.container.id, flush=True)
time.sleep(60)
"""


@pytest.mark.engine
def test_sandbox_doctor_reports_every_check_and_names_orphans(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine checks pass; the orphan check names a sandbox this test orphaned (killed -9 owner).
    Orphans that other runs on the shared engine left belong to another host label and stay out."""
    from collectors import engine
    from collectors.doctor import run_checks
    from tests.helpers.sandboxes import private_host

    as_this_host = private_host(monkeypatch)
    client = engine.connect()
    owner = subprocess.Popen(
        [sys.executable, "-c", as_this_host + ORPHAN_SCRIPT], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    name, container_id = owner.stdout.readline().split()
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=30)
    try:
        checks = {c.name: c for c in run_checks()}
        result = CliRunner().invoke(app, ["sandbox", "doctor"])
    finally:
        client.api.remove_container(container_id, force=True)
    for check in ("container engine answers", "image worldline/busybox", "image worldline/debian"):
        assert checks[check].ok, checks[check]
    assert checks["sandbox round trip"].ok, checks["sandbox round trip"]
    orphans = checks["no orphaned sandboxes"]
    assert not orphans.ok and orphans.fix == "worldline sandbox reap"
    assert orphans.detail == f"1 sandbox(es) left by runs that died: {name}"  # ours, and only ours
    assert result.exit_code == 1  # an orphan is a failed check...
    for check in [*checks, name, "worldline sandbox reap"]:  # ...shown with every check and the fix
        assert check in result.output, check


def test_doctor_names_the_fix_when_the_engine_is_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLDLINE_DOCKER_HOST", f"unix://{tmp_path}/down.sock")
    from collectors.doctor import run_checks

    checks = run_checks()
    failed = [c for c in checks if not c.ok and c.domain == "engine"]
    assert failed and failed[-1].name == "container engine answers"
    assert "engine.sh start" in failed[-1].fix
