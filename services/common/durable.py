"""Crash-safe file writes: write a temp file, fsync it, rename it over the target, fsync the directory."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    fd = os.open(os.fspath(directory), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Replace ``path`` with ``data`` so that after a crash it holds either the old or the new bytes."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = target.with_name(target.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    fsync_dir(target.parent)


def durable_unlink(path: str | os.PathLike[str]) -> None:
    """Delete ``path`` (if present) and make the deletion survive a crash."""
    target = Path(path)
    try:
        target.unlink()
    except FileNotFoundError:
        return
    fsync_dir(target.parent)
