"""A real GTK 3 password entry (Gtk.Entry with visibility off, AT-SPI role `password text`) on the
os desktop in its sandbox: what is typed into it never reaches the observation, which shows one mask
character per character, as GTK draws it; the plain entry beside it keeps its value. GTK 3 itself hands
AT-SPI its mask characters; the desktop helper masks every `password text` node all the same, so a
toolkit that hands over the clear text cannot put it in an observation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from collectors import engine
from collectors.environment import EnvironmentOptions, Task
from collectors.os_desktop import DesktopEnvironment
from schemas import Action, ActionKind

pytestmark = pytest.mark.engine
PASSWORD_MASK = "\u25cf"  # collectors/atspi_helper.py (which runs in the sandbox only, beside pyatspi)

LOGIN_APP = """
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk

window = Gtk.Window(title="Sign in")
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=6)
user = Gtk.Entry()
user.get_accessible().set_name("Username")
secret = Gtk.Entry()
secret.set_visibility(False)
secret.get_accessible().set_name("Password")
box.pack_start(user, False, False, 0)
box.pack_start(secret, False, False, 0)
box.pack_start(Gtk.Button(label="Sign in"), False, False, 0)
window.add(box)
window.connect("destroy", Gtk.main_quit)
window.show_all()
Gtk.main()
"""


@pytest.fixture
def desktop() -> Iterator[DesktopEnvironment]:
    env = DesktopEnvironment(EnvironmentOptions(client=engine.connect()))
    yield env
    env.close()


def act(env: DesktopEnvironment, item: Any) -> Any:
    if isinstance(item, dict):
        return env.step(Action(kind=ActionKind.GUI, text=json.dumps(item)))
    return env.step(Action(kind=ActionKind.CODE, text=item))


def test_gtk_password_entry_shows_mask_characters(desktop: DesktopEnvironment) -> None:
    task = Task(
        id="login",
        instruction="sign in",
        files={"login.py": LOGIN_APP},
        config={"os": {"apps": [["python3", "login.py"]]}},
    )
    first = desktop.reset(task).observation.text
    assert 'password text "Password"' in first, first
    act(desktop, {"action": "click", "role": "text", "name": "Username"})
    act(desktop, "typewrite('rex')")
    act(desktop, {"action": "click", "role": "password text", "name": "Password"})
    r = act(desktop, "typewrite('hunter2!')")
    text = r.observation.text
    assert "hunter2" not in text, text
    line = next(ln for ln in text.splitlines() if 'password text "Password"' in ln)
    assert f'value="{PASSWORD_MASK * 8}"' in line, line
    assert 'value="rex"' in text  # a plain entry is not a secret
    assert r.state_changed is True  # one more mask character is a change
