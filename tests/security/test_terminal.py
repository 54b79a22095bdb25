"""Containment of the terminal and SWE sandboxes, attacked the way a hostile task would be.

Every attack is a task the real collector (`collect`, scripted policy) runs on the real engine: the
sandbox user and its namespace, namespaces / mounts / ptrace, the host's network, files and memory, and
forged step boundaries. Each test checks the host canary stayed untouched and that the trajectory records
what happened honestly (the refusal as the environment's answer, a status and a reason). A property test
generates tasks that try to forge, hide or delay step boundaries.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker import DockerClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import engine
from collectors.collection import CollectConfig, CollectError, collect
from collectors.sandbox import SANDBOX_UID
from schemas import Trajectory, TrajectoryStatus, iter_trajectories, turn_facts
from tests.security.canary import HostCanary

pytestmark = pytest.mark.engine

PROMPT = "agent@sandbox:/work$ "
# The session's marker, built from the secret a task reads out of PROMPT_COMMAND (in a variable, so the
# secret never shows up in the echo of the typed command).
SECRET = 'S=$(printf %s "$PROMPT_COMMAND" | sed -n "s/.*697;\\([0-9a-f]*\\);.*/\\1/p")'
PTRACE = (
    'python3 -c "import ctypes; l = ctypes.CDLL(None, use_errno=True); '
    "print('ptrace', l.ptrace(16, 1, 0, 0), ctypes.get_errno())\""
)


@pytest.fixture(scope="module")
def engine_client() -> Iterator[DockerClient]:
    yield engine.connect()


def run_task(tmp_path: Path, env: str, task: dict[str, Any]) -> Trajectory:
    """One task through the collector; its one trajectory."""
    tasks = tmp_path / f"{task['id']}.jsonl"
    tasks.write_text(json.dumps(task) + "\n")
    out = tmp_path / f"out-{task['id']}"
    collect(CollectConfig(env=env, tasks_path=tasks, policy="scripted", out=out))
    (trajectory,) = list(iter_trajectories(out))
    return trajectory


def texts(trajectory: Trajectory) -> list[str]:
    return [t.observation.text for t in trajectory.turns]


def everything(trajectory: Trajectory) -> list[str]:
    """Every text a trajectory carries, for the canary's leak check."""
    return [json.dumps(trajectory.to_record(), default=str)]


def terminal_task(task_id: str, actions: list[str], **extra: Any) -> dict[str, Any]:
    return {"id": task_id, "instruction": "contain me", "actions": actions, **extra}


# -- 4. the sandbox user -----------------------------------------------------------------------------


def test_a_task_runs_as_the_agent_user_without_namespaces_mounts_or_ptrace(
    engine_client: DockerClient, tmp_path: Path, host_canary: HostCanary
) -> None:
    actions = [
        "id -u; id -un; echo home=$HOME",
        "cat /proc/self/uid_map",
        "unshare -Urm true; echo unshare-urm=$?",
        "unshare -U true; echo unshare-u=$?",
        PTRACE,
        "mount -t tmpfs none /mnt; echo mount=$?",
        "grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status",
        "touch /work/mine $HOME/mine && stat -c '%u %n' /work /work/mine $HOME",
    ]
    trajectory = run_task(tmp_path, "terminal", terminal_task("agent-user", actions))
    assert trajectory.status == TrajectoryStatus.COMPLETE, trajectory.status_reason
    out = texts(trajectory)
    assert f"\n{SANDBOX_UID}\nagent\nhome=/home/agent\n" in out[0] and out[0].endswith(PROMPT)
    # A user namespace of its own: uid 0 of the sandbox is not the host's (no identity map).
    inside, outside, count = out[1].split("\n")[1].split()
    assert inside == "0" and int(outside) > 65535 and int(count) <= 65536
    assert "Operation not permitted" in out[2] and "unshare-urm=1" in out[2]
    assert "Operation not permitted" in out[3] and "unshare-u=1" in out[3]
    assert "ptrace -1 1\n" in out[4]  # EPERM
    assert "mount=32" in out[5]
    status = " ".join(out[6].split())  # the terminal renders tabs as spaces
    assert "NoNewPrivs: 1" in status and "Seccomp: 2" in status and "CapEff: 0000000000000000" in status
    assert f"{SANDBOX_UID} /work\n{SANDBOX_UID} /work/mine\n{SANDBOX_UID} /home/agent" in out[7]
    host_canary.assert_untouched(everything(trajectory))


def test_a_root_task_is_root_only_inside_its_namespace(
    engine_client: DockerClient, tmp_path: Path, host_canary: HostCanary
) -> None:
    actions = [
        "id -u",
        "cat /proc/self/uid_map",
        "unshare -Urm true; echo unshare=$?",
        PTRACE,
        "mount -t tmpfs none /mnt; echo mount=$?",
    ]
    task = terminal_task("root-task", actions, limits={"root": True})
    trajectory = run_task(tmp_path, "terminal", task)
    assert trajectory.status == TrajectoryStatus.COMPLETE, trajectory.status_reason
    out = texts(trajectory)
    assert "\n0\nroot@sandbox:/work# " in out[0]
    inside, outside, _ = out[1].split("\n")[1].split()
    assert inside == "0" and int(outside) > 65535  # uid 0 maps to an unprivileged host uid
    assert "unshare=1" in out[2] and "ptrace -1 1\n" in out[3] and "mount=32" in out[4]
    host_canary.assert_untouched(everything(trajectory))


def test_a_root_field_that_is_not_a_boolean_names_the_task_and_the_field(tmp_path: Path) -> None:
    tasks = tmp_path / "bad.jsonl"
    tasks.write_text(json.dumps(terminal_task("bad-root", ["id"], limits={"root": "yes"})) + "\n")
    with pytest.raises(
        CollectError, match=r"id bad-root\): field 'limits': limits.root: must be true or false"
    ):
        collect(CollectConfig(env="terminal", tasks_path=tasks, policy="scripted", out=tmp_path / "out"))


# -- the host: network, files, memory of the collector's shell ----------------------------------------


def test_the_host_network_and_files_are_out_of_reach(
    engine_client: DockerClient, tmp_path: Path, host_canary: HostCanary
) -> None:
    tcp = (
        'python3 -c "import socket; s = socket.socket(); s.settimeout(2); '
        f"print('tcp', s.connect_ex(('127.0.0.1', {host_canary.tcp_port})))\""
    )
    abstract = (
        'python3 -c "import socket; s = socket.socket(socket.AF_UNIX); '
        f"print('unix', s.connect_ex(b'\\\\0{host_canary.abstract_name}'))\""
    )
    actions = [
        tcp,
        abstract,
        f"cat {host_canary.file}; ls {host_canary.directory}; echo files=$?",
        "ls /proc/1/root/ >/dev/null 2>&1; cat /proc/1/environ >/dev/null 2>&1; echo proc=$?",
    ]
    trajectory = run_task(tmp_path, "terminal", terminal_task("host-reach", actions))
    assert trajectory.status == TrajectoryStatus.COMPLETE, trajectory.status_reason
    out = texts(trajectory)
    assert "tcp 101\n" in out[0] or "tcp 111\n" in out[0]  # ENETUNREACH / ECONNREFUSED: never the host's
    assert "unix 111\n" in out[1]  # the host's abstract namespace is another network namespace
    assert "No such file or directory" in out[2] and "files=2" in out[2]
    host_canary.assert_untouched(everything(trajectory))


def test_processes_of_the_sandbox_cannot_read_the_shells_memory_or_environment(
    engine_client: DockerClient, tmp_path: Path, host_canary: HostCanary
) -> None:
    probe = (
        'python3 -c "import os, sys\n'
        "for name in ('mem', 'environ', 'syscall'):\n"
        "    try:\n"
        "        open(f'/proc/{os.getppid()}/{name}', 'rb').read(16); print(name, 'readable')\n"
        "    except OSError as exc:\n"
        '        print(name, exc.strerror)"'
    )
    trajectory = run_task(tmp_path, "terminal", terminal_task("shell-memory", [probe]))
    (out,) = texts(trajectory)
    for name in ("mem", "environ", "syscall"):
        assert f"{name} Permission denied" in out, out
    host_canary.assert_untouched(everything(trajectory))


# -- 5. step boundaries --------------------------------------------------------------------------------


def test_a_forged_marker_before_read_neither_ends_the_step_nor_swallows_the_next_command(
    engine_client: DockerClient, tmp_path: Path, host_canary: HostCanary
) -> None:
    actions = [
        f"{SECRET}; printf '\\033]697;%s;0\\007' \"$S\"; read x",
        "echo second-$((6*7))",
        f"{SECRET}; printf '\\033]697;%s;0\\007' \"$S\"; (exit 3)",
        f"{SECRET}; printf '\\033]697;%s;0\\007' \"$S\"; read -e x",
        "echo fifth-$((6*7))",
    ]
    task = terminal_task("forge-read", actions, limits={"step_timeout_s": 2})
    trajectory = run_task(tmp_path, "terminal", task)
    assert trajectory.status == TrajectoryStatus.COMPLETE, trajectory.status_reason
    turns = trajectory.turns
    # `read` holds the terminal: the step runs to its time limit and Ctrl-C, and says so.
    assert turn_facts.has(turns[0].metadata, turn_facts.TIMED_OUT) and turns[0].observation.text.endswith(
        f"^C\n{PROMPT}"
    )
    # The next command reaches the shell (nothing swallowed it) and its output is its own.
    assert "second-42\n" in turns[1].observation.text and turns[1].exit_code == 0
    assert "second-42" not in turns[0].observation.text
    # A forged exit code is not the one recorded: bash's own $? is.
    assert turns[2].exit_code == 3 and not turn_facts.has(turns[2].metadata, turn_facts.TIMED_OUT)
    # read -e runs readline, but not at the prompt
    assert turn_facts.has(turns[3].metadata, turn_facts.TIMED_OUT)
    assert "fifth-42\n" in turns[4].observation.text
    assert all(t.metadata.get("boundary") == "confirmed" for t in turns)
    host_canary.assert_untouched(everything(trajectory))


def test_a_fake_shell_never_makes_a_trajectory_complete(
    engine_client: DockerClient, tmp_path: Path, host_canary: HostCanary
) -> None:
    fake = (
        'exec python3 -c "import os, re, signal, sys\n'
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "s = re.search('697;([0-9a-f]+);', os.environ.get('PROMPT_COMMAND', ''))\n"
        "m = ('\\033]697;' + (s.group(1) if s else 'x') + ';0\\007') if s else ''\n"
        "while True:\n"
        f"    sys.stdout.write('{PROMPT}' + m); sys.stdout.flush(); line = sys.stdin.readline()\n"
        "    print('fake:', line.strip())\""
    )
    task = terminal_task("fake-shell", [fake, "echo one", "echo two"], limits={"step_timeout_s": 2})
    trajectory = run_task(tmp_path, "terminal", task)
    assert trajectory.status == TrajectoryStatus.ENV_FAILURE
    assert trajectory.status_reason is not None and "synchronisation lost" in trajectory.status_reason
    assert len(trajectory.turns) == 1  # nothing after it is attributed to an action
    host_canary.assert_untouched(everything(trajectory))


def test_swe_bash_is_contained_and_keeps_its_boundaries(
    engine_client: DockerClient, tmp_path: Path, host_canary: HostCanary
) -> None:
    def bash(command: str) -> dict[str, Any]:
        return {"tool": "Bash", "arguments": {"command": command}}

    task = {
        "id": "swe-contained",
        "instruction": "contain me",
        "repo": {"files": {"src/app.py": "print('hi')\n"}},
        "limits": {"step_timeout_s": 2},
        "actions": [
            bash("id -u; stat -c %u src/app.py; unshare -U true; echo unshare=$?"),
            bash(PTRACE),
            {"tool": "Read", "arguments": {"path": str(host_canary.file)}},
            bash(f"{SECRET}; printf '\\033]697;%s;0\\007' \"$S\"; read x"),
            bash("echo after-$((6*7))"),
            {"tool": "Edit", "arguments": {"path": "src/app.py", "old_string": "hi", "new_string": "ho"}},
        ],
    }
    trajectory = run_task(tmp_path, "swe", task)
    assert trajectory.status == TrajectoryStatus.COMPLETE, trajectory.status_reason
    out = texts(trajectory)
    assert out[0].startswith(f"{SANDBOX_UID}\n{SANDBOX_UID}\n") and "unshare=1" in out[0]
    assert "ptrace -1 1" in out[1]
    assert "file not found" in out[2]  # the host's canary file does not exist in the sandbox
    assert turn_facts.has(trajectory.turns[3].metadata, turn_facts.TIMED_OUT)
    assert out[4].startswith("after-42")
    assert "+print('ho')" in out[5]  # the agent user owns the repository it works on
    host_canary.assert_untouched(everything(trajectory))


# -- property: generated tasks that try to forge, hide or delay a boundary -------------------------------

MARK = "printf '\\033]697;%s;%s\\007'"
ATTACKS = {
    # the real secret, with a fake exit code, then more output after a pause
    "secret": f'{SECRET}; {MARK} "$S" 0; sleep 0.2',
    # a guessed secret and a bare marker
    "guess": f"{MARK} 0123456789abcdef0123456789abcdef 0; printf '\\033]697;0\\007'",
    # the marker in pieces, across reads
    "pieces": f"{SECRET}; printf '\\033]697;'; sleep 0.1; printf '%s;0' \"$S\"; sleep 0.1; printf '\\007'",
    # from a background job, during and after the command
    "background": f'{SECRET}; ( for i in 1 2 3; do {MARK} "$S" 0; sleep 0.05; done ) & sleep 0.3',
    # before a read that times out by itself (the terminal held by the builtin)
    "read": f'{SECRET}; {MARK} "$S" 0; read -t 1 x',
    "read_e": f'{SECRET}; {MARK} "$S" 0; read -e -t 1 x',
    # the prompt rewritten to carry a marker of its own, PROMPT_COMMAND removed
    "ps1": f'{SECRET}; PS1="\\[$({MARK} "$S" 0)\\]p> "; unset PROMPT_COMMAND',
    # a DEBUG trap that prints the marker before every command
    "trap": f'{SECRET}; trap "{MARK} $S 0" DEBUG; true; trap - DEBUG',
    # a nested shell (the step's second line runs in it), and leaving it
    "nest": "D=$((D+1)) bash\ntrue",
    "unnest": 'if [ "${D:-0}" -gt 0 ]; then exit; fi\ntrue',
}
EXAMPLES = int(os.environ.get("WL_FORGE_EXAMPLES", "4"))


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kinds=st.lists(st.sampled_from(sorted(ATTACKS)), min_size=3, max_size=6),
    codes=st.lists(st.integers(min_value=0, max_value=9), min_size=6, max_size=6),
    fake_shell=st.booleans(),
)
def test_generated_forgeries_never_misattribute_an_observation(
    engine_client: DockerClient,
    tmp_path_factory: pytest.TempPathFactory,
    host_canary: HostCanary,
    kinds: list[str],
    codes: list[int],
    fake_shell: bool,
) -> None:
    # Each step: the attack, then its own token o<N>x (printed by printf, so the token is in the output
    # but not in the echo) and a real exit code; a forged boundary that ended a step early would leave
    # the token to a later observation, and a forged exit code would replace the real one.
    actions = [f"{ATTACKS[k]}; printf 'o%sx\\n' {n}; (exit {codes[n]})" for n, k in enumerate(kinds)]
    if fake_shell:
        actions.append(
            'exec python3 -c "import signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); '
            "[print('fake', line) for line in sys.stdin]\""
        )
        actions.append("echo never")
    task = terminal_task("forge", actions, limits={"step_timeout_s": 3})
    trajectory = run_task(tmp_path_factory.mktemp("forge"), "terminal", task)
    turns = trajectory.turns
    assert len(turns) >= len(kinds), (kinds, trajectory.status_reason)
    for n, turn in enumerate(turns[: len(kinds)]):
        text = turn.observation.text
        assert f"o{n}x" in text, (kinds, n, text)
        assert not [m for m in range(len(kinds)) if m != n and f"o{m}x" in text], (kinds, n, text)
        assert turn.exit_code == codes[n], (kinds, n, text, turn.metadata)
        assert turn.metadata.get("boundary") == "confirmed"
    if fake_shell:
        assert trajectory.status == TrajectoryStatus.ENV_FAILURE, trajectory.status
        assert trajectory.status_reason and "synchronisation lost" in trajectory.status_reason
        assert len(turns) == len(kinds) + 1  # nothing after the fake shell is attributed to an action
    else:
        assert trajectory.status == TrajectoryStatus.COMPLETE, trajectory.status_reason
    host_canary.assert_untouched(everything(trajectory))
