"""A create that fails, or that the client gives up on while the engine finishes it, leaves no container
behind, and `reap_orphans` removes what is left even when the engine cannot list containers (on the
real engine: a start the engine refuses, a real client-side timeout)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import docker.errors
import pytest
from docker import DockerClient

from collectors import engine, sandbox
from collectors.sandbox import (
    LABEL,
    LABEL_EXPIRES,
    LABEL_OWNER_HOST,
    LABEL_OWNER_PID,
    Sandbox,
    SandboxError,
    SandboxLimits,
    reap_orphans,
    remove_all_live,
)

pytestmark = pytest.mark.engine
IMAGE = "worldline/busybox"
GRACE_S = 3.0  # how long an unanswered create's name keeps being removed here (120 s in a run)


@pytest.fixture
def client() -> DockerClient:
    return engine.connect()


@pytest.fixture
def notes(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """This test's own folder of unconfirmed names (none of another run's notes are touched)."""
    folder = tmp_path / "unconfirmed"
    monkeypatch.setattr(sandbox, "UNCONFIRMED_DIR", folder)
    monkeypatch.setattr(sandbox, "UNCONFIRMED_GRACE_S", GRACE_S)
    yield folder


def state(client: DockerClient, name: str) -> str | None:
    try:
        return str(client.api.inspect_container(name)["State"]["Status"])
    except docker.errors.NotFound:
        return None
    except docker.errors.APIError as exc:  # Podman mid-create: in its database, not yet in its store
        return f"unreadable: {exc.explanation}"


def owned(client: DockerClient) -> list[str]:
    return [
        c.name
        for c in client.containers.list(all=True, filters={"label": f"{LABEL_OWNER_PID}={os.getpid()}"})
    ]


def sandbox_name(error: BaseException) -> str:
    found = re.search(r"sandbox (worldline-[0-9a-f]{12})", str(error))
    assert found, str(error)
    return found.group(1)


def give_up_on_create(client: DockerClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's create request times out after 1 ms; the engine goes on and creates the container."""
    api = client.api
    create = api.create_container

    def impatient(*args: Any, **kwargs: Any) -> Any:
        api.timeout = 0.001
        try:
            return create(*args, **kwargs)
        finally:
            api.timeout = 60

    monkeypatch.setattr(api, "create_container", impatient)


def wait_for(predicate: Any, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_a_start_the_engine_refuses_leaves_nothing(client: DockerClient, notes: Any) -> None:
    with pytest.raises(SandboxError, match="the engine refused to start it") as raised:
        Sandbox.create(client, IMAGE, SandboxLimits(memory_mb=1))  # below what the runtime can start
    name = sandbox_name(raised.value)
    assert state(client, name) is None and owned(client) == []
    assert sandbox._LIVE.unconfirmed() == []  # the engine answered: nothing left to confirm


def test_a_create_the_client_gave_up_on_is_removed_when_the_engine_finishes_it(
    client: DockerClient, notes: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine finishes the create after the client's timeout: the container sits in `Created`,
    never started (no time-to-live, no auto-removal). The background retrier removes it by name."""
    give_up_on_create(client, monkeypatch)
    with pytest.raises(SandboxError, match="timed out") as raised:
        Sandbox.create(client, IMAGE, SandboxLimits())
    name = sandbox_name(raised.value)
    # Removed again every second for the grace time, whatever the engine answers meanwhile.
    assert name in sandbox._LIVE.unconfirmed() and (notes / name).exists()
    assert wait_for(lambda: name not in sandbox._LIVE.unconfirmed() and not (notes / name).exists())
    time.sleep(1.0)  # nothing comes back once the name is settled
    assert state(client, name) is None and owned(client) == []


def test_reap_removes_what_this_process_tracked_when_the_listing_fails(
    client: DockerClient, notes: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the retrier held back, the half-created container is really there; a listing that fails
    (as Podman's does with such a container) does not stop `reap_orphans` from removing it by name."""
    monkeypatch.setattr(sandbox._LiveSandboxes, "_retry_until_confirmed", lambda self: None)
    # The engine is too slow to answer the removal right after the timeout: the name is kept.
    monkeypatch.setattr(
        sandbox, "_remove_after_failed_create", lambda c, n, answered: sandbox._LIVE.defer(c, n)
    )
    give_up_on_create(client, monkeypatch)
    with pytest.raises(SandboxError) as raised:
        Sandbox.create(client, IMAGE, SandboxLimits())
    monkeypatch.undo()  # the client's create and the retrier as they were; the notes folder is set again
    monkeypatch.setattr(sandbox, "UNCONFIRMED_DIR", notes)
    monkeypatch.setattr(sandbox, "UNCONFIRMED_GRACE_S", GRACE_S)
    name = sandbox_name(raised.value)
    assert wait_for(lambda: state(client, name) == "created"), "the engine did not finish the create"

    def failing_listing(*args: Any, **kwargs: Any) -> Any:
        raise docker.errors.APIError("500 Server Error: a container in the listing cannot be read")

    monkeypatch.setattr(client.containers, "list", failing_listing)
    assert name in reap_orphans(client)
    assert state(client, name) is None
    time.sleep(GRACE_S)
    reap_orphans(client)  # after the grace time the engine's answer settles the name
    assert sandbox._LIVE.unconfirmed() == [] and not (notes / name).exists()


def test_a_later_process_removes_a_noted_name(client: DockerClient, notes: Any) -> None:
    """A name noted by a process that exited before the engine finished its create is removed by the
    next process's `reap_orphans`, by name."""
    name = "worldline-" + os.urandom(6).hex()
    client.api.create_container(IMAGE, ["sleep", "600"], name=name, labels={LABEL: "1"})  # never started
    notes.mkdir()
    (notes / name).touch()
    os.utime(notes / name, (time.time() - GRACE_S, time.time() - GRACE_S))  # noted a while ago
    try:
        assert name in reap_orphans(client)
        assert state(client, name) is None and not (notes / name).exists()
    finally:
        sandbox._remove_by_name(client, name)


def test_created_and_expired_sandboxes_are_orphans(client: DockerClient, notes: Any) -> None:
    """A `Created` container whose owner died, and one still there long after its time-to-live whose
    owner pid is alive (a pid reused by another process), are both reaped."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    names = {
        "worldline-" + os.urandom(6).hex(): {
            LABEL_OWNER_PID: str(dead.pid),
            LABEL_EXPIRES: str(int(time.time()) + 600),
        },
        "worldline-" + os.urandom(6).hex(): {
            LABEL_OWNER_PID: str(os.getpid()),
            LABEL_EXPIRES: str(int(time.time()) - 3600),
        },
    }
    try:
        for name, labels in names.items():
            client.api.create_container(
                IMAGE, ["sleep", "600"], name=name, labels={LABEL: "1", LABEL_OWNER_HOST: host, **labels}
            )
            assert state(client, name) == "created"
        removed = reap_orphans(client)
        assert set(names) <= set(removed)
        assert all(state(client, name) is None for name in names)
    finally:
        for name in names:
            sandbox._remove_by_name(client, name)
        remove_all_live()
