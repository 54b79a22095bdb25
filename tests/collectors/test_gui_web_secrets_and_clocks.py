"""Real Chromium in its sandbox on pages nobody here wrote: MiniWoB++'s login-user task (a password
field, and the episode's ticking "Time left: N / 10sec" countdown), plus a page whose ARIA timer and
marquee tick with bare numbers. Password values never reach an observation (they show as the browser
draws them, one bullet per character); a no-op turn on a ticking page is not a change, for the
collector's `state_changed` and for the pools' no-change filter on the recorded observations."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collectors import engine
from collectors.browser_helper import BULLET, SITES_URL
from collectors.environment import EnvironmentOptions, Task
from collectors.web import BrowserSandbox, WebEnvironment
from pipelines.filters import drop_gui_no_change_turns
from schemas import Action, ActionKind, Domain, Observation, ObservationFormat, Source, SourceKind
from schemas.trajectory import Trajectory, Turn
from tests.helpers.miniwob import miniwob_subset

pytestmark = pytest.mark.engine
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "web"
PAGES = "http://127.0.0.1:8001"  # a static server inside the browser sandbox, on its own loopback


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserSandbox]:
    box = BrowserSandbox.open(engine.connect(), allow=[SITES_URL, PAGES])
    try:
        files = {
            str(p.relative_to(FIXTURES)): p.read_bytes()
            for p in (FIXTURES / "pages").rglob("*")
            if p.is_file() and p.suffix in (".html", ".js", ".css")
        }
        miniwob = miniwob_subset(tmp_path_factory.mktemp("miniwob"), ["login-user"])
        files |= {
            f"miniwob/{p.relative_to(miniwob)}": p.read_bytes() for p in miniwob.rglob("*") if p.is_file()
        }
        box.sandbox.put_files(files, base="/work/pages")
        box.sandbox.container.exec_run(
            ["python3", "-m", "http.server", "8001", "--bind", "127.0.0.1", "-d", "/work/pages"],
            detach=True,
            user=box.sandbox.user,
        )
        for _ in range(50):  # the server is up when it answers
            if box.sandbox.exec(["python3", "-c", PROBE], timeout_s=5).exit_code == 0:
                break
            time.sleep(0.1)
        yield box
    finally:
        box.close()


PROBE = (
    "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8001/miniwob/miniwob/login-user.html')"
)


@pytest.fixture
def web(browser: BrowserSandbox) -> Iterator[WebEnvironment]:
    env = WebEnvironment(EnvironmentOptions(), browser=browser)
    yield env
    env.close()


def start(env: WebEnvironment, path: str) -> str:
    task = Task(
        id="t",
        instruction="test",
        network=True,  # only so web.allow may name the sandbox's own static server
        config={"web": {"start_url": f"{PAGES}{path}", "allow": [PAGES]}},
    )
    return env.reset(task).observation.text


def act(env: WebEnvironment, item: Any) -> Any:
    if isinstance(item, dict):
        return env.step(Action(kind=ActionKind.GUI, text=json.dumps(item)))
    return env.step(Action(kind=ActionKind.COMMAND, text=item))


def textbox_refs(observation: str) -> list[str]:
    return re.findall(r"- textbox\b[^\n]*\[ref=(e\d+)\]", observation)


def recorded(observations: list[str]) -> Trajectory:
    """The observations as a public trace would carry them: no state_changed flag."""
    turns = [
        Turn(Action(ActionKind.GUI, f"noop({i})"), Observation(o, ObservationFormat.AXTREE))
        for i, o in enumerate(observations)
    ]
    return Trajectory(
        id="r", domain=Domain.WEB, source=Source(kind=SourceKind.PUBLIC, name="s"), task="t", turns=turns
    )


def test_password_values_show_as_bullets_on_the_miniwob_login_page(web: WebEnvironment) -> None:
    start(web, "/miniwob/miniwob/login-user.html")
    r = act(web, {"action": "click", "text": "START"})
    asked = re.search(r'the password \\?"([^"\\]+)\\?"', r.observation.text)
    assert asked, r.observation.text
    username, password = textbox_refs(r.observation.text)
    act(web, f'fill("{username}", "rex")')
    typed = "hunter2: s3cr\u00e9t"
    filled = act(web, f"fill({password!r}, {typed!r})").observation.text
    act(web, f'click("{password}")')
    keyed = act(web, 'keyboard_type("!x")').observation.text
    for text, value in ((filled, typed), (keyed, typed + "!x")):
        assert typed not in text and "hunter2" not in text and "s3cr" not in text
        line = next(ln for ln in text.splitlines() if f"[ref={password}]" in ln and "textbox" in ln)
        assert line.endswith(": " + BULLET * len(value)), line
        assert re.search(rf"textbox[^\n]*\[ref={username}\][^\n]*: rex$", text, re.M)  # not a secret
    assert f"Focused: textbox [ref={password}]: {BULLET * (len(typed) + 2)}" in keyed
    assert asked.group(1) in keyed  # the page's own instruction text is content, not a field value


def test_a_field_masked_by_css_is_a_secret_too(web: WebEnvironment) -> None:
    text = start(web, "/pages/timer.html")
    pin = re.search(r'textbox "PIN" \[ref=(e\d+)\]', text)
    assert pin, text
    r = act(web, f'fill("{pin.group(1)}", "4711")')
    assert "4711" not in r.observation.text and f": {BULLET * 4}" in r.observation.text


def test_countdown_noop_turns_are_no_change_for_collector_and_pools(web: WebEnvironment) -> None:
    start(web, "/miniwob/miniwob/login-user.html")
    begun = act(web, {"action": "click", "text": "START"})
    assert begun.state_changed is True  # the task appeared
    waits = [act(web, "noop(1100)") for _ in range(2)]
    shown = [re.search(r"Time left: (\d+) / 10sec", w.observation.text) for w in waits]
    assert all(shown) and shown[0].group(1) != shown[1].group(1)  # type: ignore[union-attr]
    assert [w.state_changed for w in waits] == [False, False]
    username = textbox_refs(begun.observation.text)[0]
    typed = act(web, f'fill("{username}", "rex")')
    assert typed.state_changed is True  # a value typed is state
    screens = [begun.observation.text] + [w.observation.text for w in waits] + [typed.observation.text]
    traj, removed = drop_gui_no_change_turns(recorded(screens))
    assert removed == 2 and [t.observation.text for t in traj.turns] == [screens[0], screens[3]]


def test_aria_timer_and_marquee_tick_without_a_change(web: WebEnvironment) -> None:
    first = start(web, "/pages/timer.html")
    later = act(web, "noop(900)")
    assert re.search(r"- timer \"Remaining\"", first), first
    assert first != later.observation.text and later.state_changed is False
    added = act(web, {"action": "click", "role": "button", "name": "Add to cart"})
    assert "Cart: 1 item(s)" in added.observation.text.replace('"', "") and added.state_changed is True
    traj, removed = drop_gui_no_change_turns(
        recorded([first, later.observation.text, added.observation.text])
    )
    assert removed == 1 and len(traj.turns) == 2
