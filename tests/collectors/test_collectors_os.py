"""OS domain on a real desktop in a real sandbox: worldline/desktop on the container engine, Xvfb +
D-Bus + AT-SPI started inside it by the helper, real gedit and gnome-calculator, pyautogui-style
actions through xdotool, the AT-SPI tree read by the helper in JSON lines; state_changed, a missing and
a crashed application, bad input, and `collect --env os` with both policies."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from docker import DockerClient

from collectors import engine
from collectors.collection import CollectConfig, collect
from collectors.environment import EnvironmentOptions, Task, TaskError, load_tasks
from collectors.gui_common import ActionSyntaxError, EnvFailure
from collectors.os_desktop import DESKTOP_IMAGE, DesktopEnvironment, DesktopSession, render_tree, xdotool_key
from collectors.sandbox import SandboxLimits
from schemas import Action, ActionKind, TrajectoryStatus, iter_trajectories
from tests.helpers.fakellm import FakeReply, FakeToolCall

EXAMPLES = Path(__file__).resolve().parents[2] / "collectors" / "tasks" / "os_examples.jsonl"


@pytest.fixture(scope="module")
def engine_client() -> DockerClient:
    # No skip: `make setup` provisions the engine and worldline/desktop, so their absence is a failure.
    return engine.connect()


@pytest.fixture
def os_env(engine_client: DockerClient) -> Iterator[DesktopEnvironment]:
    env = DesktopEnvironment(EnvironmentOptions(client=engine_client))
    yield env
    env.close()


def act(env: DesktopEnvironment, item: Any) -> Any:
    if isinstance(item, dict):
        return env.step(Action(kind=ActionKind.GUI, text=json.dumps(item)))
    return env.step(Action(kind=ActionKind.CODE, text=item))


def sandbox_text(env: DesktopEnvironment, path: str) -> str:
    """A file of the desktop's sandbox (where the task's documents live), or "" when it is missing."""
    assert env.session is not None
    result = env.session.sandbox.exec(["cat", path])
    return result.output if result.exit_code == 0 else ""


def wait_for_file(env: DesktopEnvironment, path: str, content: str) -> str:
    deadline = time.monotonic() + 5
    while (text := sandbox_text(env, path)) != content and time.monotonic() < deadline:
        time.sleep(0.1)
    return text


def container_gone(client: DockerClient, name: str) -> bool:
    try:
        client.containers.get(name)
    except docker.errors.NotFound:
        return True
    return False


@pytest.mark.engine
def test_gedit_typing_menu_and_dialog_are_reflected_in_the_tree(os_env: DesktopEnvironment) -> None:
    task = Task(
        id="g",
        instruction="x",
        files={"notes.txt": "first line\n"},
        config={"os": {"apps": [["gedit", "notes.txt"]]}},
    )
    reset = os_env.reset(task)
    assert 'frame "notes.txt (~) - gedit" (active)' in reset.observation.text
    assert 'value="first line"' in reset.observation.text
    assert "## Running applications" in reset.initial_state and "gedit" in reset.initial_state
    assert "~/notes.txt" in reset.initial_state
    r = act(os_env, "typewrite('hello world')")
    assert 'value="hello worldfirst line"' in r.observation.text and r.state_changed is True
    assert 'frame "*notes.txt (~) - gedit"' in r.observation.text  # the title marks unsaved changes
    r = act(os_env, "pyautogui.hotkey('ctrl', 's')")
    assert 'frame "notes.txt (~) - gedit"' in r.observation.text
    # The document lives in the sandbox's /work, the desktop's home.
    assert wait_for_file(os_env, "/work/notes.txt", "hello worldfirst line\n") == "hello worldfirst line\n"
    # The menu by role and name: the popover's items appear in the tree, then a dialog opens.
    r = act(os_env, {"action": "click", "role": "toggle button", "name": "Menu"})
    assert 'push button "Save As…"' in r.observation.text
    r = act(os_env, {"action": "click", "role": "push button", "name": "Save As…"})
    assert 'gedit: file chooser "Save As"' in r.observation.text.splitlines()[0]
    act(os_env, "hotkey('ctrl', 'a')")
    act(os_env, "typewrite('copy.txt')")
    r = act(os_env, "press('enter')")
    assert wait_for_file(os_env, "/work/copy.txt", "hello worldfirst line\n") == "hello worldfirst line\n"
    for _ in range(10):  # the title follows the save once gedit has written the file
        r = act(os_env, "wait(0.3)")
        if 'frame "copy.txt (~) - gedit"' in r.observation.text:
            break
    assert 'frame "copy.txt (~) - gedit"' in r.observation.text


@pytest.mark.engine
def test_calculator_keyboard_and_element_clicks(os_env: DesktopEnvironment) -> None:
    first = os_env.reset(
        Task(id="c", instruction="x", config={"os": {"apps": ["gnome-calculator"]}})
    ).observation.text
    assert 'frame "Calculator"' in first and "GtkScrollbar" not in first
    act(os_env, "typewrite('12*7')")
    r = act(os_env, "press('enter')")
    assert 'label "84"' in r.observation.text or 'value="84"' in r.observation.text
    # Click the "9" key at its centre by element id from the tree.
    element = next(
        i for i, n in os_env.elements.items() if n["role"] == "push button" and n["name"].startswith("9")
    )
    r = act(os_env, f"click('{element}')")
    assert 'value="9"' in r.observation.text or 'value="849"' in r.observation.text


@pytest.mark.engine
def test_bad_input_missing_element_and_no_change(os_env: DesktopEnvironment) -> None:
    os_env.reset(Task(id="b", instruction="x", config={"os": {"apps": ["gedit"]}}))
    r = act(os_env, "wait(0.2)")
    assert r.state_changed is False and r.observation.is_error is None
    for bad, expected in [
        ("click(5000, 10)", "off the 1280x800 screen"),
        ("import os", "not a call expression"),
        ("hotkey()", "needs keys"),
        ("click('999')", "no element [999]"),
        (
            {"action": "click", "role": "menu item", "name": "No such item"},
            "no element with role='menu item'",
        ),
        ("press('nosuchkey!')", "unknown key"),
        ("os.system('touch /tmp/pwned-by-os-action')", "unknown call prefix"),
        ("launch_rockets()", "unknown os action"),
        ("click(x='left', y=3)", "bad arguments"),
        ("wait([1])", "bad arguments"),
    ]:
        r = act(os_env, bad)
        assert r.observation.is_error is True and expected in r.observation.text, (
            bad,
            r.observation.text[:300],
        )
        assert r.state_changed is False and r.env_failure is None
    assert sandbox_text(os_env, "/tmp/pwned-by-os-action") == ""
    r = act(os_env, "typewrite('still alive')")
    assert 'value="still alive"' in r.observation.text and r.observation.is_error is None


@pytest.mark.engine
def test_crashed_app_is_env_failure_and_close_removes_the_sandbox(
    os_env: DesktopEnvironment, engine_client: DockerClient
) -> None:
    os_env.reset(Task(id="k", instruction="x", config={"os": {"apps": ["gedit"]}}))
    session = os_env.session
    assert session is not None
    name = session.sandbox.name
    killed = session.sandbox.exec(["kill", "-9", str(session.apps[0].pid)])
    assert killed.exit_code == 0, killed.output
    r = act(os_env, "typewrite('x')")
    assert r.env_failure and "gedit was killed by signal 9" in r.env_failure
    os_env.close()
    assert container_gone(engine_client, name)


@pytest.mark.engine
def test_missing_app_is_env_failure(os_env: DesktopEnvironment, engine_client: DockerClient) -> None:
    with pytest.raises(EnvFailure, match="'no-such-editor' is not installed in the desktop image"):
        os_env.reset(Task(id="m", instruction="x", config={"os": {"apps": ["no-such-editor"]}}))
    session = os_env.session  # the half-started desktop is still ours to stop
    assert session is not None and session.display
    name = session.sandbox.name
    os_env.close()
    assert container_gone(engine_client, name)


def test_validate_task_and_doctor() -> None:
    with pytest.raises(TaskError, match=r"id o1\).*os\.apps"):
        DesktopEnvironment.validate_task(Task(id="o1", instruction="x", config={"os": {"apps": "gedit"}}))
    with pytest.raises(TaskError, match="configure another domain"):
        DesktopEnvironment.validate_task(Task(id="o2", instruction="x", config={"web": {"start_url": "x"}}))
    for task in load_tasks(EXAMPLES):
        DesktopEnvironment.validate_task(task)
    with pytest.raises(TaskError, match=r"id o3\).*'network'.*no network"):
        DesktopEnvironment.validate_task(
            Task(id="o3", instruction="x", network=True, config={"os": {"apps": ["gedit"]}})
        )
    with pytest.raises(TaskError, match=r"id o4\).*unknown key\(s\) swap"):
        DesktopEnvironment.validate_task(
            Task(id="o4", instruction="x", limits={"swap": 1}, config={"os": {"apps": ["gedit"]}})
        )
    assert DesktopEnvironment.needs_engine()
    (check,) = DesktopEnvironment.doctor_checks()
    assert check.name.startswith(f"image {DESKTOP_IMAGE}") and check.ok, check.detail


def test_render_tree_folds_layout_containers_and_keys_map() -> None:
    nodes = [
        {
            "depth": 0,
            "path": [0],
            "role": "frame",
            "name": "W",
            "states": ["active"],
            "bounds": [0, 0, 100, 50],
        },
        {"depth": 1, "path": [0, 0], "role": "panel", "name": "", "states": []},
        {"depth": 2, "path": [0, 0, 0], "role": "filler", "name": "GtkBox", "states": []},
        {
            "depth": 3,
            "path": [0, 0, 0, 0],
            "role": "push button",
            "name": "OK",
            "states": [],
            "bounds": [10, 10, 20, 10],
        },
        {"depth": 1, "path": [0, 1], "role": "text", "name": "", "states": ["focused"], "value": "hi"},
    ]
    text, by_id = render_tree(nodes)
    assert text.splitlines() == [
        '[1] frame "W" (active) @0,0 100x50',
        '  [2] push button "OK" @10,10 20x10',
        '  [3] text (focused) value="hi"',
    ]
    assert by_id["2"]["path"] == [0, 0, 0, 0]
    assert [xdotool_key(k) for k in ("enter", "ctrl", "a", "F5", "pagedown", "Return")] == [
        "Return",
        "ctrl",
        "a",
        "F5",
        "Next",
        "Return",
    ]
    with pytest.raises(ActionSyntaxError):
        xdotool_key("not a key!")


@pytest.mark.engine
def test_two_sessions_are_two_sandboxes(engine_client: DockerClient) -> None:
    one = DesktopSession.open(engine_client, SandboxLimits())
    two = DesktopSession.open(engine_client, SandboxLimits())
    try:
        assert one.sandbox.name != two.sandbox.name and one.sandbox.image == DESKTOP_IMAGE
        app = one.launch(["gedit"])
        assert any(a.get("pid") == app.pid and a.get("windows") for a in one.atspi("apps")["apps"])
        assert not any(a.get("windows") for a in two.atspi("apps")["apps"])  # the other bus has no gedit
    finally:
        one.close()
        two.close()
    assert container_gone(engine_client, one.sandbox.name) and container_gone(engine_client, two.sandbox.name)


@pytest.mark.engine
@pytest.mark.slow
def test_collect_os_examples_scripted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    collect(CollectConfig(env="os", tasks_path=EXAMPLES, policy="scripted", out=out))
    by_id = {t.metadata["task_id"]: t for t in iter_trajectories(out)}
    saved = by_id["os-gedit-type-save"]
    assert saved.status == TrajectoryStatus.COMPLETE, saved.status_reason
    assert 'value="Hello from worldline\\nshopping: coffee, milk"' in saved.turns[1].observation.text
    assert saved.initial_state and "## Running applications" in saved.initial_state
    assert [t.state_changed for t in saved.turns][:2] == [True, True]
    menu = by_id["os-gedit-menu-save-as"]
    assert menu.status == TrajectoryStatus.COMPLETE, menu.status_reason
    assert 'file chooser "Save As"' in menu.turns[2].observation.text
    assert 'frame "report.txt (~) - gedit"' in menu.turns[-1].observation.text
    assert "84" in by_id["os-calculator"].turns[-1].observation.text
    missing = by_id["os-missing-app"]
    assert missing.status == TrajectoryStatus.ENV_FAILURE and "not installed" in (missing.status_reason or "")
    bad = by_id["os-bad-input"]
    assert bad.status == TrajectoryStatus.COMPLETE
    assert [t.observation.is_error for t in bad.turns] == [True] * 6 + [None]


@pytest.mark.engine
def test_collect_os_openai_policy(tmp_path: Path, fake_llm: Any) -> None:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"id": "llm", "instruction": "type hi", "os": {"apps": ["gedit"]}}) + "\n")
    fake_llm.script(
        FakeReply(text="", tool_calls=[FakeToolCall("typewrite", {"message": "hi there"})]),
        FakeReply(text="", tool_calls=[FakeToolCall("hotkey", {"keys": ["ctrl", "a"]})]),
        FakeReply(text="Typed it."),
    )
    collect(
        CollectConfig(
            env="os", tasks_path=tasks, policy="openai", out=tmp_path / "out", llm_config=fake_llm.config()
        )
    )
    (trajectory,) = list(iter_trajectories(tmp_path / "out"))
    assert trajectory.status == TrajectoryStatus.COMPLETE
    assert [t.action.text for t in trajectory.turns] == [
        "typewrite(message='hi there')",
        "hotkey(keys=['ctrl', 'a'])",
    ]
    assert 'value="hi there"' in trajectory.turns[0].observation.text
    tools = {t["function"]["name"] for t in fake_llm.requests[0].body["tools"]}
    assert {"click", "typewrite", "hotkey", "scroll", "dragTo", "wait", "done"} <= tools
