"""Injectable time, so that expiry and scan logic can be unit-tested with a fake clock."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds (stamped into events, shown to users)."""

    def monotonic_ms(self) -> int:
        """Monotonic milliseconds (used for expiry and timeouts)."""


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def monotonic_ms(self) -> int:
        return int(time.monotonic() * 1000)


class FakeClock:
    """A clock tests move by hand; both readings advance together."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def monotonic_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        self._now += ms
