"""Atomic local writes: a reader sees the old file or the new one, never a torn or half-written one.

Every writer of the repository publishes a file the same way: write a temporary file with a name no
other writer uses (`.NAME.<uuid>.tmp`, hidden, in the target's own directory so the rename stays on
one file system), flush and fsync it, rename it onto the target, fsync the directory so the rename
survives a crash. A failure before the rename removes the temporary file and leaves the old target.

The object-store variant (gs://, s3://: one upload per object, no rename) is `pipelines.fs`
(`write_bytes`, `temp_beside` + `publish_file`), which hands local paths to this module.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, overload

if TYPE_CHECKING:
    import pyarrow as pa

TEMP_SUFFIX = ".tmp"


def temp_path(path: str | os.PathLike[str]) -> Path:
    """A hidden temporary name beside PATH that no other writer (thread, process, retried task) uses."""
    target = Path(path)
    return target.with_name(f".{target.name}.{uuid.uuid4().hex}{TEMP_SUFFIX}")


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """Make a rename or a new entry in FOLDER durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse fsync on a directory; the rename itself is still atomic
        pass
    finally:
        os.close(fd)


def publish_file(tmp: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Move a finished temporary file onto PATH: fsync it, rename it, fsync the directory.

    For writers that produce the temporary file through their own library (a Parquet writer);
    `atomic_open` does the whole sequence for a file handle."""
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(Path(path).parent)


@overload
def atomic_open(
    path: str | os.PathLike[str], mode: Literal["wb"] = "wb", *, encoding: None = None, newline: None = None
) -> contextlib.AbstractContextManager[IO[bytes]]: ...
@overload
def atomic_open(
    path: str | os.PathLike[str], mode: Literal["w"], *, encoding: str = "utf-8", newline: str | None = None
) -> contextlib.AbstractContextManager[IO[str]]: ...
def atomic_open(
    path: str | os.PathLike[str],
    mode: Literal["wb", "w"] = "wb",
    *,
    encoding: str | None = None,
    newline: str | None = None,
) -> contextlib.AbstractContextManager[IO[Any]]:
    """A handle on a fresh temporary file that becomes PATH when the block ends without an error.

    On an error (or when the caller's block raises) the temporary file is removed and PATH keeps its
    old content. The parent directory is created when missing."""
    return _atomic_open(Path(path), mode, encoding, newline)


@contextlib.contextmanager
def _atomic_open(path: Path, mode: str, encoding: str | None, newline: str | None) -> Iterator[IO[Any]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    if mode == "w":
        fh: IO[Any] = open(tmp, "w", encoding=encoding or "utf-8", newline=newline)
    else:
        fh = open(tmp, "wb")
    try:
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write DATA to PATH atomically (see the module docstring)."""
    with atomic_open(path) as fh:
        fh.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write TEXT (UTF-8) to PATH atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write OBJ as indented UTF-8 JSON (one trailing newline) to PATH atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def atomic_write_parquet(path: str | os.PathLike[str], table: pa.Table, compression_level: int = 3) -> None:
    """Write TABLE (its schema as given) to PATH as one zstd Parquet file atomically: a temporary
    file beside it, fsync'd and renamed onto PATH; the old file stays when anything fails."""
    import pyarrow.parquet as pq

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(target)
    try:
        pq.write_table(table, tmp, compression="zstd", compression_level=compression_level)
        publish_file(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_dir(staging: str | os.PathLike[str], out: str | os.PathLike[str]) -> None:
    """Replace the folder OUT by the complete folder STAGING (a sibling of OUT, so both renames stay
    on one file system): the old OUT is renamed aside under a unique name, STAGING renamed into place,
    the parent fsync'd, then the old folder removed. A reader sees the old folder or the new one."""
    staging, out = Path(staging), Path(out)
    old: Path | None = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:12]}")
        os.rename(out, old)
    os.rename(staging, out)
    fsync_dir(out.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_DISK_FULL_TEXT = re.compile(rf"\[Errno (?:{'|'.join(str(e) for e in sorted(DISK_FULL_ERRNOS))})\]")


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from, is a full disk or quota. Runners that carry
    a worker's error across a process boundary (Beam) keep only its text, so that is read too."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in DISK_FULL_ERRNOS:
            return True
        if _DISK_FULL_TEXT.search(str(current)):
            return True
        current = current.__cause__ or current.__context__
    return False


def free_space(path: str | os.PathLike[str]) -> str:
    """Free space on the file system that holds `path` (or its nearest existing parent), readable."""
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = float(shutil.disk_usage(folder).free)
    except OSError:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if free < 1024 or unit == "GiB":
            return f"{free:.0f} {unit}" if unit == "B" else f"{free:.1f} {unit}"
        free /= 1024
    return f"{free:.1f} TiB"
