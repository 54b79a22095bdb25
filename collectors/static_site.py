"""Static site folders a web task may serve (`web.static`): only a folder that says what it holds.

A task names a folder on the collecting machine; its files are copied into the browser sandbox and
served to the page, and what the page shows becomes data. So a folder is served only when it holds a
site manifest (`.worldline-site.json`, written by `worldline tasks import miniwob` and by
`write_site_manifest`) listing each file with its sha256; only those files are copied, each must be a
regular file inside the folder (no `..`, no symlink leading out) whose content still has its hash,
and the whole tree is capped. A task that names `/etc` or a home folder is refused, not served.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path, PurePosixPath

from schemas.atomic import atomic_write_json

SITE_MANIFEST = ".worldline-site.json"
MANIFEST_KIND = "worldline.static-site"
MAX_SITE_BYTES = 256 * 1024 * 1024


class StaticSiteError(ValueError):
    """A folder that cannot be served as a task's static site."""


def tree_digest(files: dict[str, bytes]) -> str:
    """sha256 over the files' relative paths and contents, in path order."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + files[rel])
    return digest.hexdigest()


def write_site_manifest(root: Path, files: list[str]) -> str:
    """List FILES (paths relative to ROOT) in ROOT's site manifest; returns the tree's sha256."""
    contents = {rel: (root / rel).read_bytes() for rel in sorted(files)}
    atomic_write_json(
        root / SITE_MANIFEST,
        {
            "kind": MANIFEST_KIND,
            "sha256": tree_digest(contents),
            "files": {rel: hashlib.sha256(data).hexdigest() for rel, data in contents.items()},
        },
    )
    return tree_digest(contents)


def _manifest(root: Path, where: str) -> dict[str, str]:
    """The files a site folder's manifest lists (relative path -> sha256)."""
    manifest_path = root / SITE_MANIFEST
    fix = f"give a folder written by `worldline tasks import miniwob`, or list its files with {SITE_MANIFEST}"
    try:
        manifest = json.loads(manifest_path.read_text("utf-8"))
    except FileNotFoundError:
        raise StaticSiteError(f"{where}: {root} is not a site folder (no {SITE_MANIFEST}); {fix}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StaticSiteError(f"{where}: {manifest_path} cannot be read ({exc}); {fix}") from exc
    listed = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(listed, dict) or manifest.get("kind") != MANIFEST_KIND:
        raise StaticSiteError(f"{where}: {manifest_path} is not a {MANIFEST_KIND} manifest; {fix}")
    return {str(k): str(v) for k, v in listed.items()}


def check_site(folder: str | Path, where: str) -> None:
    """Refuse a folder without a site manifest (cheap: the files are checked when they are copied)."""
    _manifest(Path(folder), where)


def read_site(folder: str | Path, where: str) -> dict[str, bytes]:
    """The files of a site folder (relative path -> bytes), checked against its manifest."""
    root = Path(folder)
    listed = _manifest(root, where)
    real_root = os.path.realpath(root)
    files: dict[str, bytes] = {}
    total = 0
    for rel, sha in sorted(listed.items()):
        path = PurePosixPath(rel)
        if not path.parts or path.is_absolute() or ".." in path.parts or rel == SITE_MANIFEST:
            raise StaticSiteError(f"{where}: {root / SITE_MANIFEST}: {rel!r} is not a path inside the folder")
        target = os.path.realpath(os.path.join(real_root, rel))
        if not target.startswith(real_root + os.sep) or not os.path.isfile(target):
            raise StaticSiteError(f"{where}: {root}/{rel}: not a regular file inside the folder")
        with open(target, "rb") as fh:
            data = fh.read(MAX_SITE_BYTES - total + 1)
        total += len(data)
        if total > MAX_SITE_BYTES:
            raise StaticSiteError(f"{where}: {root} holds more than {MAX_SITE_BYTES // 2**20} MiB")
        if hashlib.sha256(data).hexdigest() != sha:
            raise StaticSiteError(
                f"{where}: {root}/{rel} changed since its manifest was written (sha256 differs); import it again"
            )
        files[rel] = data
    return files
