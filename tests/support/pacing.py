"""How long a polling loop of the tests waits between two asks.

A check that costs little CPU (reading a file, a call on a socket, however long it waits for its answer)
is asked again after the loop's own interval. A check that costs CPU (a ``mqctl`` or ``mqadmin`` process, a
JVM) waits twice the CPU time it took, up to ``MAX_PAUSE_S``: such a wait spends at most about a third of
its time asking, so a test waiting on a cluster does not take the CPU the cluster needs to get there (the
full run is bound by the machine's two cores). The CPU time is this process's and that of the children it
waited for (``os.times``).
"""

from __future__ import annotations

import os

MAX_PAUSE_S = 2.0


def cpu_seconds() -> float:
    """CPU time so far of this process and of the child processes it has waited for."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def pause_after(asked_cpu_s: float, interval_s: float) -> float:
    """The pause after a check that took ``asked_cpu_s`` of CPU, in a loop whose own interval is
    ``interval_s``."""
    return max(interval_s, min(MAX_PAUSE_S, 2.0 * asked_cpu_s))
