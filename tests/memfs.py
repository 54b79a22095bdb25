# Beam's FileSystem interface carries no type annotations.
# mypy: disable-error-code="no-untyped-def,no-untyped-call,misc,override"
"""An in-memory Beam FileSystem (`memfs://bucket/...`) for tests: a non-local filesystem like gs://,
so code that reads and writes through Beam's FileSystems is tested without a cloud account.

Beam finds FileSystem subclasses by their scheme once this module is imported. Files live in one
process-wide dict, so pipelines must run in-process (DirectRunner / FnApiRunner in_memory mode).
"""

from __future__ import annotations

import io
import threading
import time

from apache_beam.io.filesystem import BeamIOError, CompressedFile, CompressionTypes, FileMetadata, FileSystem

FILES: dict[str, bytes] = {}
_LOCK = threading.Lock()


class _Writer(io.BytesIO):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def close(self) -> None:
        if not self.closed:
            with _LOCK:
                FILES[self.path] = self.getvalue()
        super().close()


class MemFileSystem(FileSystem):
    """Objects in a dict keyed by URL; folders exist only as prefixes (like object stores)."""

    @classmethod
    def scheme(cls):
        return "memfs"

    def join(self, basepath, *paths):
        return "/".join([basepath.rstrip("/"), *(p.strip("/") for p in paths)])

    def split(self, path):
        head, _, tail = path.rstrip("/").rpartition("/")
        return head, tail

    def mkdirs(self, path):
        pass

    def has_dirs(self):
        return False

    def _list(self, dir_or_prefix):
        with _LOCK:
            items = list(FILES.items())
        for path, data in items:
            if path.startswith(dir_or_prefix):
                yield FileMetadata(path, len(data), time.time())

    def _wrap(self, fileobj, path, compression_type, mode):
        if compression_type == CompressionTypes.AUTO:
            compression_type = CompressionTypes.detect_compression_type(path)
        if compression_type == CompressionTypes.UNCOMPRESSED:
            return fileobj
        return (
            CompressedFile(fileobj, compression_type, read_size=1 << 16)
            if mode == "r"
            else CompressedFile(fileobj, compression_type)
        )

    def create(self, path, mime_type="application/octet-stream", compression_type=CompressionTypes.AUTO):
        return self._wrap(_Writer(path), path, compression_type, "w")

    def open(self, path, mime_type="application/octet-stream", compression_type=CompressionTypes.AUTO):
        with _LOCK:
            if path not in FILES:
                raise BeamIOError(f"{path}: no such object", {path: FileNotFoundError(path)})
            data = FILES[path]
        return self._wrap(io.BytesIO(data), path, compression_type, "r")

    def copy(self, source_file_names, destination_file_names):
        with _LOCK:
            for src, dst in zip(source_file_names, destination_file_names, strict=True):
                FILES[dst] = FILES[src]

    def rename(self, source_file_names, destination_file_names):
        with _LOCK:
            for src, dst in zip(source_file_names, destination_file_names, strict=True):
                FILES[dst] = FILES.pop(src)

    def exists(self, path):
        with _LOCK:
            return path in FILES

    def size(self, path):
        return len(FILES[path])

    def last_updated(self, path):
        return time.time()

    def checksum(self, path):
        return str(hash(FILES[path]))

    def metadata(self, path):
        return FileMetadata(path, len(FILES[path]), time.time())

    def delete(self, paths):
        with _LOCK:
            for path in paths:
                for key in [k for k in FILES if k == path or k.startswith(path.rstrip("/") + "/")]:
                    del FILES[key]
