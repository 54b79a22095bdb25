"""Observations hold what the environment showed and nothing of ours: a screen or a listing cut at the
collector's cap carries the cut as a harness fact in turn metadata (schemas/turn_facts.py), never as
`[worldline: ...]` text. Android runs the real collector against a stand-in at the uiautomator2 API
boundary (as tests/collectors/test_collectors_android.py does) and through `collect`; OS builds the
observation from the AT-SPI helper's `tree` replies with the collector's own function and steps the
environment over a stand-in at the helper's JSON boundary; SWE runs the Read helper that the sandbox
runs, here with the host's Python on a real directory."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors import android, os_desktop
from collectors.android import MAX_NODES, AndroidEnvironment, parse_hierarchy
from collectors.collection import CollectConfig, collect
from collectors.environment import EnvironmentOptions, Task
from collectors.os_desktop import DesktopEnvironment, RunningApp, tree_observation
from collectors.swe import HELPER, READ_DEFAULT_LIMIT
from schemas import Action, ActionKind, TrajectoryStatus, iter_trajectories, turn_facts
from tests.collectors.test_collectors_android import SETTINGS, hierarchy, node

OURS = "[worldline:"


# -- android ----------------------------------------------------------------------------------------


def long_list(count: int) -> str:
    """A Settings screen whose list holds `count` labelled rows (one meaningful node each)."""
    rows = [
        node(
            "android.widget.TextView",
            f"[0,{i}][1080,{i + 1}]",
            text=f"Row {i}",
            resource_id="android:id/title",
        )
        for i in range(count)
    ]
    return hierarchy(
        node(
            "androidx.recyclerview.widget.RecyclerView",
            "[0,0][1080,1794]",
            *rows,
            scrollable=True,
        )
    )


class ListDevice:
    """A device at the uiautomator2 API boundary showing a list longer than the collector's cap; Back
    shortens it to `short` rows."""

    def __init__(self, rows: int, short: int = 3) -> None:
        self.rows = rows
        self.short = short
        self.info = {"productName": "sdk_gphone64_x86_64", "sdkInt": 34, "currentPackageName": SETTINGS}

    def app_info(self, package: str) -> dict[str, Any]:
        return {"versionName": "1.0"}

    def app_start(self, package: str, activity: str | None = None, **_: Any) -> None:
        pass

    def app_current(self) -> dict[str, str]:
        return {"package": SETTINGS, "activity": ".Settings"}

    def window_size(self) -> tuple[int, int]:
        return 1080, 1794

    def dump_hierarchy(self) -> str:
        return long_list(self.rows)

    def press(self, key: str) -> None:
        if key == "back":
            self.rows = self.short

    def swipe(self, *args: Any) -> None:
        pass


def test_android_screen_past_the_cap_is_a_turn_fact_not_text() -> None:
    device = ListDevice(MAX_NODES + 250)
    env = AndroidEnvironment(EnvironmentOptions(), device_factory=lambda serial: device)
    reset = env.reset(Task(id="long", instruction="x", config={"android": {"app": SETTINGS}}))
    # the RecyclerView (scrollable) is node 1, then rows 0 .. MAX_NODES - 2
    lines = reset.observation.text.splitlines()
    assert OURS not in reset.observation.text and "truncated" not in reset.observation.text
    assert (
        lines[-1]
        == f'  [{MAX_NODES}] TextView "Row {MAX_NODES - 2}" id=title [0,{MAX_NODES - 2}][1080,{MAX_NODES - 1}]'
    )
    # the reset screen's facts sit beside initial_observation; a trajectory's `harness` names a harness
    assert turn_facts.facts(reset.info, turn_facts.INITIAL) == {
        turn_facts.NODES_TRUNCATED: {"max_nodes": MAX_NODES, "nodes_shown": MAX_NODES}
    }
    assert turn_facts.HARNESS not in reset.info
    swiped = env.step(Action(kind=ActionKind.GUI, text="swipe('up')"))
    assert OURS not in swiped.observation.text and swiped.observation.text.endswith(lines[-1])
    assert turn_facts.facts(swiped.info)[turn_facts.NODES_TRUNCATED] == {
        "max_nodes": MAX_NODES,
        "nodes_shown": MAX_NODES,
    }
    back = env.step(Action(kind=ActionKind.GUI, text="back()"))  # a screen within the cap: no fact
    assert not turn_facts.has(back.info, turn_facts.NODES_TRUNCATED)
    assert back.observation.text.splitlines()[-1].startswith('  [4] TextView "Row 2"')


def test_android_cap_reaches_the_written_trajectory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(android, "connect_device", lambda serial: ListDevice(MAX_NODES * 2))
    tasks = tmp_path / "t.jsonl"
    task = {
        "id": "long",
        "instruction": "x",
        "android": {"app": SETTINGS},
        "actions": ["swipe('up')", "back()"],
    }
    tasks.write_text(json.dumps(task) + "\n")
    collect(CollectConfig(env="android", tasks_path=tasks, policy="scripted", out=tmp_path / "out"))
    (trajectory,) = list(iter_trajectories(tmp_path / "out"))
    assert trajectory.status == TrajectoryStatus.COMPLETE
    assert turn_facts.facts(trajectory.metadata, turn_facts.INITIAL) == {
        turn_facts.NODES_TRUNCATED: {"max_nodes": MAX_NODES, "nodes_shown": MAX_NODES}
    }
    assert turn_facts.HARNESS not in trajectory.metadata
    swiped, back = trajectory.turns
    assert turn_facts.facts(swiped.metadata) == {
        turn_facts.NODES_TRUNCATED: {"max_nodes": MAX_NODES, "nodes_shown": MAX_NODES}
    }
    assert turn_facts.facts(back.metadata) == {}
    assert all(OURS not in t.observation.text for t in trajectory.turns)


def test_real_dump_cut_lists_the_first_nodes_only() -> None:
    real = (
        Path(__file__).resolve().parents[1] / "fixtures" / "public" / "uiautomator_window_dump.xml"
    ).read_text()
    whole = parse_hierarchy(real)
    cut = parse_hierarchy(real, max_nodes=10)
    assert whole.max_nodes is None and cut.max_nodes == 10
    assert cut.text.splitlines() == whole.text.splitlines()[:10]
    meta: dict[str, Any] = {}
    cut.record_facts(meta)
    assert turn_facts.facts(meta) == {turn_facts.NODES_TRUNCATED: {"max_nodes": 10, "nodes_shown": 10}}


# -- os ---------------------------------------------------------------------------------------------


def push_buttons(count: int) -> list[dict[str, Any]]:
    """The helper's flat node list: a frame, a layout filler (folded) and `count` buttons."""
    nodes: list[dict[str, Any]] = [
        {
            "depth": 0,
            "path": [0],
            "role": "frame",
            "name": "Calc",
            "states": ["active"],
            "bounds": [0, 0, 400, 300],
        },
        {"depth": 1, "path": [0, 0], "role": "filler", "name": "", "states": []},
    ]
    nodes += [
        {
            "depth": 2,
            "path": [0, 0, i],
            "role": "push button",
            "name": f"b{i}",
            "states": [],
            "bounds": [i, 0, 5, 5],
        }
        for i in range(count)
    ]
    return nodes


def test_os_tree_cut_by_the_helper_is_a_fact_not_text() -> None:
    nodes = push_buttons(798)  # 800 nodes read: the helper's cap, one of them folded
    meta: dict[str, Any] = {}
    body, elements = tree_observation({"ok": True, "nodes": nodes, "truncated": True}, 800, meta)
    assert OURS not in body and "truncated" not in body
    assert len(elements) == 799 and body.splitlines()[-1] == '  [799] push button "b797" @797,0 5x5'
    assert turn_facts.facts(meta) == {turn_facts.NODES_TRUNCATED: {"max_nodes": 800, "nodes_shown": 799}}
    whole: dict[str, Any] = {}
    same, _ = tree_observation({"ok": True, "nodes": nodes, "truncated": False}, 800, whole)
    assert same == body and whole == {}


class HelperStandIn:
    """A DesktopSession at the helper's JSON boundary: `atspi` answers as collectors/atspi_helper.py
    does (apps, tree cut at max_nodes), xdotool calls are recorded."""

    def __init__(self, buttons: int) -> None:
        self.apps = [RunningApp(command=["gnome-calculator"], pid=42, name="gnome-calculator")]
        self.buttons = buttons
        self.calls: list[tuple[str, ...]] = []
        self.display = ":99"

    # what DesktopEnvironment.reset asks of a session it opened
    def start(self) -> HelperStandIn:
        return self

    def put_files(self, files: dict[str, str]) -> None:
        pass

    def focus_app(self, app: RunningApp) -> None:
        pass

    def close(self) -> None:
        pass

    def atspi(self, cmd: str, **request: Any) -> dict[str, Any]:
        if cmd == "apps":
            return {
                "ok": True,
                "apps": [
                    {
                        "pid": 42,
                        "name": "gnome-calculator",
                        "windows": [{"role": "frame", "name": "Calculator", "states": ["active"]}],
                    }
                ],
            }
        nodes = push_buttons(self.buttons)
        limit = int(request["max_nodes"])
        return {"ok": True, "nodes": nodes[:limit], "truncated": len(nodes) > limit}

    def windows_of(self, app: RunningApp) -> list[str]:
        return ["1"]

    def exit_reasons(self, apps: list[RunningApp] | None = None) -> dict[int, str]:
        return {}

    def xdotool(self, *args: str) -> str:
        self.calls.append(args)
        return ""


def test_os_reset_records_the_cut_beside_the_initial_observation(monkeypatch: pytest.MonkeyPatch) -> None:
    session = HelperStandIn(buttons=900)
    monkeypatch.setattr(os_desktop, "desktop_sandbox", lambda client, limits, label: None)
    monkeypatch.setattr(os_desktop, "DesktopSession", lambda sandbox: session)
    env = DesktopEnvironment(EnvironmentOptions(client=object()))  # type: ignore[arg-type]
    reset = env.reset(Task(id="calc", instruction="x", config={"os": {"apps": [], "settle_s": 0}}))
    assert OURS not in reset.observation.text and OURS not in (reset.initial_state or "")
    assert turn_facts.facts(reset.info, turn_facts.INITIAL) == {
        turn_facts.NODES_TRUNCATED: {"max_nodes": 800, "nodes_shown": 799}
    }
    assert turn_facts.HARNESS not in reset.info
    session.buttons = 5
    assert (
        turn_facts.INITIAL
        not in env.reset(Task(id="calc", instruction="x", config={"os": {"settle_s": 0}})).info
    )


def test_os_step_records_the_cut_in_turn_metadata() -> None:
    env = DesktopEnvironment(EnvironmentOptions())
    session = HelperStandIn(buttons=1000)
    env.session = session  # type: ignore[assignment]
    env.focused_pid, env.known_windows, env.shown_windows = 42, ["1"], 1
    result = env.step(Action(kind=ActionKind.CODE, text="moveTo(10, 10)"))
    assert ("mousemove", "--sync", "10", "10") in session.calls
    assert OURS not in result.observation.text
    assert turn_facts.facts(result.info) == {
        turn_facts.NODES_TRUNCATED: {"max_nodes": 800, "nodes_shown": 799}
    }
    session.buttons = 5
    small = env.step(Action(kind=ActionKind.CODE, text="moveTo(20, 20)"))
    assert turn_facts.facts(small.info) == {} and small.observation.text.endswith(
        '[6] push button "b4" @4,0 5x5'
    )
    env.session = None


# -- swe: the Read helper ---------------------------------------------------------------------------


def read(root: Path, cap: int, **args: Any) -> dict[str, Any]:
    """The Read tool's reply from the helper the sandbox runs (collectors/swe.py HELPER)."""
    request = {"op": "read", "root": str(root), "default_limit": READ_DEFAULT_LIMIT, "cap": cap, "args": args}
    payload = base64.b64encode(json.dumps(request).encode()).decode()
    out = subprocess.run([sys.executable, "-c", HELPER, payload], capture_output=True, check=True, text=True)
    reply: dict[str, Any] = json.loads(out.stdout)
    return reply


def listing(lines: list[str], first: int = 1) -> str:
    return "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(lines, start=first))


def test_swe_read_cut_at_the_cap_is_a_fact_on_a_line_boundary(tmp_path: Path) -> None:
    lines = [f"line {i} é" for i in range(3000)]
    (tmp_path / "big.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    reply = read(tmp_path, 4096, path="big.txt")
    text = reply["text"]
    assert OURS not in text and not reply["error"]
    last = int(text.rsplit("\n", 1)[1].split("\t")[0])
    assert text == listing(lines[:last])  # whole lines only, exactly the file's
    whole = listing(lines[:READ_DEFAULT_LIMIT])  # what Read shows without the cap
    assert reply["truncated"] == {"bytes_total": len(whole.encode()), "bytes_kept": len(text.encode())}
    assert len(text.encode()) <= 4096 < len(text.encode()) + len(f"{last + 1:6d}\t{lines[last]}\n".encode())
    follow = read(tmp_path, 4096, path="big.txt", offset=last + 1, limit=2)
    assert follow["text"] == listing(lines[last : last + 2], first=last + 1) and "truncated" not in follow
    assert "truncated" not in read(tmp_path, 1 << 20, path="big.txt", limit=100)


def test_swe_read_first_line_longer_than_the_cap(tmp_path: Path) -> None:
    (tmp_path / "min.js").write_text("x" * 10_000 + "\nshort\n")
    reply = read(tmp_path, 1000, path="min.js")
    assert reply["text"] == ("     1\t" + "x" * 10_000)[:1000]
    assert reply["truncated"] == {"bytes_total": 7 + 10_000 + 1 + 7 + 5, "bytes_kept": 1000}


# -- no collector-side observation builder writes our text --------------------------------------------

# Labels a screen may show; "[" is left out so that a label can never spell our marker itself.
_PRINTABLE = st.text(
    st.characters(whitelist_categories=("L", "N", "P", "S", "Zs"), blacklist_characters="["), max_size=12
)


@given(rows=st.integers(1, 120), cap=st.integers(1, 60), label=_PRINTABLE)
def test_android_builder_never_writes_ours(rows: int, cap: int, label: str) -> None:
    screen = parse_hierarchy(long_list(rows).replace("Row ", _xml(label) + " "), max_nodes=cap)
    assert OURS not in screen.text
    assert (screen.max_nodes is not None) == (rows + 1 > cap)
    assert len(screen.text.splitlines()) == min(rows + 1, cap)


@given(buttons=st.integers(0, 200), cap=st.integers(1, 80), name=_PRINTABLE)
def test_os_builder_never_writes_ours(buttons: int, cap: int, name: str) -> None:
    nodes = [{**n, "name": name if n["role"] == "push button" else n["name"]} for n in push_buttons(buttons)]
    meta: dict[str, Any] = {}
    body, elements = tree_observation(
        {"ok": True, "nodes": nodes[:cap], "truncated": len(nodes) > cap}, cap, meta
    )
    assert OURS not in body
    assert turn_facts.has(meta, turn_facts.NODES_TRUNCATED) == (len(nodes) > cap)
    if len(nodes) > cap:
        assert turn_facts.facts(meta)[turn_facts.NODES_TRUNCATED] == {
            "max_nodes": cap,
            "nodes_shown": len(elements),
        }


@settings(max_examples=60)
@given(
    lines=st.lists(
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00["), max_size=80),
        min_size=1,
        max_size=60,
    ),
    cap=st.integers(8, 600),
)
def test_swe_read_never_writes_ours(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], cap: int
) -> None:
    root = tmp_path_factory.mktemp("read")
    (root / "f.txt").write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    reply = read(root, cap, path="f.txt")
    text = reply["text"]
    assert OURS not in text and len(text.encode()) <= cap
    whole = listing(lines)
    if len(whole.encode()) <= cap:
        assert text == whole and "truncated" not in reply
    else:
        assert reply["truncated"] == {"bytes_total": len(whole.encode()), "bytes_kept": len(text.encode())}
        assert whole.startswith(text)


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
