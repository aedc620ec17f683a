"""Crash-safe file writes: write a temp file, fsync it, rename it over the target, fsync the directory.
Also: reserving disk blocks for a file that grows by appends."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

_FALLOC_FL_KEEP_SIZE = 1
_FALLOC_FL_PUNCH_HOLE = 2


def _libc_fallocate() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn


_fallocate = _libc_fallocate()


def reserve(fd: int, length: int) -> None:
    """Allocate disk blocks for the first ``length`` bytes of ``fd`` without changing its size.

    A file that grows by appends otherwise gets its blocks allocated when the kernel writes it back, and
    on ext4 an append to the file while an fsync of it allocates them waits for that fsync: 3-6 ms
    stalls of the writer, twice a second with the default flush interval. With the blocks reserved,
    appends do not wait. Best effort: where the call is missing or the filesystem refuses it, the file
    simply grows as before (the size, which the stores rely on, is never changed).
    """
    if _fallocate is not None and length > 0:
        _fallocate(fd, _FALLOC_FL_KEEP_SIZE, 0, length)


def allocate(fd: int, length: int) -> None:
    """Like :func:`reserve`, but a disk that cannot hold ``length`` bytes is an error: raises OSError (ENOSPC)
    with nothing allocated, so a file is never started that the disk cannot hold. Where the call is missing
    or the filesystem does not support it, nothing is checked (the writes themselves then find a full disk)."""
    if _fallocate is None or length <= 0:
        return
    if _fallocate(fd, _FALLOC_FL_KEEP_SIZE, 0, length) != 0:
        code = ctypes.get_errno()
        if code not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise OSError(code, os.strerror(code))


def write_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    """``pwrite`` every byte of ``data`` at ``offset``. A full disk makes ``pwrite`` write part of what it was
    given and return the count; the next call then raises, so this either writes all or raises OSError."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(errno.EIO, f"pwrite wrote nothing at offset {offset}")
        view, offset = view[written:], offset + written


def punch_hole(fd: int, offset: int, length: int) -> None:
    """Give back the disk blocks of ``[offset, offset + length)`` of ``fd``; the bytes then read as zeroes and
    the file keeps its size. Best effort, as :func:`reserve`: where the call is missing or refused, the
    caller must not rely on the bytes being zero (they are simply left as they were)."""
    if _fallocate is not None and length > 0:
        _fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length)


#: Tests of a power loss set this: every fsync of a file (fsync_file, atomic_write) then also copies what is
#: durable to ``<file>.fsynced``, and a simulated power loss puts those copies back (tests/support/powerloss.py).
SHADOW_ENV = "MQCTL_DURABLE_SHADOW"


def _shadow(path: str | os.PathLike[str]) -> None:
    if os.environ.get(SHADOW_ENV) != "1":
        return
    source = Path(path)
    tmp = source.with_name(source.name + ".fsynced.tmp")
    tmp.write_bytes(source.read_bytes())
    os.chmod(tmp, stat.S_IMODE(os.stat(source).st_mode))  # a private key's copy stays private
    os.replace(tmp, source.with_name(source.name + ".fsynced"))


def fsync_file(fd: int, path: str | os.PathLike[str]) -> None:
    """fsync ``fd``, the open file ``path``."""
    os.fsync(fd)
    _shadow(path)


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    fd = os.open(os.fspath(directory), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes | str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` so that after a crash it holds either the old or the new bytes.
    ``mode`` applies from the moment the file exists (0o600 for secrets: never readable by others, not
    even between create and rename)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = target.with_name(target.name + ".tmp")
    try:
        _write_new(tmp, payload, mode)
    except OSError:
        with contextlib.suppress(OSError):  # a full disk: give back what the temp file took
            tmp.unlink()
        raise
    os.replace(tmp, target)
    fsync_dir(target.parent)
    _shadow(target)


def _write_new(path: Path, payload: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)  # a leftover temp file keeps its old mode through O_CREAT; the umask is ignored
        write_all(fd, payload, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def durable_unlink(path: str | os.PathLike[str]) -> None:
    """Delete ``path`` (if present) and make the deletion survive a crash."""
    target = Path(path)
    try:
        target.unlink()
    except FileNotFoundError:
        return
    fsync_dir(target.parent)
