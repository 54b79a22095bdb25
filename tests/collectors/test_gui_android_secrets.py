"""Android password fields (hierarchy nodes with password="true") never show their value: the
observation draws one bullet per character, as Android's PasswordTransformationMethod does, whatever
the dump holds. A TextView hands uiautomator the bullets it draws; custom views and the "speak
passwords" accessibility setting hand it the clear text, which the collector masks all the same.

The screens are the real `uiautomator dump` of a Pixel launcher (tests/fixtures/public/, attribution in
SOURCES.md) with one node edited into a password field: no public dump with a password field is in the
fixtures, so a copy of the real one is changed in memory, the search bar's Google icon node turned into
an EditText with password="true" and the text a user typed. Everything else is the real dump."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from collectors.android import PASSWORD_MASK, AndroidEnvironment, parse_hierarchy, shown_text
from collectors.environment import EnvironmentOptions, Task
from schemas import Action, ActionKind

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "public" / "uiautomator_window_dump.xml"
LAUNCHER = "com.google.android.apps.nexuslauncher"
FIELD_ID = f"{LAUNCHER}:id/g_icon"


def with_password_field(text: str, **attrs: str) -> str:
    """The real dump with its g_icon node edited into a password field holding `text`."""
    root = ET.fromstring(FIXTURE.read_bytes())
    (field,) = [n for n in root.iter("node") if n.get("resource-id") == FIELD_ID]
    field.set("class", "android.widget.EditText")
    field.set("text", text)
    field.set("password", "true")
    field.set("focusable", "true")
    field.set("clickable", "true")
    for key, value in attrs.items():
        field.set(key.replace("_", "-"), value)
    return ET.tostring(root, encoding="unicode")


def field_line(xml: str) -> str:
    return next(line for line in parse_hierarchy(xml).text.splitlines() if "id=g_icon" in line)


def test_clear_text_in_the_dump_shows_as_bullets() -> None:
    xml = with_password_field("hunter2", focused="true")
    screen = parse_hierarchy(xml)
    assert "hunter2" not in screen.text
    assert field_line(xml) == (
        f'          [17] EditText "{PASSWORD_MASK * 7}" id=g_icon (clickable, focused, password) [110,1654][173,1717]'
    )
    field = next(n for n in screen.nodes.values() if n.resource_id == FIELD_ID)
    assert field.text == PASSWORD_MASK * 7  # the element map holds what the screen shows, too
    # every other line of the real dump is as before
    before = parse_hierarchy(FIXTURE.read_text("utf-8")).text.splitlines()
    after = screen.text.splitlines()
    assert [a for a, b in zip(after, before, strict=True) if a != b] == [field_line(xml)]


def test_bullets_from_the_device_hint_and_plain_fields() -> None:
    # A TextView hands the bullets itself: the same observation as for the clear text.
    assert field_line(with_password_field(PASSWORD_MASK * 7)) == field_line(with_password_field("hunter2"))
    # An empty field shows its hint (uiautomator2 dumps it as `hint`; the text then is the hint).
    assert '"Password"' in field_line(with_password_field("Password", hint="Password"))
    assert field_line(with_password_field("")).split("] ", 1)[1].startswith("EditText id=g_icon")
    # A field that is not a password field keeps its text.
    assert shown_text({"text": "hunter2", "password": "false"}) == "hunter2"
    # One bullet per UTF-16 unit, as Android counts a field's characters.
    assert shown_text({"text": "pä🔒", "password": "true"}) == PASSWORD_MASK * 4


class LoginDevice:
    """A device at the uiautomator2 API boundary showing the edited real dump; what is typed goes into
    the password field in clear text, as a custom view hands it to uiautomator."""

    def __init__(self) -> None:
        self.typed = ""
        self.info = {"productName": "sdk_gphone64_x86_64", "sdkInt": 24, "currentPackageName": LAUNCHER}

    def app_info(self, package: str) -> dict[str, Any]:
        return {"versionName": "1.0"}

    def app_start(self, package: str, activity: str | None = None, **_: Any) -> None:
        pass

    def app_current(self) -> dict[str, str]:
        return {"package": LAUNCHER, "activity": ".NexusLauncherActivity"}

    def window_size(self) -> tuple[int, int]:
        return 1080, 1794

    def dump_hierarchy(self) -> str:
        return with_password_field(self.typed, focused=str(bool(self.typed)).lower())

    def click(self, x: int, y: int) -> None:
        pass

    def send_keys(self, text: str, clear: bool = False) -> None:
        self.typed += text


@pytest.mark.parametrize("secret", ["hunter2", "correct horse battery staple"])
def test_typed_password_never_reaches_an_observation(secret: str) -> None:
    device = LoginDevice()
    device.typed = "x"  # a character already typed before the episode
    env = AndroidEnvironment(EnvironmentOptions(), device_factory=lambda serial: device)
    reset = env.reset(Task(id="login", instruction="sign in", config={"android": {"app": LAUNCHER}}))
    assert f'EditText "{PASSWORD_MASK}"' in reset.observation.text and '"x"' not in reset.initial_state
    tapped = env.step(Action(kind=ActionKind.GUI, text="tap('17')"))
    typed = env.step(Action(kind=ActionKind.GUI, text=f"type({secret!r})"))
    assert device.typed == "x" + secret  # the device holds the clear text
    assert secret in typed.action.text  # the action is the agent's own
    for text in (
        reset.observation.text,
        reset.initial_state,
        tapped.observation.text,
        typed.observation.text,
    ):
        assert secret not in text
    assert f'EditText "{PASSWORD_MASK * (len(secret) + 1)}" id=g_icon (clickable, focused, password)' in (
        typed.observation.text
    )
    assert typed.state_changed is True  # the field grew: the screen changed, as it did on the device
