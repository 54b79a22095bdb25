"""Real small disks for full-disk tests: tmpfs mounts (root only; a test skips where mounting is not
allowed)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """mount(size_kib) -> a fresh tmpfs of that size; unmounted after the test."""
    mounts: list[Path] = []

    def mount(size_kib: int) -> Path:
        folder = tmp_path / f"disk{len(mounts)}"
        folder.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(folder)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounts.append(folder)
        return folder

    yield mount
    for folder in mounts:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def resize(folder: Path, size_kib: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size_kib}k", str(folder)], check=True)
