"""MiniWoB++ task pages for the web tests, from the `miniwob` package (PyPI, MIT: OpenAI, Stanford
University, Farama Foundation), which `make setup` installs without its Selenium and Gymnasium
requirements: only its `html/` folder is used, found without importing the package."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path


def miniwob_html() -> Path:
    """The package's html/ folder (miniwob/*.html task pages, core/, common/)."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the miniwob package is not installed: run `make setup`")
    return Path(next(iter(spec.submodule_search_locations))) / "html"


def miniwob_subset(dest: Path, pages: list[str]) -> Path:
    """A folder laid out like the package's html/ with only PAGES (names without .html) and the core/
    and common/ assets they load; returns DEST."""
    html = miniwob_html()
    for page in pages:
        (dest / "miniwob").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(html / "miniwob" / f"{page}.html", dest / "miniwob" / f"{page}.html")
    for rel in ("core/core.js", "core/core.css", "core/d3.v3.min.js", "common/ui_utils.js"):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(html / rel, dest / rel)
    return dest
