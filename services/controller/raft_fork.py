"""The child pysyncobj forks to write a snapshot must not outlive its parent holding the parent's ports
(:func:`install_fork_hook`)."""

from __future__ import annotations

import ctypes
import os
import signal
import stat
import threading

from pysyncobj import SyncObj  # type: ignore[import-untyped]

__all__ = ["install_fork_hook"]


def _in_snapshot_child() -> None:
    """Runs in every child forked from this process, i.e. the one pysyncobj forks to write a snapshot.

    The child inherits the parent's listening sockets (the HTTP API and the Raft port). If the
    controller is killed while a snapshot is being written, the orphaned child would keep both ports
    bound and the restarted controller could not start until the child finished; an orphan could also
    rename an old snapshot over a newer one written by the restarted node. So the child closes every
    inherited socket and dies with its parent. Forks from any other thread are left alone."""
    if getattr(threading.current_thread(), "_target", None) is not SyncObj._autoTickThread:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: killed when the forking thread's process dies
    except (OSError, AttributeError):
        pass
    if os.getppid() != _PARENT_PID[0]:  # the parent died before prctl took effect
        os._exit(1)
    for name in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []:
        fd = int(name)
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.close(fd)
        except OSError:
            continue


_PARENT_PID = [0]


def install_fork_hook() -> None:
    """Register the child-side hook once per process (and remember which process is the parent)."""
    if _PARENT_PID[0] == 0:
        os.register_at_fork(after_in_child=_in_snapshot_child)
    _PARENT_PID[0] = os.getpid()


