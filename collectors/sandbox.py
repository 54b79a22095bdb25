"""Containers that run an agent's commands: isolated, limited, and always removed.

A sandbox has no network unless its task asks for one, memory / CPU / pids limits, a read-only root with
size-limited tmpfs for the work directory and /tmp (so filling the disk fills only those), and no mount
of anything on the host.

Every process in it runs as the unprivileged user `agent` (uid 1000, gid 1000, home /home/agent, a
tmpfs) unless the task says `"limits": {"root": true}`. On Podman the container gets a user namespace
of its own (`UsernsMode: auto:size=65536`, ranges from the `containers` entries of /etc/subuid and /etc/subgid that
infra/engine.sh creates), so even a root task's uid 0 is an unprivileged host uid. The seccomp profile
is the engine's default with new namespaces, mounts and ptrace denied (infra/seccomp.json), plus
no-new-privileges and dropped capabilities. Docker Engine has no per-container user namespace: there a
task runs as `agent` with the same profile, and a root task is refused unless the daemon remaps users
(`userns-remap`), because its uid 0 would be the host's. Every live sandbox is tracked so that a crash, SIGTERM or Ctrl-C still removes
it; containers left by a process that died with SIGKILL are reaped by the next run (`reap_orphans`).

A container is named before the engine creates it, so whatever happens to the create (the engine
refuses it, the start fails, the client gives up waiting while the engine goes on and finishes it
later) it is removed by that name. A name whose removal failed is removed again until the engine
answers; one whose create went unanswered is removed again for `UNCONFIRMED_GRACE_S` whatever the
engine answers meanwhile (Podman can finish such a create after answering a removal), in the
background, at exit and by `reap_orphans` (of this run or, through a note on disk, the next). A
container left `Created` is never started, so neither its time-to-live nor `auto_remove` would ever end
it, and on Podman 4.3 it makes every container listing fail until it is removed by name.
"""

from __future__ import annotations

import atexit
import io
import os
import signal
import socket
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePosixPath
from types import FrameType
from typing import Any

import docker.errors
from docker import DockerClient
from docker.models.containers import Container

from collectors import engine
from collectors.engine import REPO_ROOT

LABEL = "worldline.sandbox"
LABEL_OWNER_PID = "worldline.owner_pid"
LABEL_OWNER_HOST = "worldline.owner_host"
LABEL_RUN = "worldline.run"
LABEL_EXPIRES = "worldline.expires"  # unix time after which the sandbox removes itself
WORK_DIR = "/work"
# The sandbox user, created in every image infra/build-images.sh builds (and those built from them).
SANDBOX_USER = "agent"
SANDBOX_UID = 1000
SANDBOX_GID = 1000
SANDBOX_HOME = "/home/agent"
SECCOMP_PROFILE = REPO_ROOT / "infra" / "seccomp.json"
USERNS_SIZE = 65536  # ids of each sandbox's user namespace on Podman (uid 0 .. 65535 inside)
REMOVE_TIMEOUT_S = 60.0  # each removal's own HTTP timeout, whatever the client's is
# How long a name whose create's outcome is unknown keeps being removed, and how often: until then
# neither "removed" nor "no such container" is final, because Podman may still finish that create
# after either answer (seen on 4.3: a 204 for the half-registered container, then the container).
UNCONFIRMED_GRACE_S = 120.0
UNCONFIRMED_RETRY_S = 1.0
UNCONFIRMED_EXIT_WAIT_S = 5.0  # at exit, how long unconfirmed names are still retried (notes outlive it)
# A sandbox still there this long after its time-to-live never started (or its auto-removal failed):
# an orphan, whatever process its label names (that pid may belong to another process by now).
EXPIRED_GRACE_S = 60.0
# One empty file per unconfirmed name, so that a later process (`reap_orphans` of the next run) removes
# by name what this one could not, even when the engine cannot list containers.
UNCONFIRMED_DIR = Path(tempfile.gettempdir()) / f"worldline-unconfirmed-sandboxes-{os.getuid()}"


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits and isolation of one sandbox; a task may override any field."""

    memory_mb: int = 512
    cpus: float = 1.0
    pids: int = 256
    work_dir_mb: int = 256  # size of the /work tmpfs: the disk an agent can fill
    tmp_mb: int = 64  # each of /tmp and /var/tmp
    run_mb: int = 16  # /run
    shm_mb: int = 64  # /dev/shm
    ttl_s: float = 3 * 3600  # the sandbox stops and is removed by the engine after this, whatever happens
    network: bool = False
    step_timeout_s: float = 30.0
    output_cap_bytes: int = 64 * 1024  # per step, kept in the observation
    flood_limit_bytes: int = 32 * 1024 * 1024  # per step; beyond it the command is interrupted
    helper_timeout_s: float = 60.0  # setup commands, initial-state capture, tool helpers
    root: bool = False  # run as uid 0 inside the sandbox's user namespace instead of the agent user

    def with_overrides(self, overrides: dict[str, Any] | None) -> SandboxLimits:
        """These limits with a task's `limits` object applied; unknown keys and values of the wrong
        type are an error naming the key."""
        if not overrides:
            return self
        known = asdict(self)
        unknown = sorted(set(overrides) - set(known))
        if unknown:
            raise ValueError(
                f"limits: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(known))}"
            )
        for key, value in overrides.items():
            default = known[key]
            if isinstance(default, bool):
                ok = isinstance(value, bool)
            else:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok:
                kind = "true or false" if isinstance(default, bool) else "a number"
                raise ValueError(f"limits.{key}: must be {kind}, got {value!r}")
        return replace(self, **overrides)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ExecResult:
    """The outcome of a one-shot command run outside the agent's shell (setup, probes, tools)."""

    exit_code: int
    output: str
    timed_out: bool = False  # killed by the time limit (coreutils says 124, busybox 143, SIGKILL 137)


class SandboxError(RuntimeError):
    """The sandbox could not be created or used; the message names the container and the cause."""


@dataclass
class Sandbox:
    """One running container; use as a context manager so it is removed whatever happens."""

    client: DockerClient
    container: Container
    limits: SandboxLimits
    image: str
    name: str
    user: str = f"{SANDBOX_UID}:{SANDBOX_GID}"  # uid:gid every process of the sandbox runs as
    home: str = SANDBOX_HOME
    closed: bool = field(default=False)

    @classmethod
    def create(
        cls,
        client: DockerClient,
        image: str,
        limits: SandboxLimits,
        *,
        run_label: str = "",
        environment: dict[str, str] | None = None,
        root: bool | None = None,
    ) -> Sandbox:
        """Start a container that idles until commands are exec'd into it; its processes run as the
        agent user, or as uid 0 inside its user namespace when `root` (default: `limits.root`)."""
        as_root = limits.root if root is None else root
        ref = engine.image_reference(client, image)
        product = engine.engine_product(client)
        name = f"worldline-{uuid.uuid4().hex[:12]}"
        if as_root and product != "podman" and not engine.docker_remaps_users(client):
            raise SandboxError(
                f"sandbox {name} from image {image}: the task asks for root (limits.root), but this Docker "
                "Engine runs containers without a user namespace, so uid 0 inside would be the host's root; "
                "run it on Podman (infra/engine.sh) or on a daemon with userns-remap, or drop limits.root"
            )
        if _LIVE.closing:
            raise SandboxError(f"sandbox {name}: not created, the process is shutting down")
        user = "0:0" if as_root else f"{SANDBOX_UID}:{SANDBOX_GID}"
        home = "/root" if as_root else SANDBOX_HOME
        # Writable directories belong to the user: Podman chowns a tmpfs to the container's user with
        # `U`; Docker passes uid/gid to the kernel's tmpfs.
        owned = ",U" if product == "podman" else f",uid={user.split(':')[0]},gid={user.split(':')[1]}"
        tmpfs = {
            WORK_DIR: f"size={limits.work_dir_mb}m,mode=0755{owned}",
            "/tmp": f"size={limits.tmp_mb}m,mode=1777",
            "/var/tmp": f"size={limits.tmp_mb}m,mode=1777",
            "/run": f"size={limits.run_mb}m,mode=0755{owned}",
            "/root": "size=16m,mode=0700",
        }
        if not as_root:
            tmpfs[SANDBOX_HOME] = f"size=16m,mode=0700{owned}"
        user_env = {"HOME": home, "USER": "root" if as_root else SANDBOX_USER}
        user_env["LOGNAME"] = user_env["USER"]
        _LIVE.begin_create(name)
        answered = False  # whether the engine answered the create (so "no such container" is final)
        try:
            host_config = client.api.create_host_config(
                # The main process ends at the time-to-live; auto_remove then deletes the container, so a
                # sandbox outlives a SIGKILLed collection job by at most ttl_s.
                auto_remove=True,
                network_mode="bridge" if limits.network else "none",
                mem_limit=f"{limits.memory_mb}m",
                memswap_limit=f"{limits.memory_mb}m",  # no swap: memory pressure ends in the OOM killer
                nano_cpus=int(limits.cpus * 1e9),
                pids_limit=limits.pids,
                read_only=True,
                # The writable paths, declared explicitly so Podman (which adds its own tmpfs on a read-only
                # root) and Docker (which adds none) give a task the same ones with the same sizes.
                tmpfs=tmpfs,
                shm_size=f"{limits.shm_mb}m",
                cap_drop=["NET_RAW", "SYS_ADMIN", "MKNOD", "SYS_PTRACE"],
                security_opt=["no-new-privileges", seccomp_option(product)],
                init=True,
            )
            if product == "podman":
                # docker-py only knows "host"; Podman's compat API takes its own modes in the same field.
                # The size is explicit: without it Podman 4.3 reads the image's passwd files to size the
                # namespace under the layers lock, which deadlocks against a concurrent container cleanup
                # (podman#16062, fixed in containers/storage#1387, later than Debian 12's podman).
                host_config["UsernsMode"] = f"auto:size={USERNS_SIZE}"
            created = client.api.create_container(
                ref,
                ["sleep", f"{max(1, int(limits.ttl_s))}"],
                name=name,
                hostname="sandbox",
                user=user,
                working_dir=WORK_DIR,
                environment={"LANG": "C.UTF-8", **user_env, **(environment or {})},
                labels={
                    LABEL: "1",
                    LABEL_OWNER_PID: str(os.getpid()),
                    LABEL_OWNER_HOST: socket.gethostname(),
                    LABEL_RUN: run_label,
                    LABEL_EXPIRES: str(int(time.time() + limits.ttl_s)),
                },
                host_config=host_config,
            )
            answered = True
            client.api.start(created["Id"])
            container = client.containers.get(created["Id"])
        except (docker.errors.DockerException, OSError) as exc:
            # A half-created container must not outlive the failure, even one the engine finishes later.
            answered = answered or isinstance(exc, docker.errors.APIError)
            _remove_after_failed_create(client, name, answered)
            _LIVE.end_create(name)
            raise SandboxError(
                f"sandbox {name} from image {image}: the engine refused to start it: {exc}{_fix_for(exc)}"
            ) from exc
        except BaseException:
            _remove_after_failed_create(client, name, answered)
            _LIVE.end_create(name)
            raise
        sandbox = cls(
            client=client,
            container=container,
            limits=replace(limits, root=as_root),
            image=image,
            name=name,
            user=user,
            home=home,
        )
        _LIVE.add(sandbox)
        _LIVE.end_create(name)
        if _LIVE.closing:  # a signal arrived while the engine was creating it
            sandbox.close()
            raise SandboxError(f"sandbox {name}: removed at once, the process is shutting down")
        return sandbox

    # -- one-shot commands and files ---------------------------------------------------------------
    def exec(
        self,
        command: list[str] | str,
        *,
        workdir: str = WORK_DIR,
        user: str = "",
        timeout_s: float | None = None,
    ) -> ExecResult:
        """Run a command to completion outside the agent's shell; output is stdout+stderr as text.

        Every such command has a time limit (`timeout_s`, default the sandbox's `helper_timeout_s`),
        enforced inside the sandbox by `timeout`, which both base images have: on expiry the command is
        killed and the exit code is 124 (137 if it ignored SIGTERM)."""
        cmd = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        limit = self.limits.helper_timeout_s if timeout_s is None else timeout_s
        cmd = ["timeout", "-k", "2", f"{max(0.1, limit):g}", *cmd]
        started = time.monotonic()
        try:
            result = self.container.exec_run(cmd, workdir=workdir, user=user, demux=False)
        except docker.errors.APIError as exc:
            raise SandboxError(f"sandbox {self.name}: exec {cmd!r} failed: {exc}") from exc
        output = (result.output or b"").decode("utf-8", "replace")
        code = int(result.exit_code if result.exit_code is not None else -1)
        timed_out = code in (124, 137, 143) and time.monotonic() - started >= 0.9 * limit
        return ExecResult(exit_code=code, output=output, timed_out=timed_out)

    def put_files(self, files: Mapping[str, str | bytes], *, base: str = WORK_DIR) -> None:
        """Write files (paths relative to `base`) into the sandbox, owned by the sandbox's user."""
        uid, gid = (int(part) for part in self.user.split(":"))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            # The directories above the files are listed too, so their modes do not depend on tar.
            dirs = sorted({str(parent) for rel in files for parent in PurePosixPath(rel.lstrip("/")).parents})
            for rel in dirs:
                if rel != ".":
                    tar.addfile(_tar_entry(rel, uid, gid, tarfile.DIRTYPE, 0o755))
            for rel, content in files.items():
                data = content.encode("utf-8") if isinstance(content, str) else content
                info = _tar_entry(
                    rel.lstrip("/"), uid, gid, tarfile.REGTYPE, 0o755 if data.startswith(b"#!") else 0o644
                )
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        self.put_tar(buf.getvalue(), base=base)

    def put_tar(self, archive: bytes, *, base: str = WORK_DIR) -> None:
        """Unpack a tar archive under `base` inside the sandbox, as the sandbox's user.

        `tar` inside the sandbox does it, reading the archive from the exec's stdin: the engine's
        archive API cannot write into a tmpfs of a container with its own user namespace (Podman's
        copier fails with EOVERFLOW), and no host process ever resolves a path of the sandbox."""
        limit = f"{max(0.1, self.limits.helper_timeout_s):g}"
        script = 'mkdir -p "$0" && exec tar -x -f - -C "$0"'
        api = self.client.api
        try:
            exec_id = api.exec_create(
                self.container.id, ["timeout", "-k", "2", limit, "/bin/sh", "-c", script, base], stdin=True
            )["Id"]
            conn = api.exec_start(exec_id, socket=True)
            sock = getattr(conn, "_sock", conn)
            try:
                sock.sendall(archive)
                sock.shutdown(socket.SHUT_WR)
                output = _read_exec_stream(sock)
            finally:
                sock.close()
            code = _exec_exit_code(api, exec_id)
        except (docker.errors.APIError, OSError) as exc:
            raise SandboxError(f"sandbox {self.name}: writing files into {base} failed: {exc}") from exc
        if code != 0:
            raise SandboxError(
                f"sandbox {self.name}: writing files into {base} failed (tar exited {code}): "
                f"{output.strip()[-500:]}"
            )

    # -- lifecycle ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Remove the container (idempotent); never raises, so cleanup paths stay simple."""
        if self.closed:
            return
        self.closed = True
        _LIVE.discard(self)
        if _remove_by_name(self.client, self.name) == "failed":
            _LIVE.defer(self.client, self.name, unanswered=False)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __hash__(self) -> int:
        return hash(self.name)


def _read_exec_stream(sock: socket.socket) -> str:
    """The stdout+stderr of a non-TTY exec: frames of an 8-byte header (stream, size) and the data."""
    raw = bytearray()
    while chunk := sock.recv(65536):
        raw += chunk
    out, pos = bytearray(), 0
    while pos + 8 <= len(raw):
        size = int.from_bytes(raw[pos + 4 : pos + 8], "big")
        out += raw[pos + 8 : pos + 8 + size]
        pos += 8 + size
    return out.decode("utf-8", "replace")


def _exec_exit_code(api: Any, exec_id: str) -> int:
    """An exec's exit code; the engine records it a moment after the stream ends."""
    for _ in range(100):
        info = api.exec_inspect(exec_id)
        if not info.get("Running") and info.get("ExitCode") is not None:
            return int(info["ExitCode"])
        time.sleep(0.01)
    return -1


def _tar_entry(name: str, uid: int, gid: int, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.uid, info.gid = kind, mode, uid, gid
    info.mtime = int(time.time())
    return info


def seccomp_option(product: str) -> str:
    """The `security_opt` entry for our seccomp profile: Docker takes the profile's JSON text, Podman's
    compat API a path on the engine's host (this checkout, for the project's local engine)."""
    if product == "podman":
        return f"seccomp={SECCOMP_PROFILE}"
    return "seccomp=" + SECCOMP_PROFILE.read_text()


def _fix_for(exc: BaseException) -> str:
    text = str(exc)
    if "containers" in text and ("subuid" in text or "mapping" in text or "subgid" in text):
        return (
            "; fix: give the engine user-namespace ranges (`infra/engine.sh start` adds "
            "`containers:2147483647:2147483648` to /etc/subuid and /etc/subgid)"
        )
    if "seccomp" in text:
        return f"; fix: the engine must be able to read {SECCOMP_PROFILE} (infra/make-seccomp-profile.py)"
    return ""


def _remove_by_name(client: DockerClient, ref: str, timeout_s: float = REMOVE_TIMEOUT_S) -> str:
    """Force-remove container `ref` (a name or id) with its volumes, under a timeout of its own (a
    client whose own timeout ran out on a stuck engine still gets a real attempt). Returns "removed",
    "absent" (the engine has no such container) or "failed"; never raises."""
    api = client.api
    try:
        # docker-py's remove_container takes no timeout; its request helpers take one per call.
        response = api._delete(
            api._url("/containers/{0}", ref), params={"v": True, "force": True}, timeout=timeout_s
        )
    except (docker.errors.DockerException, OSError):
        return "failed"
    if response.status_code == 404:
        return "absent"
    return "removed" if 200 <= response.status_code < 300 else "failed"


def _remove_quietly(client: DockerClient, ref: str) -> None:
    _remove_by_name(client, ref)


def _remove_after_failed_create(client: DockerClient, name: str, answered: bool) -> None:
    """Remove what a failed create may have left. When the engine answered the create, its answer to
    the removal is final (unless the removal failed); when it did not, the name is removed again for
    `UNCONFIRMED_GRACE_S`, whatever the engine answers now."""
    outcome = _remove_by_name(client, name)
    if answered and outcome != "failed":
        return
    _LIVE.defer(client, name, unanswered=not answered)


# --------------------------------------------------------------------------------------------------
# Cleanup on exit, crash and signals
# --------------------------------------------------------------------------------------------------


class _LiveSandboxes:
    """The sandboxes this process created and has not removed yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: set[Sandbox] = set()
        self._creating: set[str] = set()  # names the engine is creating right now
        # names to remove again (a create whose outcome is unknown, a removal that failed): name ->
        # (the client, when "no such container" starts to count as final)
        self._unconfirmed: dict[str, tuple[DockerClient, float]] = {}
        self._retrier: threading.Thread | None = None
        self.closing = False  # set by a terminating signal: no new sandboxes

    def begin_create(self, name: str) -> None:
        with self._lock:
            self._creating.add(name)

    def end_create(self, name: str) -> None:
        with self._lock:
            self._creating.discard(name)

    def creating(self) -> int:
        with self._lock:
            return len(self._creating)

    def add(self, sandbox: Sandbox) -> None:
        with self._lock:
            self._items.add(sandbox)

    def discard(self, sandbox: Sandbox) -> None:
        with self._lock:
            self._items.discard(sandbox)

    def defer(self, client: DockerClient, name: str, *, unanswered: bool = True) -> None:
        """Remove `name` again later (background, exit, `reap_orphans`): for `UNCONFIRMED_GRACE_S`
        when its create went unanswered, else until the engine removes it or says it has none."""
        _note_unconfirmed(name)
        settled_at = time.monotonic() + (UNCONFIRMED_GRACE_S if unanswered else 0.0)
        with self._lock:
            self._unconfirmed[name] = (client, settled_at)
            if self._retrier is None or not self._retrier.is_alive():
                self._retrier = threading.Thread(
                    target=self._retry_until_confirmed, name="worldline-sandbox-removal", daemon=True
                )
                self._retrier.start()

    def unconfirmed(self) -> list[str]:
        with self._lock:
            return sorted(self._unconfirmed)

    def retry_unconfirmed(self, *, final: bool = False) -> list[str]:
        """Try to remove every unconfirmed name once; returns those the engine removed now. A name
        leaves the list when the engine removed it or has no such container, once its grace time is
        over (at once when `final`: the caller knows no create of it is running)."""
        with self._lock:
            items = list(self._unconfirmed.items())
        removed: list[str] = []
        now = time.monotonic()
        for name, (client, settled_at) in items:
            outcome = _remove_by_name(client, name)
            if outcome == "removed":
                removed.append(name)
            if outcome != "failed" and (final or now >= settled_at):
                with self._lock:
                    self._unconfirmed.pop(name, None)
                _forget_unconfirmed(name)
        return removed

    def _retry_until_confirmed(self) -> None:
        while True:
            time.sleep(UNCONFIRMED_RETRY_S)
            self.retry_unconfirmed()
            with self._lock:
                if not self._unconfirmed:
                    self._retrier = None
                    return

    def snapshot(self) -> list[Sandbox]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


_LIVE = _LiveSandboxes()


def live_sandboxes() -> list[Sandbox]:
    return _LIVE.snapshot()


def remove_all_live() -> int:
    """Remove every sandbox this process still holds, and once more every name whose create or
    removal was not confirmed; returns how many sandboxes were removed."""
    items = _LIVE.snapshot()
    for sandbox in items:
        sandbox.close()
    return len(items) + len(_LIVE.retry_unconfirmed())


def _remove_at_exit() -> None:
    remove_all_live()
    deadline = time.monotonic() + UNCONFIRMED_EXIT_WAIT_S
    while _LIVE.unconfirmed() and time.monotonic() < deadline:
        time.sleep(0.2)
        _LIVE.retry_unconfirmed()


atexit.register(_remove_at_exit)


def shutdown_sandboxes(wait_s: float = 30.0) -> int:
    """Stop creating sandboxes, remove the live ones, wait (bounded) for those the engine is still
    creating and remove them too; returns how many were removed."""
    _LIVE.closing = True
    removed = remove_all_live()
    deadline = time.monotonic() + wait_s
    while _LIVE.creating() and time.monotonic() < deadline:
        time.sleep(0.05)
    return removed + remove_all_live()


def reopen_sandboxes() -> None:
    """Allow new sandboxes again after `shutdown_sandboxes` (a library caller that stopped one run and
    starts another in the same process)."""
    _LIVE.closing = False


def install_signal_cleanup() -> None:
    """On SIGTERM/SIGHUP remove live sandboxes, then die as the signal asked (Ctrl-C raises
    KeyboardInterrupt, which unwinds through each sandbox's context manager and the atexit hook)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        shutdown_sandboxes()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, handler)


def orphaned_sandboxes(client: DockerClient) -> list[str]:
    """Names of sandboxes, in any state (running, `Created` and never started, `Exited`), whose
    owning process on this host is gone (it died with SIGKILL), and of any sandbox still there well
    after its time-to-live (it never started, or its auto-removal failed). Raises what the engine's
    listing raises."""
    host = socket.gethostname()
    orphans: list[str] = []
    now = time.time()
    for c in client.containers.list(all=True, filters={"label": LABEL}):
        labels = c.labels or {}
        try:
            expired = now > float(labels.get(LABEL_EXPIRES, "inf")) + EXPIRED_GRACE_S
        except ValueError:
            expired = False
        if expired:
            orphans.append(c.name)
            continue
        if labels.get(LABEL_OWNER_HOST) != host:
            continue
        try:
            pid = int(labels.get(LABEL_OWNER_PID, "0"))
        except ValueError:
            pid = 0
        if pid > 0 and _pid_alive(pid):
            continue
        orphans.append(c.name)
    return orphans


def reap_orphans(client: DockerClient) -> list[str]:
    """Remove sandboxes whose owning process on this host is gone (or that outlived their time-to-live),
    and the names this process could not confirm removed; returns the names removed.

    When the engine cannot list containers (a half-created one makes Podman's listing fail), the
    names this process tracked are removed one by one and the listing is tried once more; if it still
    fails, only those are reaped."""
    removed = _LIVE.retry_unconfirmed() + _reap_noted(client)
    try:
        orphans = orphaned_sandboxes(client)
    except (docker.errors.DockerException, OSError):
        removed += _LIVE.retry_unconfirmed() + _reap_noted(client)
        try:
            orphans = orphaned_sandboxes(client)
        except (docker.errors.DockerException, OSError):
            orphans = []
    for name in orphans:
        if _remove_by_name(client, name) == "removed":
            removed.append(name)
    return list(dict.fromkeys(removed))


def _note_unconfirmed(name: str) -> None:
    try:
        UNCONFIRMED_DIR.mkdir(mode=0o700, exist_ok=True)
        (UNCONFIRMED_DIR / name).touch()
    except OSError:
        pass  # this process still retries it; only a later process would miss it


def _forget_unconfirmed(name: str) -> None:
    try:
        (UNCONFIRMED_DIR / name).unlink(missing_ok=True)
    except OSError:
        pass


def _reap_noted(client: DockerClient) -> list[str]:
    """Remove by name the sandboxes that some process of this user noted as unconfirmed and no longer
    retries itself; a note is dropped once the engine removed the container or has none, and
    `UNCONFIRMED_GRACE_S` has passed since the note was written."""
    mine = set(_LIVE.unconfirmed())
    try:
        notes = [p for p in UNCONFIRMED_DIR.iterdir() if p.name.startswith("worldline-")]
    except OSError:
        return []
    removed: list[str] = []
    for note in notes:
        if note.name in mine:
            continue
        outcome = _remove_by_name(client, note.name)
        if outcome == "removed":
            removed.append(note.name)
        try:
            settled = time.time() - note.stat().st_mtime >= UNCONFIRMED_GRACE_S
        except OSError:
            continue
        if outcome != "failed" and settled:
            _forget_unconfirmed(note.name)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
