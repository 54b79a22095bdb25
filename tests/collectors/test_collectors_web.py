"""Web domain on real Chromium in its sandbox (worldline/browser) and the bundled local sites served
inside it: navigation, forms, tabs, an iframe, dynamic content, role/name addressing, the state_changed
bit, env-failure detection (and its false alarms), bad input, and `collect --env web` with both
policies. Also the shared GUI parsing/hashing rules."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors import engine
from collectors.collection import CollectConfig, collect
from collectors.environment import EnvironmentOptions, Task, TaskError, load_tasks
from collectors.gui_common import (
    ActionSyntaxError,
    EnvFailure,
    detect_page_failure,
    format_call,
    gui_call_from_action,
    parse_call,
    state_hash,
)
from collectors.web import BrowserSandbox, WebEnvironment
from schemas import Action, ActionKind, TrajectoryStatus, iter_trajectories
from tests.helpers.fakellm import FakeReply, FakeToolCall

pytestmark = pytest.mark.engine
EXAMPLES = Path(__file__).resolve().parents[2] / "collectors" / "tasks" / "web_examples.jsonl"


@dataclass(frozen=True)
class Sites:
    base_url: str  # the bundled sites inside the browser sandbox


@pytest.fixture(scope="module")
def browser() -> Iterator[BrowserSandbox]:
    box = BrowserSandbox.open(engine.connect())
    yield box
    box.close()


@pytest.fixture(scope="module")
def sites(browser: BrowserSandbox) -> Sites:
    return Sites(browser.sites_url)


@pytest.fixture
def web(browser: BrowserSandbox) -> Iterator[WebEnvironment]:
    env = WebEnvironment(EnvironmentOptions(), browser=browser)
    yield env
    env.close()


def start(env: WebEnvironment, sites: Sites, path: str) -> str:
    task = Task(id="t", instruction="test", config={"web": {"start_url": f"{sites.base_url}{path}"}})
    return env.reset(task).observation.text


def act(env: WebEnvironment, item: Any) -> Any:
    if isinstance(item, dict):
        return env.step(Action(kind=ActionKind.GUI, text=json.dumps(item)))
    return env.step(Action(kind=ActionKind.COMMAND, text=item))


def ref_of(observation: str, role: str, name: str) -> str:
    match = re.search(rf'- {re.escape(role)} "{re.escape(name)}"[^\n]*\[ref=([a-z0-9]+)\]', observation)
    assert match, f"no {role} {name!r} in\n{observation}"
    return match.group(1)


# -- real browser ---------------------------------------------------------------------------------


def test_forms_navigation_and_checkout_by_role_and_name(web: WebEnvironment, sites: Sites) -> None:
    first = start(web, sites, "/shop/")
    assert first.startswith(f"URL: {sites.base_url}/shop/") and "Title: Catalogue - Shop" in first
    assert 'link "Burr grinder"' in first
    r = act(web, {"action": "click", "role": "link", "name": "Burr grinder"})
    assert "Title: Burr grinder - Shop" in r.observation.text and r.state_changed is True
    act(web, {"action": "click", "role": "button", "name": "Add to cart"})
    r = act(web, {"action": "click", "role": "link", "name": "Proceed to checkout"})
    # Submitting the empty form shows the validation errors (the server's own, in an alert).
    r = act(web, {"action": "click", "role": "button", "name": "Place order"})
    assert "Please enter your name." in r.observation.text and r.env_failure is None
    name_ref = ref_of(r.observation.text, "textbox", "Full name")
    r = act(web, f"fill({name_ref!r}, 'Ada Lovelace')")
    assert r.observation.is_error is None and 'textbox "Full name"' in r.observation.text
    assert "Ada Lovelace" in r.observation.text
    act(web, {"action": "fill", "role": "textbox", "name": "Email", "value": "ada@example.org"})
    shipping = ref_of(r.observation.text, "combobox", "Shipping")
    act(web, f'select_option("{shipping}", "Express (1 day)")')
    act(web, {"action": "check", "role": "checkbox", "name": "I accept the terms"})
    r = act(web, {"action": "click", "role": "button", "name": "Place order"})
    assert "Order #1 confirmed" in r.observation.text and "Burr grinder × 1" in r.observation.text
    assert "Express (1 day)" in r.observation.text
    r = act(web, "go_back()")
    assert "Title: Checkout - Shop" in r.observation.text


def test_dynamic_content_clock_is_not_a_state_change(web: WebEnvironment, sites: Sites) -> None:
    first = start(web, sites, "/notes/")
    r = act(web, "noop(1200)")  # the page's clock ticks; nothing else changes
    clock = re.compile(r"Local time: \d\d:\d\d:\d\d")
    assert clock.search(first) and clock.search(r.observation.text)
    assert clock.search(first).group(0) != clock.search(r.observation.text).group(0)  # type: ignore[union-attr]
    assert r.state_changed is False
    box = ref_of(r.observation.text, "textbox", "New note")
    act(web, f'fill("{box.removeprefix("e")}", "water the plants")')  # a numeric bid means eN
    r = act(web, f'press("{box}", "Enter")')
    assert (
        "listitem: water the plants" in r.observation.text.replace('"', "")
        or "water the plants" in r.observation.text
    )
    assert "1 note(s)" in r.observation.text and r.state_changed is True
    assert ref_of(r.observation.text, "textbox", "New note") == box  # refs stay with their element
    r = act(web, {"action": "click", "role": "button", "name": "Load suggestions"})
    assert "Descale the machine" in r.observation.text  # fetched by the page after the click
    assert 'Focused: button "Load suggestions"' in r.observation.text


def test_tabs_open_focus_and_close(web: WebEnvironment, sites: Sites) -> None:
    start(web, sites, "/notes/")
    r = act(web, {"action": "click", "role": "link", "name": "Open help in a new tab"})
    assert "Title: Help - Notes" in r.observation.text
    assert "Tabs: [0] Notes | [1] Help - Notes (current)" in r.observation.text
    r = act(web, "tab_focus(0)")
    assert "Tabs: [0] Notes (current) | [1] Help - Notes" in r.observation.text
    r = act(web, "tab_focus(5)")
    assert r.observation.is_error and "no tab 5" in r.observation.text
    r = act(web, "new_tab()")
    assert r.observation.text.count("[") >= 3 and "URL: about:blank" in r.observation.text
    r = act(web, "tab_close()")
    assert "(current)" in r.observation.text and "about:blank" not in r.observation.text.split("\n")[2]


def test_iframe_content_is_inlined_and_addressable(web: WebEnvironment, sites: Sites) -> None:
    first = start(web, sites, "/wiki/embed")
    assert "- iframe" in first and 'spinbutton "Grams"' in first
    grams = ref_of(first, "spinbutton", "Grams")
    assert grams.startswith("f")  # refs inside a frame carry the frame's prefix
    act(web, f'fill("{grams}", "100")')
    r = act(web, {"action": "click", "role": "button", "name": "Convert"})
    assert "3.53 oz" in r.observation.text


def test_http_500_page_is_env_failure(web: WebEnvironment, sites: Sites) -> None:
    start(web, sites, "/status/")
    r = act(web, {"action": "click", "role": "link", "name": "Monthly report"})
    assert r.env_failure and "HTTP 500" in r.env_failure


def test_captcha_page_is_env_failure(web: WebEnvironment, sites: Sites) -> None:
    start(web, sites, "/status/")
    r = act(web, {"action": "click", "role": "link", "name": "Partner portal"})
    assert r.env_failure and "CAPTCHA" in r.env_failure


def test_no_false_alarm_on_recaptcha_footer_or_article_about_503(web: WebEnvironment, sites: Sites) -> None:
    first = start(web, sites, "/wiki/article/http-503")
    assert "protected by reCAPTCHA" in first and "503 Service Unavailable" in first
    r = act(web, {"action": "click", "role": "link", "name": "Wiki home"})
    assert r.env_failure is None and "Coffee wiki" in r.observation.text


def test_bad_input_is_an_error_observation_never_a_crash(web: WebEnvironment, sites: Sites) -> None:
    start(web, sites, "/shop/")
    for bad, expected in [
        ('click("e999")', "no element with ref e999"),
        ("clik(", "not a call expression"),
        ('fill("e3")', "needs value"),
        ({"action": "click", "role": "link", "name": "No such link"}, "no visible element"),
        ("__import__('os').system('touch /tmp/pwned-by-action')", "expected a plain function call"),
        ("click(__import__('os').system('touch /tmp/pwned-by-action'))", "arguments must be literals"),
        ("frobnicate()", "unknown web action"),
        ('noop("soon")', "bad arguments"),
        ("tab_focus([1])", "bad arguments"),
    ]:
        r = act(web, bad)
        assert r.observation.is_error is True, bad
        assert expected in r.observation.text, (bad, r.observation.text[:400])
        assert r.env_failure is None
    assert not os.path.exists("/tmp/pwned-by-action")


def test_resource_limits_are_watched(web: WebEnvironment, sites: Sites) -> None:
    task = Task(
        id="lim",
        instruction="x",
        config={"web": {"start_url": f"{sites.base_url}/shop/", "limits": {"memory_mb": 1}}},
    )
    web.reset(task)
    r = act(web, "noop(0)")
    assert r.env_failure and "exceeded its memory limit" in r.env_failure
    web.close()
    task.config["web"]["limits"] = {"pids": 1}
    web.reset(task)
    r = act(web, "noop(0)")
    assert r.env_failure and "exceeded its process limit" in r.env_failure


def test_other_hosts_are_refused_without_network(web: WebEnvironment, sites: Sites) -> None:
    start(web, sites, "/shop/")
    r = act(web, 'goto("http://example.com/")')
    assert r.observation.is_error and "refused" in r.observation.text
    assert "not in the task's allow-list" in r.observation.text
    assert r.info["action_error"] == "refused" and r.info["refused"][0]["url"] == "http://example.com/"
    assert r.env_failure is None and f"URL: {sites.base_url}/shop/" in r.observation.text  # the tab stays


def test_start_url_outside_the_allow_list_is_env_failure(web: WebEnvironment) -> None:
    task = Task(id="down", instruction="x", config={"web": {"start_url": "http://127.0.0.1:9/"}})
    with pytest.raises(EnvFailure, match=r"127.0.0.1:9/ is refused.*allow-list"):
        web.reset(task)


def test_missing_site_page_is_env_failure(web: WebEnvironment, sites: Sites) -> None:
    task = Task(id="404", instruction="x", config={"web": {"start_url": "{sites}/no/such/page"}})
    with pytest.raises(EnvFailure, match="error page: HTTP 404"):
        web.reset(task)


def test_validate_task_names_the_field() -> None:
    with pytest.raises(TaskError, match=r"id w1\).*web\.start_url"):
        WebEnvironment.validate_task(Task(id="w1", instruction="x", config={"web": {"start_url": "shop/"}}))
    with pytest.raises(TaskError, match=r"id w3\).*web\.allow.*network"):
        WebEnvironment.validate_task(
            Task(
                id="w3",
                instruction="x",
                config={"web": {"start_url": "{sites}/", "allow": ["https://a.org"]}},
            )
        )
    with pytest.raises(TaskError, match=r"web\.allow' must be a list of origins"):
        WebEnvironment.validate_task(
            Task(
                id="w4",
                instruction="x",
                network=True,
                config={"web": {"start_url": "{sites}/", "allow": ["https://a.org/path"]}},
            )
        )
    with pytest.raises(TaskError, match="unknown key"):
        WebEnvironment.validate_task(
            Task(id="w2", instruction="x", config={"web": {"start_url": "{sites}/", "limits": {"cpu": 1}}})
        )
    for task in load_tasks(EXAMPLES):
        WebEnvironment.validate_task(task)
    assert WebEnvironment.needs_engine() is True  # the browser runs in a sandbox


# -- the runner -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_collect_web_examples_scripted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = collect(
        CollectConfig(env="web", tasks_path=EXAMPLES, policy="scripted", out=out, concurrency=2)
    )
    by_id = {t.metadata["task_id"]: t for t in iter_trajectories(out)}
    assert summary.written == len(by_id) == 7
    checkout = by_id["web-shop-checkout"]
    assert (
        checkout.status == TrajectoryStatus.COMPLETE
        and "Order #1 confirmed" in checkout.turns[-1].observation.text
    )
    assert (
        checkout.initial_state
        and "## Start page" in checkout.initial_state
        and "Catalogue" in checkout.initial_state
    )
    assert all(t.state_changed is not None for t in checkout.turns)
    assert by_id["web-wiki-iframe"].turns[2].observation.text.count("3.53 oz") == 1
    notes = by_id["web-notes-dynamic"]
    assert notes.status == TrajectoryStatus.COMPLETE and "water the plants" in notes.turns[1].observation.text
    report = by_id["web-status-report-500"]
    assert report.status == TrajectoryStatus.ENV_FAILURE and "HTTP 500" in (report.status_reason or "")
    assert len(report.turns) == 1  # the failure ends the trajectory
    assert by_id["web-partner-captcha"].status == TrajectoryStatus.ENV_FAILURE
    search = by_id["web-wiki-search"]
    assert search.status == TrajectoryStatus.COMPLETE  # an article about 503 under a reCAPTCHA footer
    bad = by_id["web-bad-input"]
    assert bad.status == TrajectoryStatus.COMPLETE
    assert [t.observation.is_error for t in bad.turns] == [True] * 5 + [None]
    assert all(t.state_changed is False for t in bad.turns[:5])


def test_collect_web_openai_policy(tmp_path: Path, fake_llm: Any, sites: Sites) -> None:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(
        json.dumps(
            {"id": "llm", "instruction": "open the cart", "web": {"start_url": f"{sites.base_url}/shop/"}}
        )
        + "\n"
    )
    fake_llm.script(
        FakeReply(text="", tool_calls=[FakeToolCall("click", {"bid": "e999"})]),
        FakeReply(text="", tool_calls=[FakeToolCall("goto", {"url": f"{sites.base_url}/shop/cart"})]),
        FakeReply(text="The cart is empty."),
    )
    collect(
        CollectConfig(
            env="web", tasks_path=tasks, policy="openai", out=tmp_path / "out", llm_config=fake_llm.config()
        )
    )
    (trajectory,) = list(iter_trajectories(tmp_path / "out"))
    assert trajectory.status == TrajectoryStatus.COMPLETE
    assert [t.action.text for t in trajectory.turns] == [
        "click(bid='e999')",
        f"goto(url='{sites.base_url}/shop/cart')",
    ]
    assert (
        trajectory.turns[0].observation.is_error
        and "Your cart is empty." in trajectory.turns[1].observation.text
    )
    tools = {t["function"]["name"] for t in fake_llm.requests[0].body["tools"]}
    assert {"click", "fill", "goto", "select_option", "tab_focus", "report_infeasible"} <= tools
    assert "Catalogue" in fake_llm.requests[0].messages[1]["content"]


# -- parsing, hashing and failure rules (no browser) ----------------------------------------------


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3))


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
_literal = st.recursive(_scalars, _containers, max_leaves=6)


@given(
    name=st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True),
    args=st.lists(_literal, max_size=4),
    kwargs=st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), _literal, max_size=3),
)
def test_parse_call_round_trips_literal_calls(name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
    import keyword

    if keyword.iskeyword(name) or any(keyword.iskeyword(k) for k in kwargs):
        return
    call = parse_call(format_call(name, args, kwargs))
    assert (call.name, call.args, call.kwargs) == (name, args, kwargs)


@given(st.text(max_size=60))
def test_parse_call_never_executes_and_only_raises_syntax_errors(text: str) -> None:
    try:
        call = parse_call(text)
    except ActionSyntaxError:
        return
    assert call.name.isidentifier()


@pytest.mark.parametrize(
    "text",
    [
        "os.system('id')",
        "click(x)",
        "click(open('f'))",
        "a = click(1)",
        "click(*[1])",
        "click(**{'a': 1})",
        "lambda: 1",
    ],
)
def test_parse_call_refuses_code(text: str) -> None:
    with pytest.raises(ActionSyntaxError):
        parse_call(text)


def test_object_form_and_tool_call_forms() -> None:
    call = gui_call_from_action(
        Action(
            kind=ActionKind.GUI, text='{"action": "fill", "role": "textbox", "name": "Email", "value": "a@b"}'
        )
    )
    assert call.target == {"role": "textbox", "name": "Email"} and call.kwargs == {"value": "a@b"}
    tool = gui_call_from_action(
        Action(
            kind=ActionKind.TOOL_CALL, text='{"name": "click", "arguments": {"bid": "e3"}}', tool_name="click"
        )
    )
    assert tool.text() == "click(bid='e3')"
    with pytest.raises(ActionSyntaxError):
        gui_call_from_action(Action(kind=ActionKind.GUI, text='{"role": "link"}'))


def test_state_hash_ignores_clocks_dates_and_relative_times_only() -> None:
    base = "Notes\nLocal time: 09:15:02 on 2026-12-01\nupdated 5 minutes ago\n1 note(s)"
    same = "Notes\nLocal time: 23:59:59 on 2027-01-31\nupdated 12 minutes ago\n1 note(s)"
    assert state_hash(base) == state_hash(same)
    assert state_hash(base) != state_hash(base.replace("1 note(s)", "2 note(s)"))
    assert state_hash("Tue Dec 1 clock") == state_hash("Wed Dec 2 clock")
    assert state_hash("Fri, Apr 21") == state_hash("Sat, Apr 22") == state_hash("1 December 2026")
    # Words that merely start like a month or day, and plain counters, are state.
    assert state_hash("Decrease 10") != state_hash("Decrease 11")
    assert state_hash("Marching 5") != state_hash("Marching 6")


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"status": 500, "title": "Anything", "headings": [], "text": "long " * 500}, "HTTP 500"),
        (
            {"status": 200, "title": "503 Service Unavailable", "headings": [], "text": "Try later."},
            "error page",
        ),
        ({"status": None, "title": "Site", "headings": ["502 Bad Gateway"], "text": "nginx"}, "error page"),
        (
            {"status": 200, "title": "Just a moment...", "headings": [], "text": "Checking your browser"},
            "CAPTCHA",
        ),
        (
            {
                "status": 200,
                "title": "Login",
                "headings": ["Verify you are human"],
                "text": "I'm not a robot",
            },
            "CAPTCHA",
        ),
        ({"status": 200, "title": "example.com", "headings": [], "text": "This site can’t be reached"}, None),
        (
            {
                "status": 200,
                "title": "This site can’t be reached",
                "headings": [],
                "text": "ERR_CONNECTION_REFUSED",
            },
            "browser error",
        ),
        # false alarms that must not fire
        (
            {
                "status": 200,
                "title": "HTTP 503 Service Unavailable explained",
                "headings": ["HTTP 503 Service Unavailable explained"],
                "text": "The HTTP 503 status ... " * 3,
            },
            None,
        ),
        (
            {
                "status": 200,
                "title": "Contact us",
                "headings": ["Contact us"],
                "text": "Form. This site is protected by reCAPTCHA and the Google Privacy Policy.",
            },
            None,
        ),
        (
            {"status": 200, "title": "How to fix a 404 Not Found error", "headings": [], "text": "Short."},
            None,
        ),
        (
            {
                "status": 200,
                "title": "Are CAPTCHAs useful?",
                "headings": ["Are CAPTCHAs useful?"],
                "text": "An essay.",
            },
            None,
        ),
    ],
)
def test_detect_page_failure(kwargs: dict[str, Any], expected: str | None) -> None:
    found = detect_page_failure(**kwargs)
    if expected is None:
        assert found is None
    else:
        assert found is not None and expected in found
