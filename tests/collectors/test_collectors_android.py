"""Android domain: the real collector code on a real `uiautomator dump` (the shared fixture) and on a
stand-in at the uiautomator2 API boundary (the same methods the collector calls: dump_hierarchy,
app_current, app_start, app_info, click, long_click, swipe, send_keys, press, window_size, info), with
screens written in the dump format. No device or emulator exists here; docs/collectors.md says how
to run against one."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from uiautomator2.exceptions import AppNotFoundError, ConnectError

from collectors import android
from collectors.android import AndroidEnvironment, parse_hierarchy
from collectors.collection import CollectConfig, collect
from collectors.environment import EnvironmentOptions, Task, TaskError, load_tasks
from collectors.gui_common import EnvFailure
from schemas import Action, ActionKind, TrajectoryStatus, iter_trajectories
from tests.helpers.fakellm import FakeReply, FakeToolCall

# A real `uiautomator dump` of a Pixel launcher (attribution in tests/fixtures/public/SOURCES.md).
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "public" / "uiautomator_window_dump.xml"
EXAMPLES = Path(__file__).resolve().parents[2] / "collectors" / "tasks" / "android_examples.jsonl"
LAUNCHER = "com.google.android.apps.nexuslauncher"
SETTINGS = "com.android.settings"
MESSAGES = "com.google.android.apps.messaging"


def launcher_xml() -> str:
    return FIXTURE.read_text("utf-8")


# -- a stand-in device: screens in the dump format ------------------------------------------------


def node(cls: str, bounds: str, *children: str, package: str = SETTINGS, **attrs: Any) -> str:
    base = {
        "index": "0",
        "text": "",
        "resource-id": "",
        "class": cls,
        "package": package,
        "content-desc": "",
        "checkable": "false",
        "checked": "false",
        "clickable": "false",
        "enabled": "true",
        "focusable": "false",
        "focused": "false",
        "scrollable": "false",
        "long-clickable": "false",
        "password": "false",
        "selected": "false",
        "bounds": bounds,
    }
    for key, value in attrs.items():
        base[key.replace("_", "-")] = str(value).lower() if isinstance(value, bool) else str(value)
    attributes = " ".join(f'{k}="{_escape(v)}"' for k, v in base.items())
    return f"<node {attributes}>{''.join(children)}</node>"


def _escape(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def hierarchy(*children: str) -> str:
    return (
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">"
        + "".join(children)
        + "</hierarchy>"
    )


def settings_item(title: str, summary: str, top: int) -> str:
    return node(
        "android.widget.LinearLayout",
        f"[0,{top}][1080,{top + 180}]",
        node(
            "android.widget.TextView",
            f"[180,{top + 40}][1000,{top + 100}]",
            text=title,
            resource_id="android:id/title",
        ),
        node(
            "android.widget.TextView",
            f"[180,{top + 100}][1000,{top + 150}]",
            text=summary,
            resource_id="android:id/summary",
        ),
        clickable=True,
        focusable=True,
    )


class StandInDevice:
    """A device at the uiautomator2 API boundary: Settings with a search field, a Network page with an
    airplane-mode switch, a launcher (the real fixture dump), and an app that crashes on start."""

    def __init__(self, installed: tuple[str, ...] = (LAUNCHER, SETTINGS, MESSAGES)) -> None:
        self.installed = installed
        self.screen = "launcher"
        self.airplane = False
        self.query = ""
        self.clock = 0
        self.calls: list[tuple[Any, ...]] = []
        self.info = {"productName": "sdk_gphone64_x86_64", "sdkInt": 34, "currentPackageName": LAUNCHER}

    # the uiautomator2 methods the collector uses
    def window_size(self) -> tuple[int, int]:
        return 1080, 1794

    def app_info(self, package: str) -> dict[str, Any]:
        if package not in self.installed:
            raise AppNotFoundError("App not installed")
        return {"versionName": "1.0", "versionCode": 1}

    def app_start(
        self, package: str, activity: str | None = None, wait: bool = False, stop: bool = False
    ) -> None:
        self.calls.append(("app_start", package))
        self.screen = {SETTINGS: "settings", MESSAGES: "crash", LAUNCHER: "launcher"}[package]

    def app_current(self) -> dict[str, str]:
        package, activity = {
            "launcher": (LAUNCHER, ".NexusLauncherActivity"),
            "settings": (SETTINGS, ".Settings"),
            "network": (SETTINGS, ".SubSettings"),
            "crash": ("android", "com.android.server.am.AppErrorDialog"),
        }[self.screen]
        return {"package": package, "activity": activity}

    def dump_hierarchy(self) -> str:
        self.clock += 1  # the status bar clock moves on every dump
        clock = node(
            "android.widget.TextView",
            "[30,10][150,60]",
            package="com.android.systemui",
            text=f"12:{self.clock % 60:02d}",
            resource_id="com.android.systemui:id/clock",
        )
        if self.screen == "launcher":
            return launcher_xml()
        if self.screen == "settings":
            search = node(
                "android.widget.EditText",
                "[40,80][1040,200]",
                text=self.query or "Search settings",
                resource_id="com.android.settings:id/search_src_text",
                focusable=True,
                focused=bool(self.query),
                clickable=True,
            )
            listing = node(
                "androidx.recyclerview.widget.RecyclerView",
                "[0,220][1080,1794]",
                settings_item("Network & internet", "Mobile, Wi‑Fi, hotspot", 220),
                settings_item("Connected devices", "Bluetooth, pairing", 400),
                settings_item("Battery", "85%", 580),
                scrollable=True,
                resource_id="com.android.settings:id/recycler_view",
            )
            return hierarchy(node("android.widget.FrameLayout", "[0,0][1080,1794]", clock, search, listing))
        if self.screen == "network":
            switch = node(
                "android.widget.Switch",
                "[900,260][1040,340]",
                resource_id="android:id/switch_widget",
                checkable=True,
                checked=self.airplane,
                clickable=True,
            )
            row = node(
                "android.widget.LinearLayout",
                "[0,240][1080,360]",
                node(
                    "android.widget.TextView",
                    "[180,260][800,340]",
                    text="Airplane mode",
                    resource_id="android:id/title",
                ),
                switch,
                clickable=True,
            )
            title = node("android.widget.TextView", "[180,80][900,200]", text="Network & internet")
            back = node(
                "android.widget.ImageButton", "[0,80][160,200]", content_desc="Navigate up", clickable=True
            )
            return hierarchy(node("android.widget.FrameLayout", "[0,0][1080,1794]", clock, back, title, row))
        dialog = node(
            "android.widget.FrameLayout",
            "[80,700][1000,1100]",
            node(
                "android.widget.TextView",
                "[140,740][940,820]",
                package="android",
                text="Messages keeps stopping",
                resource_id="android:id/alertTitle",
            ),
            node(
                "android.widget.Button",
                "[140,900][940,980]",
                package="android",
                text="App info",
                resource_id="android:id/aerr_app_info",
                clickable=True,
            ),
            node(
                "android.widget.Button",
                "[140,1000][940,1080]",
                package="android",
                text="Close app",
                resource_id="android:id/aerr_close",
                clickable=True,
            ),
            package="android",
        )
        return hierarchy(dialog)

    def click(self, x: int, y: int) -> None:
        self.calls.append(("click", x, y))
        label = self._label_at(x, y)
        if self.screen == "launcher" and label == "Messages":
            self.screen = "crash"
        elif self.screen == "settings" and label == "Network & internet":
            self.screen = "network"
        elif self.screen == "network" and label in ("Airplane mode", "switch_widget"):
            self.airplane = not self.airplane
        elif self.screen == "network" and label == "Navigate up":
            self.screen = "settings"

    def long_click(self, x: int, y: int, duration: float = 0.5) -> None:
        self.calls.append(("long_click", x, y, duration))

    def swipe(self, fx: int, fy: int, tx: int, ty: int, duration: float | None = None) -> None:
        self.calls.append(("swipe", fx, fy, tx, ty, duration))

    def send_keys(self, text: str, clear: bool = False) -> None:
        self.calls.append(("send_keys", text))
        if self.screen == "settings":
            self.query += text

    def press(self, key: str) -> None:
        self.calls.append(("press", key))
        if key == "back":
            self.screen = {"network": "settings", "settings": "launcher"}.get(self.screen, self.screen)
        elif key == "home":
            self.screen = "launcher"

    def _label_at(self, x: int, y: int) -> str:
        """The text/description/resource id of the deepest labelled node under (x, y)."""
        found = ""
        for element in ET.fromstring(self.dump_hierarchy().encode()).iter("node"):
            x1, y1, x2, y2 = (
                int(v) for v in element.attrib["bounds"].replace("][", ",").strip("[]").split(",")
            )
            if x1 <= x < x2 and y1 <= y < y2:
                a = element.attrib
                found = (
                    a.get("text") or a.get("content-desc") or a.get("resource-id", "").split("/")[-1] or found
                )
        self.clock -= 1  # _label_at's dump is not an observation
        return found


@pytest.fixture
def device() -> StandInDevice:
    return StandInDevice()


@pytest.fixture
def env(device: StandInDevice) -> Iterator[AndroidEnvironment]:
    e = AndroidEnvironment(EnvironmentOptions(), device_factory=lambda serial: device)
    yield e
    e.close()


def act(env: AndroidEnvironment, item: Any) -> Any:
    if isinstance(item, dict):
        return env.step(Action(kind=ActionKind.GUI, text=json.dumps(item)))
    return env.step(Action(kind=ActionKind.COMMAND, text=item))


# -- the real dump --------------------------------------------------------------------------------


def test_real_dump_is_compacted_into_readable_lines() -> None:
    screen = parse_hierarchy(launcher_xml())
    lines = screen.text.splitlines()
    assert any(
        '[14] TextView "Messages" (clickable, long-clickable) [237,1382][439,1548]' in line for line in lines
    )
    assert any('TextView "Chrome" (clickable, long-clickable)' in line for line in lines)
    assert any(
        'ImageView desc="Voice search" id=mic_icon (clickable) [869,1603][1011,1768]' in line
        for line in lines
    )
    assert any('TextView "Fri, Apr 21" id=clock' in line for line in lines)
    assert "      [13] ViewGroup id=hotseat [0,1382][1080,1794]" in lines  # nesting is kept as indentation
    # Layout-only nodes (no text, description, id or state) are folded into their children.
    assert len(lines) == 18 < launcher_xml().count("<node")
    assert screen.crash is None
    chrome = next(n for n in screen.nodes.values() if n.text == "Chrome")
    assert chrome.centre == (742, 1465)


def test_unreadable_dump_is_env_failure() -> None:
    with pytest.raises(EnvFailure, match="unreadable view hierarchy"):
        parse_hierarchy("<hierarchy><node")


@given(st.text(max_size=40), st.text(max_size=40))
def test_any_text_and_description_survive_the_round_trip(text: str, desc: str) -> None:
    text = "".join(ch for ch in text if ch.isprintable())
    desc = "".join(ch for ch in desc if ch.isprintable())
    screen = parse_hierarchy(
        hierarchy(
            node("android.widget.TextView", "[0,0][10,10]", text=text, content_desc=desc, clickable=True)
        )
    )
    (only,) = screen.nodes.values()
    assert (only.text, only.desc) == (text, desc)
    assert len(screen.text.splitlines()) == 1


# -- the stand-in device ----------------------------------------------------------------------------


def test_settings_navigation_by_text_and_element_id(env: AndroidEnvironment, device: StandInDevice) -> None:
    task = Task(id="a", instruction="x", config={"android": {"serial": "emulator-5554", "app": SETTINGS}})
    reset = env.reset(task)
    assert reset.observation.text.startswith("Package: com.android.settings  Activity: .Settings")
    assert '"Network & internet" id=title' in reset.observation.text
    assert "## Device" in reset.initial_state and "sdkInt=34" in reset.initial_state
    assert ("app_start", SETTINGS) in device.calls
    r = act(env, {"action": "tap", "text": "Network & internet"})
    assert "Activity: .SubSettings" in r.observation.text and r.state_changed is True
    assert device.calls[-1] == ("click", 590, 290)  # the centre of the title's bounds
    switch = next(i for i, n in env.screen.nodes.items() if n.cls == "Switch")
    r = act(env, f"tap('{switch}')")
    assert "Switch id=switch_widget (clickable, checked)" in r.observation.text
    assert device.airplane is True and r.state_changed is True
    r = act(env, "back()")
    assert "Activity: .Settings" in r.observation.text
    act(env, {"action": "tap", "resource_id": "search_src_text"})
    r = act(env, "type('wifi')")
    assert '"wifi"' in r.observation.text and ("send_keys", "wifi") in device.calls
    act(env, "swipe('up')")
    assert device.calls[-1] == ("swipe", 540, 1435, 540, 359, 0.3)
    act(env, "swipe(100, 1500, 100, 300, duration=0.5)")
    act(env, "long_press(540, 900)")
    act(env, "enter()")
    r = act(env, "home()")
    assert f"Package: {LAUNCHER}" in r.observation.text
    assert ("press", "enter") in device.calls and ("long_click", 540, 900, 1.0) in device.calls


def test_clock_changes_are_not_state_changes(env: AndroidEnvironment) -> None:
    env.reset(Task(id="c", instruction="x", config={"android": {"app": SETTINGS}}))
    first = env.screen.text
    r = act(env, "wait(0)")
    assert r.observation.text.split("\n", 2)[2] != first  # the status bar clock moved
    assert r.state_changed is False


def test_crashed_app_is_env_failure(env: AndroidEnvironment) -> None:
    env.reset(Task(id="m", instruction="x", config={"android": {}}))  # the launcher, as the device shows it
    r = act(env, {"action": "tap", "text": "Messages"})
    assert r.env_failure == "the app crashed: Messages keeps stopping"
    with pytest.raises(EnvFailure, match="crashed at start: Messages keeps stopping"):
        env.reset(Task(id="m2", instruction="x", config={"android": {"app": MESSAGES}}))


def test_no_false_alarm_on_text_mentioning_a_crash(env: AndroidEnvironment) -> None:
    xml = hierarchy(
        node(
            "android.widget.TextView",
            "[0,0][100,100]",
            text="Chrome keeps stopping",
            package="com.example.forum",
        )
    )
    assert parse_hierarchy(xml).crash is None  # a forum post, not the system's dialog


def test_missing_app_missing_device_and_lost_device() -> None:
    env = AndroidEnvironment(
        EnvironmentOptions(), device_factory=lambda s: StandInDevice(installed=(LAUNCHER,))
    )
    with pytest.raises(EnvFailure, match="com.android.settings is not installed"):
        env.reset(Task(id="n", instruction="x", config={"android": {"app": SETTINGS}}))

    def no_device(serial: str | None) -> Any:
        raise ConnectError(f"device {serial} not found")

    with pytest.raises(EnvFailure, match="no Android device at emulator-5556"):
        AndroidEnvironment(EnvironmentOptions(), device_factory=no_device).reset(
            Task(id="d", instruction="x", config={"android": {"serial": "emulator-5556"}})
        )
    flaky = StandInDevice()
    env = AndroidEnvironment(EnvironmentOptions(), device_factory=lambda s: flaky)
    env.reset(Task(id="l", instruction="x", config={"android": {"app": SETTINGS}}))

    def gone() -> str:
        raise ConnectError("device offline")

    flaky.dump_hierarchy = gone  # type: ignore[method-assign]
    r = act(env, "back()")
    assert r.env_failure and "device offline" in r.env_failure and r.observation.is_error


def test_bad_input_is_an_error_observation(env: AndroidEnvironment) -> None:
    env.reset(Task(id="b", instruction="x", config={"android": {"app": SETTINGS}}))
    for bad, expected in [
        ("tap('99')", "no element [99]"),
        ("tap()", "give x and y"),
        ({"action": "tap", "text": "Nope"}, "no element with text='Nope'"),
        ("swipe('sideways')", "up, down, left or right"),
        ("open_app('not a package')", "not a package name"),
        ("reboot()", "unknown android action"),
        ("tap(", "not a call expression"),
        ("exec('import os')", "unknown android action"),
        ("tap(x='left', y=3)", "bad arguments"),
        ("wait({})", "bad arguments"),
    ]:
        r = act(env, bad)
        assert r.observation.is_error is True and expected in r.observation.text, (
            bad,
            r.observation.text[:300],
        )
        assert r.env_failure is None and r.state_changed is False
    r = act(env, "open_app('com.example.absent')")
    assert r.env_failure == "the app com.example.absent is not installed on the device"


def test_validate_task_and_doctor_reports_devices() -> None:
    with pytest.raises(TaskError, match=r"id v\).*android\.app"):
        AndroidEnvironment.validate_task(
            Task(id="v", instruction="x", config={"android": {"app": "settings"}})
        )
    with pytest.raises(TaskError, match=r"id s\).*setup configure a container sandbox"):
        AndroidEnvironment.validate_task(
            Task(id="s", instruction="x", setup=["adb reboot"], config={"android": {}})
        )
    for task in load_tasks(EXAMPLES):
        AndroidEnvironment.validate_task(task)
    checks = {c.name: c for c in AndroidEnvironment.doctor_checks()}
    assert checks["uiautomator2 importable"].ok
    devices = checks["connected devices (adb)"]
    assert devices.ok is False and devices.required is False and "adb connect" in devices.fix  # none here


def test_collect_android_examples_scripted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(android, "connect_device", lambda serial: StandInDevice())
    collect(CollectConfig(env="android", tasks_path=EXAMPLES, policy="scripted", out=tmp_path / "out"))
    by_id = {t.metadata["task_id"]: t for t in iter_trajectories(tmp_path / "out")}
    network = by_id["android-settings-network"]
    assert network.status == TrajectoryStatus.COMPLETE
    assert network.initial_state and "## Screen" in network.initial_state
    assert [t.state_changed for t in network.turns] == [True, True, True, True]
    assert by_id["android-launcher-crash"].status == TrajectoryStatus.ENV_FAILURE
    assert by_id["android-missing-app"].status == TrajectoryStatus.ENV_FAILURE


def test_collect_android_openai_policy(
    tmp_path: Path, fake_llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(android, "connect_device", lambda serial: StandInDevice())
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(
        json.dumps({"id": "llm", "instruction": "open network", "android": {"app": SETTINGS}}) + "\n"
    )
    fake_llm.script(
        FakeReply(text="", tool_calls=[FakeToolCall("tap", {"x": 590, "y": 290})]),
        FakeReply(text="", tool_calls=[FakeToolCall("back", {})]),
        FakeReply(text="Done."),
    )
    collect(
        CollectConfig(
            env="android",
            tasks_path=tasks,
            policy="openai",
            out=tmp_path / "out",
            llm_config=fake_llm.config(),
        )
    )
    (trajectory,) = list(iter_trajectories(tmp_path / "out"))
    assert [t.action.text for t in trajectory.turns] == ["tap(x=590, y=290)", "back()"]
    assert "Airplane mode" in trajectory.turns[0].observation.text
    assert {"tap", "swipe", "type", "open_app"} <= {
        t["function"]["name"] for t in fake_llm.requests[0].body["tools"]
    }


def test_worldline_collect_env_android_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from worldline.cli import app

    monkeypatch.setattr(android, "connect_device", lambda serial: StandInDevice())
    out = tmp_path / "out"
    argv = ["collect", "--env", "android", "--tasks", str(EXAMPLES), "--out", str(out), "--no-progress"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert "complete=2" in result.output and "env_failure=2" in result.output
    assert len(list(iter_trajectories(out))) == 4
