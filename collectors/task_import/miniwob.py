"""MiniWoB++ task pages (the `miniwob` package's `html/` folder: miniwob/*.html with core/ and common/)
as web tasks, one per page and seed.

The pages are copied into a site folder (`site_dir`, default: beside the task file) that each task
names in `web.static` as `miniwob`; the web domain copies it into the browser sandbox and its sites
server serves it read-only at {sites}/miniwob/, on the bundled sites' own origin, so the allow-list is
the usual one. A page draws its problem and its instruction (`#query`) only when an episode starts, so
the task's instruction says to do what the page's query asks, and `web.miniwob` ({"seed": N}) has the
web domain start the episode as the package's own environment does and record the page's utterance,
reward and end (collectors/web_episodes.py).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collectors.static_site import write_site_manifest
from collectors.task_import import Item, SuiteError, with_provenance

SUITE = "miniwob"
# Pages that are not tasks (the package's index and its flight tasks' wrappers live elsewhere).
_REF = re.compile(r"""(?:src|href)\s*=\s*["']([^"'#?]+)""")


def pages(root: Path) -> list[Path]:
    found = sorted((root / "miniwob").glob("*.html"))
    if not found or not (root / "core" / "core.js").is_file():
        raise SuiteError(
            f"{root}: not a MiniWoB++ html folder (needs miniwob/*.html and core/core.js, as the miniwob "
            "package's html/ folder has)"
        )
    return found


def referenced(root: Path, page: Path) -> set[Path]:
    """The local files a page loads (scripts, stylesheets, images), inside `root`."""
    out: set[Path] = set()
    for ref in _REF.findall(page.read_text("utf-8", "replace")):
        if ":" in ref or ref.startswith("/"):
            continue
        target = (page.parent / ref).resolve()
        if target.is_file() and target.is_relative_to(root.resolve()):
            out.add(target)
    return out


def copy_site(root: Path, chosen: list[Path], site_dir: Path) -> str:
    """Copy the chosen pages, everything they load and the whole core/ into `site_dir`, listed in its
    site manifest (collectors/static_site.py); returns the tree's sha256, recorded in each task."""
    files = set(chosen) | {p.resolve() for p in (root / "core").rglob("*") if p.is_file()}
    for page in chosen:
        files |= referenced(root, page)
    copied = []
    for src in sorted(files):
        rel = src.relative_to(root.resolve())
        dest = site_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        copied.append(rel.as_posix())
    return write_site_manifest(site_dir, copied)


def title(page: Path) -> str:
    found = re.search(r"<title>(.*?)</title>", page.read_text("utf-8", "replace"), re.S | re.I)
    return found.group(1).strip() if found else page.stem


def read(path: str | Path, site_dir: str | Path | None = None, seeds: int = 1, **_: Any) -> Iterator[Item]:
    root = Path(path).resolve()
    chosen = [p.resolve() for p in pages(root)]
    site = Path(site_dir) if site_dir else root.parent / f"{root.name}-worldline-site"
    site = site.resolve()
    tree_sha = copy_site(root, chosen, site)
    for page in chosen:
        name = page.stem
        for seed in range(max(1, seeds)):
            task = {
                "id": f"miniwob-{name}-s{seed}",
                "instruction": (
                    f"Do what the MiniWoB++ page {name} asks in its query (the instruction at the top of "
                    "the page)."
                ),
                "web": {
                    "start_url": f"{{sites}}/miniwob/miniwob/{name}.html",
                    "static": {"miniwob": str(site)},
                    "miniwob": {"seed": seed},
                },
                "max_turns": 10,
                "metadata": {
                    "miniwob_page": f"miniwob/{name}.html",
                    "miniwob_title": title(page),
                    "miniwob_seed": seed,
                    "miniwob_site_sha256": tree_sha,
                },
            }
            yield with_provenance("web", SUITE, name, str(root), task)
