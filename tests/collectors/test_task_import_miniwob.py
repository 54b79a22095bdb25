"""`worldline tasks import miniwob`: MiniWoB++ pages (six of the miniwob package's html/ folder, laid
out as it has them: tests/helpers/miniwob.py) become valid web tasks, and imported tasks are
collected in the real browser sandbox: the page's episode starts with its seed, the observation shows
the page's query and elements, and the page's own reward ends the episode."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collectors.collection import CollectConfig, collect
from collectors.environment import Task, TaskError
from collectors.generators import state_hash, validated, write_tasks
from collectors.static_site import SITE_MANIFEST, StaticSiteError, read_site, tree_digest, write_site_manifest
from collectors.task_import import SuiteError, import_suite
from collectors.web import WebEnvironment
from schemas import TrajectoryStatus, iter_trajectories
from tests.helpers.miniwob import miniwob_subset
from worldline.cli import app

PAGES = ["choose-list", "click-button", "click-link", "enter-text", "focus-text", "login-user"]


@pytest.fixture(scope="module")
def html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return miniwob_subset(tmp_path_factory.mktemp("miniwob") / "html", PAGES)


def test_every_page_and_seed_becomes_a_valid_web_task(tmp_path: Path, html: Path) -> None:
    result = import_suite("miniwob", html, site_dir=tmp_path / "site", seeds=2)
    assert result.skipped == [] and len(result.tasks) == 2 * len(PAGES)
    for domain, task in result.tasks:
        assert domain == "web"
        validated("web", task)
        meta = task["metadata"]
        assert meta["suite"] == "miniwob" and meta["suite_task_id"] in PAGES
        assert meta["state_hash"] == state_hash(task)
        assert task["id"] == f"miniwob-{meta['suite_task_id']}-s{meta['miniwob_seed']}"
        assert task["web"]["miniwob"] == {"seed": meta["miniwob_seed"]}
        assert task["web"]["static"] == {"miniwob": str((tmp_path / "site").resolve())}
    copied = sorted(p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("*.*"))
    assert copied == sorted(
        [".worldline-site.json", "common/ui_utils.js", "core/core.css", "core/core.js", "core/d3.v3.min.js"]
        + [f"miniwob/{p}.html" for p in PAGES]
    )
    served = read_site(tmp_path / "site", "test")  # the manifest lists every copied file, itself aside
    assert sorted(served) == [c for c in copied if c != ".worldline-site.json"]
    assert tree_digest(served) == result.tasks[0][1]["metadata"]["miniwob_site_sha256"]
    assert (tmp_path / "site" / "core" / "core.js").read_bytes() == (html / "core" / "core.js").read_bytes()
    with pytest.raises(SuiteError, match="not a MiniWoB"):
        import_suite("miniwob", html / "core", site_dir=tmp_path / "x")


@pytest.mark.parametrize(
    "web",
    [
        {"static": {"shop": "/x"}},  # a bundled app's name
        {"static": {"miniwob": "relative/path"}},
        {"miniwob": {"seed": "3"}},
        {"miniwob": {"seed": 1, "speed": 2}},
        {"miniwob": {}},
    ],
)
def test_bad_static_or_miniwob_fields_are_refused(web: dict[str, object]) -> None:
    task = Task(id="t", instruction="x", config={"web": {"start_url": "{sites}/miniwob/", **web}})
    with pytest.raises(TaskError):
        WebEnvironment.validate_task(task)


def test_cli_writes_the_tasks_and_the_site(tmp_path: Path, html: Path) -> None:
    out = tmp_path / "mw.jsonl"
    run = CliRunner().invoke(
        app, ["tasks", "import", "miniwob", str(html), "--out", str(out), "--seeds", "3"]
    )
    assert run.exit_code == 0, run.output
    assert f"imported {3 * len(PAGES)} miniwob tasks" in run.output
    tasks = [json.loads(line) for line in out.read_text().splitlines()]
    assert {t["web"]["static"]["miniwob"] for t in tasks} == {str(out.with_suffix(".site").resolve())}


@pytest.mark.engine
def test_imported_tasks_collected_in_the_browser_sandbox(tmp_path: Path, html: Path) -> None:
    os.environ.setdefault("DOCKER_HOST", "unix:///tmp/worldline-podman.sock")
    tasks = {t["id"]: t for _, t in import_suite("miniwob", html, site_dir=tmp_path / "site").tasks}
    explore = tasks["miniwob-click-button-s0"]
    write_tasks(tmp_path / "explore.jsonl", [explore])
    summary = collect(
        CollectConfig(env="web", tasks_path=tmp_path / "explore.jsonl", policy="explore", out=tmp_path / "e")
    )
    assert summary.written == 1
    [traj] = list(iter_trajectories(tmp_path / "e"))
    assert traj.status in (TrajectoryStatus.COMPLETE, TrajectoryStatus.TRUNCATED), traj.status_reason
    meta = traj.metadata
    assert (meta["task.suite"], meta["task.suite_task_id"], meta["task.miniwob_seed"]) == (
        "miniwob",
        "click-button",
        0,
    )
    utterance = meta["miniwob"]["utterance"]
    asked = re.fullmatch(r'Click on the "(.+)" button\.', utterance)
    assert asked, utterance
    first = meta["initial_observation"]
    assert utterance in first and re.search(rf'- button "{re.escape(asked.group(1))}" \[ref=e\d+\]', first)
    assert "START" not in first and "Last reward" not in first  # the episode runs; the HUD is hidden
    assert all("miniwob" in t.metadata for t in traj.turns)

    # The same seed draws the same problem: a scripted click on the asked button ends the episode
    # with the page's positive reward.
    scripted = dict(tasks["miniwob-click-button-s0"])
    scripted["actions"] = [{"action": "click", "role": "button", "name": asked.group(1), "exact": True}]
    write_tasks(tmp_path / "scripted.jsonl", [scripted])
    collect(
        CollectConfig(
            env="web", tasks_path=tmp_path / "scripted.jsonl", policy="scripted", out=tmp_path / "s"
        )
    )
    [done] = list(iter_trajectories(tmp_path / "s"))
    assert done.status == TrajectoryStatus.COMPLETE, done.status_reason
    assert done.metadata["miniwob"]["utterance"] == utterance
    [turn] = done.turns
    assert turn.metadata["miniwob"]["done"] is True and turn.metadata["miniwob"]["reward"] > 0
    assert "MiniWoB++ episode ended with reward" in done.metadata["stop_reason"]


def test_static_trees_are_served_read_only_and_contained(tmp_path: Path, html: Path) -> None:
    import urllib.error
    import urllib.request

    from collectors.sites import serve_sites

    (tmp_path / "secret.txt").write_text("outside")
    site = tmp_path / "site"
    import_suite("miniwob", html, site_dir=site)
    server = serve_sites()
    try:
        server.static = {"miniwob": str(site)}
        with urllib.request.urlopen(f"{server.base_url}/miniwob/core/core.js") as r:
            assert r.read() == (html / "core" / "core.js").read_bytes()
            assert "javascript" in r.headers["Content-Type"]
        for path in ("/miniwob/../secret.txt", "/miniwob/%2e%2e/secret.txt", "/miniwob/", "/miniwob/core/"):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(server.base_url + path)
            assert err.value.code == 404 and b"outside" not in err.value.read()
        post = urllib.request.Request(f"{server.base_url}/miniwob/core/core.js", data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError):  # not a static file: the bundled apps' 404
            urllib.request.urlopen(post)
        server.static = {}
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"{server.base_url}/miniwob/core/core.js")
    finally:
        server.stop()


def test_a_task_cannot_serve_a_folder_that_is_not_a_site(tmp_path: Path) -> None:
    """`web.static` serves only a folder with a site manifest, only the files it lists, each a regular
    file inside the folder with the listed hash: naming /etc, a home folder, a symlink out or a
    tampered file is refused, never copied into the sandbox and shown to the page."""
    secret = tmp_path / "home" / ".ssh"
    secret.mkdir(parents=True)
    (secret / "id_rsa").write_text("PRIVATE KEY")
    for folder in ("/etc", str(tmp_path / "home")):
        task = Task(
            id="t", instruction="x", config={"web": {"start_url": "{sites}/s/", "static": {"s": folder}}}
        )
        with pytest.raises(TaskError, match="not a site folder"):
            WebEnvironment.validate_task(task)
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<p>hi</p>")
    write_site_manifest(site, ["index.html"])
    assert read_site(site, "t") == {"index.html": b"<p>hi</p>"}
    (site / "index.html").write_text("<p>changed</p>")
    with pytest.raises(StaticSiteError, match="changed since its manifest"):
        read_site(site, "t")
    (site / "index.html").write_text("<p>hi</p>")
    (site / "leak.txt").symlink_to(secret / "id_rsa")
    manifest = json.loads((site / SITE_MANIFEST).read_text())
    for bad, match in (
        ("leak.txt", "not a regular file inside"),
        ("../home/.ssh/id_rsa", "not a path inside"),
        ("/etc/passwd", "not a path inside"),
    ):
        (site / SITE_MANIFEST).write_text(json.dumps({**manifest, "files": {bad: "0" * 64}}))
        with pytest.raises(StaticSiteError, match=match):
            read_site(site, "t")
    (site / SITE_MANIFEST).write_text('{"kind": "something else", "files": {}}')
    with pytest.raises(StaticSiteError, match="not a worldline.static-site manifest"):
        read_site(site, "t")
