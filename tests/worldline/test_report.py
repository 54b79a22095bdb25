"""`worldline report`: a self-contained page of a pools build whose plots all render in real Chromium."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.helpers.pools_data import build_fixture_pools
from worldline.cli import app
from worldline.report import FIGURES, load_build, render_report

ARTEFACTS = Path(__file__).resolve().parents[1] / "artefacts"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out, _ = build_fixture_pools(tmp_path_factory.mktemp("report"))
    return out


def test_page_is_self_contained_and_figures_follow_the_build(built: Path) -> None:
    build = load_build(built)
    page = render_report(build)
    # No address outside the page: plotly.js is inline, nothing is fetched when it opens.
    assert not re.search(r"""<(script|link|img)[^>]+(src|href)=["']?(https?:)?//""", page)
    assert page.count("<script>") >= 1 and "Plotly" in page
    manifest = json.loads((built / "manifest.json").read_text())
    counts = manifest["counts"]
    assert f"{counts['records_in']} records in" in page
    # Every figure with data is there; the token histograms hold every sample of each pool.
    for name, make in FIGURES:
        if make(build) is not None:
            assert f"data-plot='{name}'" in page
    figure = dict(FIGURES)["token-lengths"](build)
    histogram_sizes = {trace.name: len(trace.x) for trace in figure.data}
    assert histogram_sizes == {pool: build.pools[pool].num_rows for pool in build.pools}
    mix = dict(FIGURES)["mix"](build)
    assert sum(sum(map(sum, trace.z)) for trace in mix.data) == sum(t.num_rows for t in build.pools.values())


def test_report_command_errors_name_the_folder(tmp_path: Path, built: Path) -> None:
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "no manifest.json" in result.output and "Traceback" not in result.output
    dataset = tmp_path / "ds"
    dataset.mkdir()
    (dataset / "manifest.json").write_text('{"kind": "worldline.trajectories"}')
    result = CliRunner().invoke(app, ["report", str(dataset)])
    assert result.exit_code == 2 and "not a pools build" in result.output
    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    next(copy.glob("sft/*.parquet")).unlink()
    result = CliRunner().invoke(app, ["report", str(copy)])
    assert result.exit_code == 2 and "no such file exists" in result.output


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed (infra/install-system.sh)"
)
def test_every_plot_renders_in_headless_chromium(built: Path, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    target = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(built), "--out", str(target)])
    assert result.exit_code == 0, result.output
    expected = [name for name, make in FIGURES if make(load_build(built)) is not None]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            requests: list[str] = []
            errors: list[str] = []
            page.on("request", lambda request: requests.append(request.url))
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(target.as_uri())
            page.wait_for_function(
                f"document.querySelectorAll('.plot .main-svg').length >= {len(expected)}", timeout=30_000
            )
            assert requests == [target.as_uri()] and errors == []
            for name in expected:
                plot = page.locator(f"div[data-plot='{name}'] .js-plotly-plot")
                box = plot.bounding_box()
                assert box is not None and box["width"] > 300 and box["height"] > 300, name
                # Each plot drew marks: bars, heatmap cells, pie slices or waterfall steps.
                marks = plot.locator("g.point, g.slice, g.hm, image, path.js-line, g.trace.bars path")
                assert marks.count() > 0, f"plot {name} drew nothing"
            ARTEFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTEFACTS / "pools-report.png"), full_page=True)
        finally:
            browser.close()
    assert (ARTEFACTS / "pools-report.png").stat().st_size > 20_000
