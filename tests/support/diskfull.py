"""Small filesystems for the full-disk tests: a tmpfs the test mounts over a node's store, filled to the last
byte and emptied again on demand.

Mounting needs root (the tests run as root in CI). Where the mount is refused, a test skips with the reason,
except under ``CI=true``, where it fails: CI must run them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["FILLER", "fill", "free", "free_bytes", "small_filesystem"]

#: The file that takes every free byte of a filled filesystem.
FILLER = ".filler"


@contextlib.contextmanager
def small_filesystem(path: Path, size_bytes: int) -> Iterator[Path]:
    """``path`` with a tmpfs of ``size_bytes`` mounted over it, unmounted at the end (stop every process using
    it first)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "tmpfs", str(path)],
                             capture_output=True, text=True, timeout=30, check=False)
    if mounted.returncode != 0:
        reason = (f"cannot mount a {size_bytes}-byte tmpfs at {path} for the full-disk test "
                  f"({mounted.stderr.strip() or 'exit ' + str(mounted.returncode)}); it needs root")
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True, timeout=30, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30, check=False)


def fill(path: Path) -> Path:
    """Take every free byte of the filesystem holding ``path`` with one file; returns that file."""
    filler = path / FILLER
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for chunk in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(fd)
    return filler


def free(filler: Path, keep: int = 0) -> None:
    """Give back what :func:`fill` took, all of it, or all but ``keep`` bytes."""
    if keep:
        os.truncate(filler, keep)
    else:
        filler.unlink()


def free_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize
