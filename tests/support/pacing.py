"""How long a polling loop of the tests waits between two asks.

A check that is cheap (reading a file, one call on an open connection) is asked again after the loop's own
interval. A check that is dear (a ``mqctl`` or ``mqadmin`` process, a JVM) waits twice what it took, up to
``MAX_PAUSE_S``: a wait spends at most about a third of its time asking, so a test waiting on a cluster does
not take the CPU the cluster needs to get there (the full run is bound by the machine's two cores).
"""

from __future__ import annotations

MAX_PAUSE_S = 2.0


def pause_after(asked_s: float, interval_s: float) -> float:
    """The pause after a check that took ``asked_s``, in a loop whose own interval is ``interval_s``."""
    return max(interval_s, min(MAX_PAUSE_S, 2.0 * asked_s))
