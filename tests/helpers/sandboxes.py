"""Which sandboxes a test created, so "nothing left behind" checks look at the test's own containers
only: the engine is shared, and other runs' sandboxes may come and go at any time."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import pytest
from docker import DockerClient

from collectors.sandbox import LABEL, LABEL_OWNER_HOST, LABEL_OWNER_PID, Sandbox


def track_sandboxes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, record the container id of every sandbox this process creates (in order)."""
    created: list[str] = []
    real_create = Sandbox.create.__func__  # type: ignore[attr-defined]

    def create(cls: type[Sandbox], *args: Any, **kwargs: Any) -> Sandbox:
        sandbox: Sandbox = real_create(cls, *args, **kwargs)
        created.append(sandbox.container.id)
        return sandbox

    monkeypatch.setattr(Sandbox, "create", classmethod(create))
    return created


def private_host(monkeypatch: pytest.MonkeyPatch) -> str:
    """Give this process a host name of its own for the sandbox owner labels; return the snippet a
    child Python process runs first to use it too.

    Orphan detection (`reap_orphans`, the doctor) only looks at sandboxes labelled with this host's
    name, so other runs on the shared engine neither reap this test's orphans nor show up in its checks.
    """
    name = f"{socket.gethostname()}-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(socket, "gethostname", lambda: name)
    return f"import socket; socket.gethostname = lambda: {name!r}\n"


def still_present(client: DockerClient, container_ids: list[str]) -> list[str]:
    """The given sandboxes that the engine still has (running or not)."""
    wanted = set(container_ids)
    return [c.id for c in client.containers.list(all=True, filters={"label": LABEL}) if c.id in wanted]


def owned_by(client: DockerClient, pid: int) -> list[str]:
    """Ids of the sandboxes whose owner label names process `pid` (e.g. a runner killed with -9)."""
    labels = [LABEL, f"{LABEL_OWNER_PID}={pid}", f"{LABEL_OWNER_HOST}={socket.gethostname()}"]
    return [c.id for c in client.containers.list(all=True, filters={"label": labels})]
