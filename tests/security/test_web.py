"""Web containment: hostile start URLs, navigations and pages through the real collector, the real
engine and the real Chromium in its sandbox (worldline/browser), against the host canary.

The browser runs in a container with no network; the bundled sites (with the lab's hostile pages) are
served inside it. Every attack below is refused before its request leaves the browser, and the refusal
is the environment's answer: a refused start URL ends the trajectory as `env_failure` with the reason,
a refused navigation is an error observation (`Last action error: navigation to ... refused`), and
every refused request, WebSocket, download and file dialog is listed in the turn's `info["refused"]`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psutil
import pytest

from collectors import engine
from collectors.collection import CollectConfig, collect
from collectors.sandbox import LABEL, LABEL_OWNER_PID
from schemas import Trajectory, TrajectoryStatus, iter_trajectories
from schemas.shards import iter_record_batches
from tests.security.canary import HostCanary

pytestmark = pytest.mark.engine


def forbidden_urls(canary: HostCanary) -> dict[str, str]:
    port = canary.tcp_port
    return {
        "etc-passwd": "file:///etc/passwd",
        "canary-file": f"file://{canary.file}",
        "loopback": f"http://127.0.0.1:{port}/",
        "localhost": f"http://localhost:{port}/",
        "ipv6-loopback": f"http://[::1]:{port}/",
        "chrome-settings": "chrome://settings",
        "view-source": f"view-source:file://{canary.file}",
        "javascript": f"javascript:fetch('http://127.0.0.1:{port}/')",
        "other-port": "http://127.0.0.1:8001/",
    }


def attack_tasks(canary: HostCanary) -> list[dict[str, Any]]:
    urls = forbidden_urls(canary)
    port = canary.tcp_port
    tasks: list[dict[str, Any]] = [
        {"id": f"start-{name}", "instruction": "attack", "web": {"start_url": url}, "actions": []}
        for name, url in urls.items()
    ]
    tasks.append(
        {
            "id": "goto-forbidden",
            "instruction": "attack",
            "web": {"start_url": "{sites}/shop/"},
            "actions": [f"goto({url!r})" for url in urls.values()],
        }
    )
    redirect = "{sites}/lab/redirect?to="
    tasks.append(
        {
            "id": "redirect",
            "instruction": "attack",
            "web": {"start_url": "{sites}/wiki/"},
            "actions": [
                f"goto({redirect + quote(urls['loopback'], safe='')!r})",
                "go_back()",
                f"goto({redirect + quote(urls['canary-file'], safe='')!r})",
            ],
        }
    )
    probe = f"http://127.0.0.1:{port}/probe"
    tasks.append(
        {
            "id": "page-requests",
            "instruction": "attack",
            "web": {
                "start_url": "{sites}/lab/probe?"
                + f"fetch={quote(probe, safe='')}&ws={quote(f'ws://127.0.0.1:{port}/', safe='')}"
                + f"&img={quote(probe + '.png', safe='')}"
            },
            "actions": ["noop(800)"],
        }
    )
    tasks.append(
        {
            "id": "links",
            "instruction": "attack",
            "web": {"start_url": "{sites}/lab/link?to=" + quote(urls["canary-file"], safe="")},
            "actions": [
                {"action": "click", "role": "link", "name": "Open the target"},
                "goto('{sites}/lab/link?to=" + quote(urls["loopback"], safe="") + "')",
                {"action": "click", "role": "link", "name": "Open the target"},
            ],
        }
    )
    tasks.append(
        {
            "id": "download-and-upload",
            "instruction": "attack",
            "web": {"start_url": "{sites}/lab/downloads"},
            "actions": [
                {"action": "click", "role": "link", "name": "Download the report"},
                "goto('{sites}/lab/upload')",
                {"action": "click", "role": "button", "name": "Attachment"},
            ],
        }
    )
    return tasks


def own_sandboxes() -> list[Any]:
    client = engine.connect()
    return [
        c
        for c in client.containers.list(all=True, filters={"label": LABEL})
        if (c.labels or {}).get(LABEL_OWNER_PID) == str(os.getpid())
    ]


def browser_processes_on_host() -> list[str]:
    """Processes of a web sandbox still alive: the helper, or a Chromium in a container's cgroup."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if "browser_helper.py" in cmdline:
            found.append(f"{proc.info['pid']}: {cmdline[:120]}")
        elif "chromium" in cmdline:
            try:
                cgroup = Path(f"/proc/{proc.info['pid']}/cgroup").read_text()
            except OSError:
                continue
            if "libpod" in cgroup or "docker" in cgroup:
                found.append(f"{proc.info['pid']}: {cmdline[:120]}")
    return found


def produced_texts(out: Path) -> list[str]:
    texts = [
        json.dumps(rec, default=str) for _, batch in iter_record_batches(out) for rec in batch.to_pylist()
    ]
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".txt", ".log", ".cast"):
            texts.append(path.read_text("utf-8", errors="replace"))
    return texts


def refused_of(trajectory: Trajectory) -> list[dict[str, Any]]:
    """Everything the allow-list refused in an episode: at reset and in every turn."""
    found = list(trajectory.metadata.get("refused") or [])
    for turn in trajectory.turns:
        found += turn.metadata.get("refused") or []
    return found


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_hostile_urls_and_pages_are_refused_in_the_sandbox(host_canary: HostCanary, tmp_path: Path) -> None:
    tasks = attack_tasks(host_canary)
    urls = forbidden_urls(host_canary)
    path = tmp_path / "attacks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = tmp_path / "out"
    summary = collect(CollectConfig(env="web", tasks_path=path, policy="scripted", out=out, concurrency=2))
    assert summary.written == len(tasks)
    by_id = {t.metadata["task_id"]: t for t in iter_trajectories(out)}

    # A forbidden start URL: nothing is loaded, the episode ends at once and says why.
    for name in urls:
        trajectory = by_id[f"start-{name}"]
        assert trajectory.status == TrajectoryStatus.ENV_FAILURE, (name, trajectory.status_reason)
        reason = trajectory.status_reason or ""
        assert "start URL" in reason and re.search(r"is not allowed|not in the task's allow-list", reason), (
            name,
            reason,
        )
        assert trajectory.turns == []

    # A forbidden goto: an error observation naming the refusal; the tab keeps its page.
    gotos = by_id["goto-forbidden"]
    assert gotos.status == TrajectoryStatus.COMPLETE and len(gotos.turns) == len(urls)
    for turn, url in zip(gotos.turns, urls.values(), strict=True):
        assert turn.observation.is_error, url
        assert (
            "Last action error: navigation to" in turn.observation.text and "refused" in turn.observation.text
        )
        assert turn.metadata["action_error"] == "refused"
        assert turn.metadata["refused"][0]["url"] == url
        assert "/shop/" in turn.observation.text.splitlines()[0]  # URL: ... still the shop

    # A redirect from an allowed page to the host's loopback or a host file is stopped at the redirect.
    redirect = by_id["redirect"]
    assert redirect.status == TrajectoryStatus.COMPLETE, redirect.status_reason
    first, _, third = redirect.turns
    for turn in (first, third):
        assert turn.observation.is_error and "refused" in turn.observation.text, turn.observation.text[:500]
    assert any("redirects outside the task's allow-list" in r["reason"] for r in first.metadata["refused"])
    assert "redirect to a local resource" in third.metadata["refused"][0]["reason"]

    # The page's own fetch, WebSocket and image to the host's port never leave the browser.
    page = by_id["page-requests"]
    assert page.status == TrajectoryStatus.COMPLETE, page.status_reason
    kinds = {r["kind"] for r in refused_of(page)}
    assert {"fetch", "websocket", "image"} <= kinds, refused_of(page)
    assert "fetch failed" in page.turns[-1].observation.text

    # Links to a host file and to the host's loopback are refused where they are clicked.
    links = by_id["links"]
    assert links.status == TrajectoryStatus.COMPLETE, links.status_reason
    assert links.turns[0].metadata.get("refused"), links.turns[0].metadata
    assert links.turns[2].observation.is_error and "refused" in links.turns[2].observation.text
    assert any(r["url"] == urls["loopback"] for r in links.turns[2].metadata["refused"])

    # A download is refused and a file dialog is offered no file.
    files = by_id["download-and-upload"]
    assert files.status == TrajectoryStatus.COMPLETE, files.status_reason
    kinds = {r["kind"] for r in refused_of(files)}
    assert {"download", "filechooser"} <= kinds, refused_of(files)

    host_canary.assert_untouched(produced_texts(out))
    assert own_sandboxes() == []
    assert browser_processes_on_host() == []
