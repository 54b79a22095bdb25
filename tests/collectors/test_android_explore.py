"""The Android explorer and task generator. The explorer reads the android observation the collector
writes (collectors/android.py) and acts on what its nodes afford; it is checked on the real
`uiautomator dump` of a Pixel launcher (tests/fixtures/public/, attribution in SOURCES.md), on that dump
with nodes edited to be disabled, and on the element lists of the AndroidWorld episode file
(tests/fixtures/androidworld/: written with AndroidWorld's own writer code, its UI elements written by
hand, see its README) laid out as a dump. Full episodes run through the collection job against the
stand-in device of test_collectors_android (the uiautomator2 API boundary): no device or emulator
exists here, so no generated task's plan is checked against real apps."""

from __future__ import annotations

import json
import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors import android
from collectors.android import ACTION_SPACE, AndroidEnvironment
from collectors.collection import CollectConfig, collect
from collectors.environment import EnvironmentOptions, Task
from collectors.explore import ENV_VAR, ExplorePolicy, Mix, explorer_class
from collectors.explore_android import AndroidExplorer, HierarchyNode, parse_nodes
from collectors.generators import families, generate, state_hash, validated, write_tasks
from collectors.gui_common import parse_call
from schemas import Observation, Trajectory, TrajectoryStatus, iter_trajectories
from tests.collectors.test_collectors_android import SETTINGS, StandInDevice, hierarchy, node

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LAUNCHER_DUMP = FIXTURES / "public" / "uiautomator_window_dump.xml"
ANDROIDWORLD = FIXTURES / "androidworld" / "ContactsAddContact.pkl.gz"
LAUNCHER = "com.google.android.apps.nexuslauncher"


class ScreenDevice:
    """A device at the uiautomator2 boundary that shows one fixed hierarchy."""

    def __init__(self, xml: str, package: str) -> None:
        self.xml = xml
        self.package = package
        self.info = {"productName": "sdk_gphone64_x86_64", "sdkInt": 33}

    def app_info(self, package: str) -> dict[str, Any]:
        return {"versionName": "1"}

    def app_start(self, package: str, activity: str | None = None, **_: Any) -> None:
        pass

    def app_current(self) -> dict[str, str]:
        return {"package": self.package, "activity": ".Main"}

    def window_size(self) -> tuple[int, int]:
        return 1080, 2400

    def dump_hierarchy(self) -> str:
        return self.xml


def observed(xml: str, package: str = LAUNCHER) -> tuple[str, android.Screen]:
    """The reset observation the android collector writes for `xml`, and its parsed screen."""
    env = AndroidEnvironment(EnvironmentOptions(), device_factory=lambda s: ScreenDevice(xml, package))
    reset = env.reset(Task(id="screen", instruction="look", config={"android": {}}))
    return reset.observation.text, env.screen


def launcher_with_disabled(*labels: str) -> str:
    """The real launcher dump with the nodes whose text is in `labels` disabled (enabled="false")."""
    root = ET.fromstring(LAUNCHER_DUMP.read_bytes())
    for element in root.iter("node"):
        if element.get("text") in labels:
            element.set("enabled", "false")
    return ET.tostring(root, encoding="unicode")


def androidworld_screens() -> list[str]:
    """The episode's `before_element_list`s (AndroidWorld UIElements) laid out as dumps, one node per element."""
    from curation_agents.formats.androidworld import load_episodes

    (episode, _failed) = load_episodes(str(ANDROIDWORLD), 10**7)
    screens = []
    for elements in episode["episode_data"]["before_element_list"]:
        children = []
        for i, e in enumerate(elements):
            box = e.get("bbox_pixels")
            # the elements share one box; stack them so each has its own place on the screen
            top = box.get("y_min") + i * (box.get("y_max") - box.get("y_min"))
            children.append(
                node(
                    e.get("class_name"),
                    f"[{box.get('x_min')},{top}][{box.get('x_max')},{top + box.get('y_max') - box.get('y_min')}]",
                    package=e.get("package_name"),
                    text=e.get("text") or "",
                    content_desc=e.get("content_description") or "",
                    resource_id=e.get("resource_name") or "",
                    clickable=bool(e.get("is_clickable")),
                    enabled=bool(e.get("is_enabled")),
                    focusable=bool(e.get("is_editable")),
                )
            )
        screens.append(hierarchy(node("android.widget.FrameLayout", "[0,0][1080,2400]", *children)))
    return screens


def explorer(seed: int, mix: Mix | None = None, app: str | None = None) -> AndroidExplorer:
    config = {"android": {"app": app}} if app else {"android": {}}
    task = Task(id="t", instruction="Explore the screen", config=config)
    return AndroidExplorer(random.Random(seed), mix or Mix(), task, ACTION_SPACE)


def check_affordance(action: str, screen: android.Screen, behaviour: str) -> str:
    """The action's verb after checking that what it addresses exists on `screen` and affords it."""
    call = parse_call(action)
    if call.name in ("tap", "long_press"):
        (element,) = call.args
        target = screen.nodes[element]  # a KeyError: a node the screen does not have
        assert "disabled" not in target.states, (action, target)
        needed = "long-clickable" if call.name == "long_press" else "clickable"
        if behaviour == "focus:editable":
            assert target.cls.endswith(("EditText", "AutoCompleteTextView")), target
        assert needed in target.states or behaviour == "focus:editable" and "focused" in target.states
    elif call.name == "swipe" and len(call.args) == 4:
        x1, y1, x2, y2 = call.args
        assert any(
            "scrollable" in n.states
            and "disabled" not in n.states
            and all(n.bounds[0] <= x <= n.bounds[2] for x in (x1, x2))
            and all(n.bounds[1] <= y <= n.bounds[3] for y in (y1, y2))
            for n in screen.nodes.values()
        ), action
    elif call.name == "open_app":
        assert call.args[0] in (LAUNCHER, SETTINGS, "com.google.android.contacts"), action
    else:
        assert call.name in ("swipe", "type", "back", "home", "enter", "wait"), action
    return call.name


# -- reading the observation ------------------------------------------------------------------------


def test_parse_nodes_reads_what_the_collector_wrote() -> None:
    text, screen = observed(LAUNCHER_DUMP.read_text("utf-8"))
    nodes = parse_nodes(text)
    assert [n.id for n in nodes] == list(screen.nodes)
    for parsed in nodes:
        shown = screen.nodes[parsed.id]
        assert (parsed.text, parsed.desc, list(parsed.states), parsed.bounds) == (
            shown.text,
            shown.desc if shown.desc != shown.text else "",  # the line does not repeat it
            shown.states,
            shown.bounds,
        )
        assert parsed.resource_id == android.short_resource_id(shown.resource_id)
    messages = next(n for n in nodes if n.text == "Messages")
    assert messages.clickable and messages.long_clickable and not messages.editable
    clock = next(n for n in nodes if n.resource_id == "clock")
    assert not clock.clickable  # the date line on the home screen only shows text
    assert [n.resource_id for n in nodes if n.scrollable] == ["workspace"]


_label = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Cn")), max_size=30)


@given(_label, _label)
def test_any_label_survives_the_observation(text: str, desc: str) -> None:
    xml = hierarchy(
        node("android.widget.Button", "[0,0][100,100]", text=text, content_desc=desc, clickable=True)
    )
    observation, _ = observed(xml)
    (parsed,) = parse_nodes(observation)
    assert (parsed.text, parsed.desc) == (
        text,
        desc if desc != text else "",
    )  # a desc equal to the text is not repeated
    assert parsed.clickable


# -- what it picks on real hierarchies ----------------------------------------------------------------


def test_picks_only_nodes_that_exist_and_afford_the_action() -> None:
    disabled = ("Chrome", "Messages")
    screens = [
        observed(LAUNCHER_DUMP.read_text("utf-8")),
        observed(launcher_with_disabled(*disabled)),
        *(observed(xml, "com.google.android.contacts") for xml in androidworld_screens()),
    ]
    mix = Mix(invalid=0.0)  # the invalid share is tested below
    verbs: dict[str, int] = {}
    behaviours: set[str] = set()
    tapped: list[set[str]] = [set() for _ in screens]  # texts of the nodes tapped, per screen
    for index, (text, screen) in enumerate(screens):
        for seed in range(60):
            ex = explorer(seed, mix)
            for _ in range(6):  # several turns on the same screen
                ex.observe(Observation(text=text))
                action, behaviour = ex.act()
                verb = check_affordance(action.text, screen, behaviour)
                verbs[verb] = verbs.get(verb, 0) + 1
                behaviours.add(behaviour.split(":")[0])
                if verb in ("tap", "long_press"):
                    tapped[index].add(screen.nodes[parse_call(action.text).args[0]].text)
    assert set(disabled) <= tapped[0]  # enabled, they are picked
    assert not set(disabled) & tapped[1]  # disabled, never
    assert {"tap", "long_press", "swipe", "type", "back", "open_app"} <= set(verbs)
    assert {"tap", "focus", "type", "long_press", "scroll", "navigate"} <= behaviours
    # AndroidWorld's "Contacts" title is a TextView that is not clickable: never tapped
    text, screen = screens[2]
    contacts = next(i for i, n in screen.nodes.items() if n.text == "Contacts")
    for seed in range(100):
        ex = explorer(seed, mix)
        ex.observe(Observation(text=text))
        assert ex.act()[0].text not in (f"tap('{contacts}')", f"long_press('{contacts}')")


def test_typing_goes_into_the_field_it_tapped_with_a_value_of_its_kind() -> None:
    screen = hierarchy(
        node(
            "android.widget.FrameLayout",
            "[0,0][1080,2400]",
            node(
                "android.widget.EditText",
                "[0,100][1080,200]",
                text="Phone",
                resource_id="com.google.android.contacts:id/phone",
                clickable=True,
            ),
        )
    )
    text, _ = observed(screen, "com.google.android.contacts")
    typed = []
    for seed in range(200):
        ex = explorer(seed, Mix(invalid=0.0, navigate=0.0))
        ex.observe(Observation(text=text))
        action, behaviour = ex.act()
        if behaviour != "focus:editable":
            continue
        assert action.text == "tap('1')"
        ex.observe(Observation(text=text))
        action, behaviour = ex.act()
        if behaviour == "type:field":
            typed.append(parse_call(action.text).args[0])
    assert len(typed) > 20
    phone_numbers = [v for v in typed if re.fullmatch(r"\+?\d[\d-]{6,}", v)]
    assert len(phone_numbers) > 0.65 * len(typed)  # phone numbers, mostly; wrong ones now and then
    assert len(phone_numbers) < len(typed)


def test_invalid_share_follows_the_mix_and_errors_are_followed_up() -> None:
    text, _ = observed(LAUNCHER_DUMP.read_text("utf-8"))
    for rate in (0.0, 0.3, 0.9):
        ex = explorer(5, Mix(invalid=rate))
        drawn = []
        for _ in range(600):
            ex.observe(Observation(text=text))
            drawn.append(ex.act()[1])
        share = drawn.count("invalid") / len(drawn)
        assert abs(share - rate / 3) < 0.05, (rate, share)
    error = text.replace("\n\n", "\nLast action error: no element [9999] on the current screen\n\n", 1)
    follow = []
    for seed in range(100):
        ex = explorer(seed, Mix(invalid=0.0, react=1.0))
        ex.observe(Observation(text=error, is_error=True))
        follow.append(ex.act()[1])
    assert set(follow) == {"react:tap"}


def test_same_seed_same_observations_same_actions() -> None:
    text, _ = observed(LAUNCHER_DUMP.read_text("utf-8"))
    other, _ = observed(androidworld_screens()[1], "com.google.android.contacts")

    def run(seed: int) -> list[str]:
        ex = explorer(seed, app=SETTINGS)
        out = []
        for i in range(30):
            ex.observe(Observation(text=text if i % 3 else other))
            out.append(ex.act()[0].text)
        return out

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_registered_for_android() -> None:
    assert explorer_class("android") is AndroidExplorer


# -- full episodes through the collection job -----------------------------------------------------------


def _replay(traj: Trajectory, task: dict[str, Any], seed: int | None = None) -> list[str]:
    """The actions a fresh explore policy picks when shown the observations `traj` recorded."""
    policy = ExplorePolicy(max_turns=30, seed=seed)
    policy.begin(
        Task.from_json(task),
        traj.action_space,
        Observation(text=str(traj.metadata["initial_observation"])),
        domain="android",
    )
    actions: list[str] = []
    observation: Observation | None = None
    for turn in traj.turns:
        decision = policy.next_action(observation)
        if decision.action is None:
            break
        actions.append(decision.action.text)
        observation = turn.observation
    return actions


def test_explore_episodes_through_the_collection_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(android, "connect_device", lambda serial: StandInDevice())
    monkeypatch.setenv(ENV_VAR, json.dumps({"mix": {"min_turns": 12, "max_turns": 12}}))
    # generated tasks on Settings (the stand-in device has Settings, the launcher and a crashing app)
    tasks = [t for t in generate("android", 40, 3) if t["android"]["app"] == SETTINGS][:6]
    assert len(tasks) == 6
    path = tmp_path / "android.jsonl"
    write_tasks(path, tasks)
    out = tmp_path / "out"
    collect(CollectConfig(env="android", tasks_path=path, policy="explore", out=out))
    trajectories = sorted(iter_trajectories(out), key=lambda t: t.metadata["task_id"])
    assert len(trajectories) == 6
    by_id = {t["id"]: t for t in tasks}
    behaviours: set[str] = set()
    for traj in trajectories:
        # Exploring the launcher may open Messages, which the stand-in makes crash: env_failure by design.
        crashed = traj.status == TrajectoryStatus.ENV_FAILURE and "crashed" in (traj.status_reason or "")
        assert crashed or traj.status == TrajectoryStatus.COMPLETE, traj.status_reason
        assert traj.source.agent == "explore"
        first = traj.turns[0].metadata["policy"]
        assert first["explore"]["domain"] == "android"
        assert crashed or first["explore"]["budget"] == len(traj.turns) == 12
        task = by_id[traj.metadata["task_id"]]
        recorded = [t.action.text for t in traj.turns]
        assert _replay(traj, task) == recorded  # same seed, same observations: same actions
        assert _replay(traj, task, seed=1) != recorded
        assert traj.metadata["task.generator"] == task["metadata"]["generator"]
        # every tap and long press named a node of the screen it was taken on that affords it
        screens = [str(traj.metadata["initial_observation"])] + [t.observation.text for t in traj.turns]
        for before, turn in zip(screens, traj.turns, strict=False):
            behaviour = turn.metadata["policy"]["behaviour"]
            behaviours.add(behaviour.split(":")[0])
            if behaviour.startswith(("tap", "long_press", "focus", "react:tap")):
                nodes = {n.id: n for n in parse_nodes(before)}
                target: HierarchyNode = nodes[parse_call(turn.action.text).args[0]]
                assert target.clickable or target.long_clickable, (turn.action.text, before)
    assert {"tap", "navigate"} <= behaviours
    assert any(t.state_changed for traj in trajectories for t in traj.turns)


# -- the generator -------------------------------------------------------------------------------------


def test_generator_same_seed_same_bytes_every_task_valid(tmp_path: Path) -> None:
    n = 3 * len(families("android"))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_tasks(a, generate("android", n, 21))
    write_tasks(b, generate("android", n, 21))
    assert a.read_bytes() == b.read_bytes()
    write_tasks(b, generate("android", n, 22))
    assert a.read_bytes() != b.read_bytes()
    tasks = [json.loads(line) for line in a.read_text("utf-8").splitlines()]
    for task in tasks:
        parsed = validated("android", task)  # AndroidEnvironment.validate_task
        assert parsed.domain_config("android")["app"]
        assert task["metadata"]["state_hash"] == state_hash(task)
        assert task["metadata"]["generator"].startswith("collectors.generators.android/")
        for action in task["actions"]:  # the plan parses as android actions
            if isinstance(action, str):
                assert parse_call(action).name in android.ANDROID_ACTIONS, action
            else:
                assert action["action"] == "tap" and set(action) - {"action"} <= set(android.TARGET_KEYS)


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_generator_distinct_initial_states(seed: int) -> None:
    n = 2 * len(families("android"))
    tasks = generate("android", n, seed)
    assert len({t["metadata"]["state_hash"] for t in tasks}) == n
    # the state space is the screens a task can start on: every one is reached in a long run
    many = generate("android", 400, seed)
    starts = {json.dumps(t["android"], sort_keys=True) for t in many}
    assert len({t["metadata"]["state_hash"] for t in many}) == len(starts) >= 34
