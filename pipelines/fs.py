# Beam's FileSystems API carries no type annotations.
# mypy: disable-error-code="no-untyped-call"
"""Paths of the pools build, local or on any Beam filesystem (gs://, s3://, ...): one set of helpers.

A path with a scheme (`gs://bucket/pools`) is a URL: it is never handed to pathlib or `os` (which
would treat it as a relative local folder); everything goes through Beam's `FileSystems`, which
picks the filesystem registered for the scheme. Object stores have no folders: a "folder" is a
prefix, it exists when an object lies under it, and removing it removes every object under it.
Local paths keep the local behaviour (absolute paths, directories) and are written by
`schemas.atomic` (unique temporary file, fsync, rename); this module is that writer's object-store
variant.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import uuid
from typing import IO, Any

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from schemas import atomic


def is_url(path: str) -> bool:
    return "://" in path


def absolute(path: str | os.PathLike[str]) -> str:
    """A local path made absolute; a URL as it is."""
    path = os.fspath(path)
    return path if is_url(path) else os.path.realpath(path)


def join(base: str, *parts: str) -> str:
    return str(FileSystems.join(base, *parts))


def split(path: str) -> tuple[str, str]:
    """(parent, name) of a path or URL."""
    parent, name = FileSystems.split(path.rstrip("/"))
    return str(parent), str(name)


def relative(path: str, root: str) -> str:
    """`path` relative to `root` with "/" separators (`root` must be a prefix of `path`)."""
    root = root.rstrip("/\\")
    if not path.startswith(root):
        raise ValueError(f"{path} is not under {root}")
    return path[len(root) :].lstrip("/\\").replace(os.sep, "/")


def is_file(path: str) -> bool:
    if is_url(path):
        return bool(FileSystems.exists(path)) and not path.endswith("/")
    return os.path.isfile(path)


def is_dir(path: str) -> bool:
    """A local directory, or a URL prefix with at least one object under it."""
    if is_url(path):
        return bool(list_files(path))
    return os.path.isdir(path)


def exists(path: str) -> bool:
    return is_file(path) or is_dir(path)


def list_files(folder: str, pattern: str = "*", recursive: bool = True) -> list[str]:
    """Every file under `folder` whose name matches `pattern`, sorted; `recursive=False`: only its
    direct children. Hidden files (a leading dot: temporary uploads, staging) are left out."""
    folder = folder.rstrip("/")
    if is_url(folder):
        found = [m.path for m in FileSystems.match([f"{folder}/**"])[0].metadata_list]
    elif os.path.isdir(folder):
        found = [os.path.join(d, f) for d, _, names in os.walk(folder) for f in names]
    else:
        return []
    out = []
    for f in found:
        rel = relative(f, folder)
        name = rel.rsplit("/", 1)[-1]
        if (recursive or "/" not in rel) and fnmatch.fnmatch(name, pattern) and not name.startswith("."):
            out.append(f)
    return sorted(out)


def open_read(path: str) -> IO[bytes]:
    return FileSystems.open(path)


def read_bytes(path: str) -> bytes:
    with open_read(path) as fh:
        return fh.read()


def read_json(path: str) -> Any:
    return json.loads(read_bytes(path).decode("utf-8"))


def write_bytes(path: str, data: bytes) -> None:
    """Write a whole file: locally by `schemas.atomic` (unique temp file, fsync, rename), on an object
    store as one upload (an object appears whole when its upload completes)."""
    if is_url(path):
        with FileSystems.create(path) as fh:
            fh.write(data)
        return
    atomic.atomic_write_bytes(path, data)


def write_json(path: str, obj: Any) -> None:
    write_bytes(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def size(path: str) -> int:
    return int(FileSystems.match([path])[0].metadata_list[0].size_in_bytes)


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open_read(path) as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def mkdirs(path: str) -> None:
    if not is_url(path):
        os.makedirs(path, exist_ok=True)


def delete_tree(path: str) -> None:
    """Remove a folder and everything under it (on an object store: every object under the prefix)."""
    if not is_url(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    files = [m.path for m in FileSystems.match([f"{path.rstrip('/')}/**"])[0].metadata_list]
    if files:
        FileSystems.delete(files)


def delete_file(path: str) -> None:
    if is_file(path):
        FileSystems.delete([path])


def move_files(sources: list[str], targets: list[str]) -> None:
    """Move files (an object store copies and deletes each: per object, not all at once)."""
    if not is_url(sources[0] if sources else ""):
        for t in targets:
            os.makedirs(os.path.dirname(t), exist_ok=True)
    if sources:
        FileSystems.rename(sources, targets)


def temp_beside(path: str) -> str:
    """A temporary name next to PATH that no other writer uses. A runner may execute the same bundle
    twice at once (a retry, a speculative copy, the DaskRunner computing a stage again for a side
    input): each copy writes its own temporary file and both publish the same content."""
    if not is_url(path):
        return str(atomic.temp_path(path))
    folder, name = split(path)
    return join(folder, f".{name}.{uuid.uuid4().hex}{atomic.TEMP_SUFFIX}")


def publish_file(tmp: str, path: str) -> None:
    """Move TMP onto PATH, replacing what is there, while another writer may publish PATH too
    (locally `schemas.atomic.publish_file`: fsync, rename, fsync the folder)."""
    if not is_url(path):
        atomic.publish_file(tmp, path)
        return
    if FileSystems.exists(path):
        try:
            FileSystems.delete([path])
        except (BeamIOError, OSError):  # a concurrent writer replaced or removed it first
            pass
    FileSystems.rename([tmp], [path])
