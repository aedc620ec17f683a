"""A simulated power loss: every file under a directory put back to exactly what was last made durable.

The processes under test run with ``MQCTL_DURABLE_SHADOW=1`` (services/common/durable.py): each fsync of a
file, and each atomic replacement once its directory is fsynced, leaves a copy of the durable content at
``<file>.fsynced``. After SIGKILL of the process, :func:`power_loss` puts each copy back in place of its file
and removes every file that was never made durable (its directory entry need not have survived either), as a
power cut would leave a disk whose writeback had reached nothing unsynced.
"""

from __future__ import annotations

import os
from pathlib import Path

from services.common.durable import SHADOW_ENV

__all__ = ["SHADOW_ENV", "power_loss"]

SUFFIX = ".fsynced"


def power_loss(directory: Path) -> dict[str, str]:
    """Roll every file under ``directory`` back to its last durable content; returns what happened to each
    (``kept``: rolled back to its copy, ``lost``: never durable, removed)."""
    outcome: dict[str, str] = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        if path.name.endswith(SUFFIX) or path.name.endswith(SUFFIX + ".tmp"):
            continue
        shadow = path.with_name(path.name + SUFFIX)
        if shadow.exists():
            os.replace(shadow, path)
            outcome[str(path.relative_to(directory))] = "kept"
        else:
            path.unlink()
            outcome[str(path.relative_to(directory))] = "lost"
    for leftover in directory.rglob(f"*{SUFFIX}*"):
        leftover.unlink()
    return outcome
