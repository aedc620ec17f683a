"""pysyncobj's log, made readable: a CRITICAL line it writes on a harmless event is rate-limited and
explained (:class:`ResendTruncationFilter`)."""

from __future__ import annotations

import logging
import time

__all__ = ["ResendTruncationFilter", "install_resend_filter"]


class ResendTruncationFilter(logging.Filter):
    """pysyncobj logs CRITICAL "truncating already-applied log entries" whenever a follower receives
    again entries it already holds (under load with unbatched appends the leader re-sends after an
    out-of-date acknowledgement) and truncates them unconditionally before appending the same entries
    back. Nothing diverges: the applied state is never rolled back and the entries are identical. It is
    logged here as a WARNING at most once a minute, with a count, so a real alarm is not drowned."""

    INTERVAL_S = 60.0

    def __init__(self) -> None:
        super().__init__()
        self._last = -self.INTERVAL_S
        self._suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("truncating already-applied log entries"):
            return True
        now = time.monotonic()
        if now - self._last < self.INTERVAL_S:
            self._suppressed += 1
            return False
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg = (f"{record.msg} (a follower re-received entries it holds; {self._suppressed} more like "
                      "this in the last minute; compare appliedEvents across nodes to check for divergence)")
        self._last, self._suppressed = now, 0
        return True




_INSTALLED: list[ResendTruncationFilter] = []


def install_resend_filter() -> None:
    """Add the filter to pysyncobj's logger, once per process."""
    if not _INSTALLED:
        _INSTALLED.append(ResendTruncationFilter())
        logging.getLogger("pysyncobj.syncobj").addFilter(_INSTALLED[0])
