"""The containment suite: every attack a hostile task can try, per domain, on the real engine, browser
and desktop, against host canaries that must stay untouched (tests/security/canary.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.security.canary import HostCanary


@pytest.fixture
def host_canary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostCanary]:
    """A fresh canary per test: a host file, a loopback TCP listener and an abstract unix socket."""
    canary = HostCanary(tmp_path_factory.mktemp("host-canary")).start()
    try:
        yield canary
    finally:
        canary.stop()
