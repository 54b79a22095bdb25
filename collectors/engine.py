"""The one place that knows which container engine we talk to and how to find it.

Everything else in collectors/ speaks the Docker API through docker-py and never names Podman or Docker.
Discovery order: WORLDLINE_DOCKER_HOST, DOCKER_HOST, the project's Podman socket (infra/engine.sh),
then docker-py's own defaults (`docker.from_env()`: /var/run/docker.sock, contexts).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
from docker import DockerClient

ENV_WORLDLINE_DOCKER_HOST = "WORLDLINE_DOCKER_HOST"
ENV_DOCKER_HOST = "DOCKER_HOST"
ENV_PODMAN_SOCKET = "WORLDLINE_PODMAN_SOCKET"
PROJECT_PODMAN_SOCKET = "/tmp/worldline-podman.sock"
REPO_ROOT = Path(__file__).resolve().parent.parent
ENGINE_SCRIPT = REPO_ROOT / "infra" / "engine.sh"
BUILD_IMAGES_SCRIPT = REPO_ROOT / "infra" / "build-images.sh"
INSTALL_SYSTEM_SCRIPT = REPO_ROOT / "infra" / "install-system.sh"

BUSYBOX_IMAGE = "worldline/busybox"
DEBIAN_IMAGE = "worldline/debian"
BASE_IMAGES = (BUSYBOX_IMAGE, DEBIAN_IMAGE)

# Podman stores locally imported images under the "localhost/" registry; Docker Engine does not.
_LOCAL_REGISTRY_PREFIX = "localhost/"


class EngineUnavailable(RuntimeError):
    """No container engine answers; the message says where we looked and the command that fixes it."""


@dataclass(frozen=True)
class EngineInfo:
    """What answered: the address, the product (podman / docker) and its version."""

    base_url: str
    product: str
    version: str
    api_version: str


def candidate_hosts() -> list[tuple[str, str]]:
    """(origin, base_url) pairs in the order we try them; the last resort is docker.from_env()."""
    hosts: list[tuple[str, str]] = []
    for var in (ENV_WORLDLINE_DOCKER_HOST, ENV_DOCKER_HOST):
        value = os.environ.get(var)
        if value:
            hosts.append((var, value))
    socket = os.environ.get(ENV_PODMAN_SOCKET, PROJECT_PODMAN_SOCKET)
    if Path(socket).exists():
        hosts.append(("project podman socket", f"unix://{socket}"))
    return hosts


def _fix_hint() -> str:
    return (
        f"start the project engine with `{ENGINE_SCRIPT} start` (after `{INSTALL_SYSTEM_SCRIPT}` as root "
        f"on a fresh machine), or point {ENV_WORLDLINE_DOCKER_HOST} / {ENV_DOCKER_HOST} at a running "
        "Docker-API engine; `worldline sandbox doctor` shows what is missing"
    )


def connect(timeout_s: float = 60.0) -> DockerClient:
    """A client whose engine answered a ping, or EngineUnavailable naming every address tried."""
    tried: list[str] = []
    explicit = [h for h in candidate_hosts() if h[0] != "project podman socket"]
    for origin, url in candidate_hosts():
        try:
            client = DockerClient(base_url=url, timeout=int(timeout_s), max_pool_size=64)
            client.ping()
            return client
        except (docker.errors.DockerException, OSError) as exc:
            tried.append(f"{url} (from {origin}): {_short(exc)}")
            if explicit and (origin, url) == explicit[0]:
                # An explicitly configured engine that is down is an error, not a cue to use another one.
                break
    if not explicit:
        try:
            client = docker.from_env(timeout=int(timeout_s))
            client.ping()
            return client
        except (docker.errors.DockerException, OSError) as exc:
            tried.append(f"docker.from_env(): {_short(exc)}")
    raise EngineUnavailable(
        "no container engine answers; tried " + "; ".join(tried) + ". Fix: " + _fix_hint()
    )


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


def engine_info(client: DockerClient) -> EngineInfo:
    """Which engine answered, from the Docker API's version endpoint."""
    version = client.version()
    components = {c.get("Name", ""): c for c in version.get("Components") or []}
    product = "podman" if any("podman" in name.lower() for name in components) else "docker"
    return EngineInfo(
        base_url=str(client.api.base_url),
        product=product,
        version=str(version.get("Version", "?")),
        api_version=str(version.get("ApiVersion", "?")),
    )


def image_reference(client: DockerClient, name: str) -> str:
    """The reference under which a locally built image is found on this engine (Podman adds localhost/)."""
    for ref in (name, _LOCAL_REGISTRY_PREFIX + name):
        try:
            client.images.get(ref)
            return ref
        except docker.errors.ImageNotFound:
            continue
    raise docker.errors.ImageNotFound(
        f"image {name!r} is not in the engine; build it with `{BUILD_IMAGES_SCRIPT}`"
    )


_products: dict[str, str] = {}
_products_lock = threading.Lock()


def engine_product(client: DockerClient) -> str:
    """ "podman" or "docker" for the engine behind `client` (asked once per address)."""
    key = str(client.api.base_url)
    with _products_lock:
        known = _products.get(key)
    if known is None:
        known = engine_info(client).product
        with _products_lock:
            _products[key] = known
    return known


def docker_remaps_users(client: DockerClient) -> bool:
    """Whether a Docker daemon runs containers in a user namespace of its own (`userns-remap`)."""
    options = client.info().get("SecurityOptions") or []
    return any("name=userns" in str(option) for option in options)


_shared_lock = threading.Lock()
_shared_client: DockerClient | None = None


def shared_client() -> DockerClient:
    """One process-wide client (docker-py's connection pool is thread-safe)."""
    global _shared_client
    with _shared_lock:
        if _shared_client is None:
            _shared_client = connect()
        return _shared_client
