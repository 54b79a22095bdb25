"""`worldline sandbox doctor`: what the collectors need, what is there, and the command that fixes each gap.

The container engine is checked when a domain asked about needs it; every domain then adds its own
requirements (`Environment.doctor_checks`: servers, browsers, devices, indexes).
"""

from __future__ import annotations

import shutil
import time

import docker.errors

from collectors import engine
from collectors.environment import Check, collector_domains, environment_class
from collectors.sandbox import Sandbox, SandboxLimits, orphaned_sandboxes


def run_checks(domains: list[str] | None = None) -> list[Check]:
    """The engine's checks (when any of `domains` needs it) followed by each domain's own checks;
    all registered domains when `domains` is None."""
    names = collector_domains() if domains is None else domains
    classes = [environment_class(name) for name in names]
    checks: list[Check] = []
    if any(cls.needs_engine() for cls in classes):
        checks.extend(engine_checks())
    for cls in classes:
        try:
            found = cls.doctor_checks()
        except Exception as exc:  # the doctor reports every failure instead of crashing
            found = [Check("requirements", False, f"{type(exc).__name__}: {exc}"[:300])]
        for check in found:
            check.domain = cls.domain.value
        checks.extend(found)
    return checks


def engine_checks() -> list[Check]:
    """The container engine, the base images, a sandbox round trip and orphaned sandboxes."""
    checks: list[Check] = []
    external = [origin for origin, _ in engine.candidate_hosts() if origin != "project podman socket"]
    if not external:
        podman = shutil.which("podman")
        checks.append(
            Check(
                "podman installed",
                podman is not None,
                podman or "not found on PATH",
                f"sudo {engine.INSTALL_SYSTEM_SCRIPT}",
            )
        )
    try:
        client = engine.connect(timeout_s=10)
    except engine.EngineUnavailable as exc:
        checks.append(Check("container engine answers", False, str(exc), f"{engine.ENGINE_SCRIPT} start"))
        return checks
    info = engine.engine_info(client)
    hosts = ", ".join(url for _, url in engine.candidate_hosts()) or "docker.from_env()"
    checks.append(
        Check(
            "container engine answers",
            True,
            f"{info.product} {info.version} (API {info.api_version}) via {hosts}",
        )
    )
    images_ok = True
    for image in engine.BASE_IMAGES:
        try:
            ref = engine.image_reference(client, image)
            size = client.images.get(ref).attrs.get("Size", 0)
            checks.append(Check(f"image {image}", True, f"{ref} ({size / 1e6:.0f} MB)"))
        except docker.errors.ImageNotFound:
            images_ok = False
            checks.append(Check(f"image {image}", False, "not built", str(engine.BUILD_IMAGES_SCRIPT)))
    if images_ok:
        t0 = time.monotonic()
        try:
            with Sandbox.create(
                client, engine.BUSYBOX_IMAGE, SandboxLimits(memory_mb=64, pids=32)
            ) as sandbox:
                result = sandbox.exec("echo ok")
            ok = result.output.strip() == "ok"
            detail = f"started, ran a command and removed a limited, network-less sandbox in {time.monotonic() - t0:.2f} s"
            checks.append(Check("sandbox round trip", ok, detail if ok else result.output[:200]))
        except Exception as exc:  # the doctor reports every failure instead of crashing
            checks.append(
                Check(
                    "sandbox round trip",
                    False,
                    str(exc)[:300],
                    f"{engine.ENGINE_SCRIPT} stop && {engine.ENGINE_SCRIPT} start",
                )
            )
    orphans = orphaned_sandboxes(client)
    checks.append(
        Check(
            "no orphaned sandboxes",
            not orphans,
            f"{len(orphans)} sandbox(es) left by runs that died"
            + (f": {', '.join(orphans)}" if orphans else ""),
            "worldline sandbox reap",
        )
    )
    return checks
