"""A non-local Beam FileSystem for tests: objects in this process's memory under `wltest://`.

It behaves like an object store (GCS, S3): no directories, a file exists once it is closed, and
listing is by prefix. Registering it is defining it: Beam finds FileSystem subclasses by scheme. Use
it with the in-process runner only (the default local FnApiRunner); other processes see nothing.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from apache_beam.io.filesystem import BeamIOError, CompressedFile, CompressionTypes, FileMetadata, FileSystem

SCHEME = "wltest"
_OBJECTS: dict[str, bytes] = {}
FILES = _OBJECTS  # every object by its full URL, for tests that inspect what a job wrote
_LOCK = threading.Lock()


class _Upload(io.BytesIO):
    """A write channel: the object appears, whole, when the channel is closed."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def close(self) -> None:
        if not self.closed:
            with _LOCK:
                _OBJECTS[self.path] = self.getvalue()
        super().close()


class MemoryFileSystem(FileSystem):  # type: ignore[misc]  # Beam's classes carry no annotations
    """`wltest://bucket/key` objects in a process-wide dict."""

    @classmethod
    def scheme(cls) -> str:
        return SCHEME

    def join(self, basepath: str, *paths: str) -> str:
        return "/".join([basepath.rstrip("/"), *(p.strip("/") for p in paths)])

    def split(self, path: str) -> tuple[str, str]:
        head, _, tail = path.rstrip("/").rpartition("/")
        return head, tail

    def mkdirs(self, path: str) -> None:
        pass  # an object store has no directories

    def has_dirs(self) -> bool:
        return False

    def _list(self, dir_or_prefix: str) -> Iterator[FileMetadata]:
        with _LOCK:
            items = sorted((k, len(v)) for k, v in _OBJECTS.items() if k.startswith(dir_or_prefix))
        for key, size in items:
            yield FileMetadata(key, size, 0.0)

    @staticmethod
    def _compressed(fileobj: io.BytesIO, path: str, compression_type: str, mode: str) -> Any:
        """Compression as Beam's own filesystems apply it (AUTO: by the file name's extension)."""
        if compression_type == CompressionTypes.AUTO:
            compression_type = CompressionTypes.detect_compression_type(path)
        if compression_type == CompressionTypes.UNCOMPRESSED:
            return fileobj
        if mode == "r":
            return CompressedFile(fileobj, compression_type, read_size=1 << 16)
        return CompressedFile(fileobj, compression_type)

    def create(
        self,
        path: str,
        mime_type: str = "application/octet-stream",
        compression_type: str = CompressionTypes.AUTO,
    ) -> Any:
        return self._compressed(_Upload(path), path, compression_type, "w")

    def open(
        self,
        path: str,
        mime_type: str = "application/octet-stream",
        compression_type: str = CompressionTypes.AUTO,
    ) -> Any:
        with _LOCK:
            if path not in _OBJECTS:
                raise BeamIOError("open failed", {path: FileNotFoundError(path)})
            data = _OBJECTS[path]
        return self._compressed(io.BytesIO(data), path, compression_type, "r")

    def copy(self, source_file_names: list[str], destination_file_names: list[str]) -> None:
        with _LOCK:
            for src, dst in zip(source_file_names, destination_file_names, strict=True):
                _OBJECTS[dst] = _OBJECTS[src]

    def rename(self, source_file_names: list[str], destination_file_names: list[str]) -> None:
        with _LOCK:
            for src, dst in zip(source_file_names, destination_file_names, strict=True):
                _OBJECTS[dst] = _OBJECTS.pop(src)

    def exists(self, path: str) -> bool:
        with _LOCK:
            return path in _OBJECTS

    def size(self, path: str) -> int:
        with _LOCK:
            return len(_OBJECTS[path])

    def last_updated(self, path: str) -> float:
        return 0.0

    def checksum(self, path: str) -> str:
        return str(self.size(path))

    def metadata(self, path: str) -> FileMetadata:
        return FileMetadata(path, self.size(path), 0.0)

    def delete(self, paths: list[str]) -> None:
        with _LOCK:
            for path in paths:
                if path.endswith("/"):  # a "folder": every object under the prefix, as GCS does
                    for key in [k for k in _OBJECTS if k.startswith(path)]:
                        del _OBJECTS[key]
                elif path in _OBJECTS:
                    del _OBJECTS[path]
                else:
                    raise BeamIOError("delete failed", {path: FileNotFoundError(path)})


def upload_tree(local: Path, url: str) -> None:
    """Copy every file under `local` to `url/<relative path>`."""
    with _LOCK:
        for f in sorted(local.rglob("*")):
            if f.is_file():
                _OBJECTS[f"{url.rstrip('/')}/{f.relative_to(local).as_posix()}"] = f.read_bytes()


def listing(prefix: str) -> dict[str, bytes]:
    """The objects under `prefix`, keyed by their path relative to it."""
    prefix = prefix.rstrip("/") + "/"
    with _LOCK:
        return {k[len(prefix) :]: v for k, v in sorted(_OBJECTS.items()) if k.startswith(prefix)}


def clear(prefix: str) -> None:
    with _LOCK:
        for key in [k for k in _OBJECTS if k.startswith(prefix)]:
            del _OBJECTS[key]
