"""`autoresearch status` and `report`: the HTML page is self-contained and renders in real Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from prompt_autoresearch.cli import app
from prompt_autoresearch.report import render_report
from tests.helpers.autoresearch_world import FakeWorld, env_for, write_data
from tests.helpers.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.helpers.fakellm import FakeLLMServer


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 2 x 2 experiment with a keep, a discard inside the noise floor and a rejected candidate."""
    root = tmp_path_factory.mktemp("report")
    data = write_data(root)
    world = FakeWorld(
        plan={
            ("short constraint list", 2): "up:1",
            ("concise checklist", 1): "drop:demonstrations",
        }
    )
    server = FakeLLMServer().start()
    server.set_default(world)
    try:
        args = ["run", "--domain", "terminal", "--runs", "2", "--iterations", "2", "--eval-size", "2"]
        args += ["--quiet", "--data", str(data), "--out", str(root / "rd")]
        result = CliRunner().invoke(app, args, env=env_for(server.base_url))
        assert result.exit_code == 0, result.output
    finally:
        server.close()
    return root / "rd"


def test_status_shows_progress_leaderboard_and_cost(experiment: Path) -> None:
    result = CliRunner().invoke(app, ["status", str(experiment)])
    assert result.exit_code == 0
    assert "2/2 runs done" in result.output and "leaderboard" in result.output and "calls" in result.output
    as_json = json.loads(CliRunner().invoke(app, ["status", str(experiment), "--json"]).output)
    assert as_json["runs_done"] == 2 and as_json["iterations_done"] == 4 and as_json["usage"]["calls"] > 0
    missing = CliRunner().invoke(app, ["status", str(experiment.parent / "nope")])
    assert missing.exit_code == 2 and "no state.json" in missing.output


def test_report_is_self_contained_and_escapes_template_text(experiment: Path) -> None:
    state = json.loads((experiment / "state.json").read_text())
    row = state["runs"]["0"]["candidates"][1]
    row["text"] += "<script>alert(1)</script>\n"
    row["description"] = "<img src=x onerror=alert(2)>"
    page = render_report(state)
    assert "<script" not in page and "<img" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert page.count('class="frontier"') == 2


@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed (infra/install-system.sh)"
)
def test_report_renders_in_headless_chromium(experiment: Path) -> None:
    from playwright.sync_api import sync_playwright

    result = CliRunner().invoke(app, ["report", str(experiment)])
    assert result.exit_code == 0, result.output
    page_path = experiment / "report.html"
    state = json.loads((experiment / "state.json").read_text())
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            requests: list[str] = []
            errors: list[str] = []
            page.on("request", lambda request: requests.append(request.url))
            page.on(
                "console", lambda message: errors.append(message.text) if message.type == "error" else None
            )
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(page_path.as_uri())
            assert requests == [page_path.as_uri()] and errors == []
            plots = page.locator("svg.frontier")
            assert plots.count() == 2
            for index, (_, rs) in enumerate(sorted(state["runs"].items())):
                plot = plots.nth(index)
                box = plot.bounding_box()
                assert box is not None and box["width"] > 100 and box["height"] > 100
                scored = [c for c in rs["candidates"] if c["score"] is not None]
                assert plot.locator("circle.point").count() == len(scored)
                assert plot.locator("polyline.frontier-line").count() == 1
            lineage = page.locator("table.lineage tr")
            assert lineage.count() == 2 + 6  # a header per run, six candidates
            assert page.locator("td.crash").count() == 1 and page.locator("td.discard").count() >= 1
            # Kept candidates get a side-by-side diff against their parent.
            assert page.locator("table.diff").count() >= 2
            assert "Quality level" in page.locator("table.diff").first.inner_text().replace("\xa0", " ")
            page.screenshot(path=str(experiment / "report.png"), full_page=True)
        finally:
            browser.close()
    assert (experiment / "report.png").stat().st_size > 10_000
