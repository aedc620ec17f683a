"""Named crash points for crash-recovery tests: ``MQCTL_FAULT_INJECT=<name>`` makes the process SIGKILL
itself when it reaches that point. Never set in production."""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger(__name__)

FAULT_ENV = "MQCTL_FAULT_INJECT"


def fault_point(name: str) -> None:
    if os.environ.get(FAULT_ENV) == name:
        log.warning("fault injection: SIGKILL at %s", name)
        os.kill(os.getpid(), signal.SIGKILL)
