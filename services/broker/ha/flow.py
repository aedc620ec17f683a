"""Bytes moved per second on a replication link, as RocketMQ's ``FlowMonitor`` reports them: the count of
the last whole second (haStatus's ``#TransferSpeed``). Time is given, never read."""

from __future__ import annotations

__all__ = ["FlowMonitor"]


class FlowMonitor:
    def __init__(self) -> None:
        self._second = -1  # the second being counted
        self._this = 0  # bytes in it so far
        self._last = 0  # bytes in the second before it

    def add(self, count: int, now_ms: int) -> None:
        self._roll(now_ms // 1000)
        self._this += count

    def per_second(self, now_ms: int) -> int:
        """The bytes of the last whole second before ``now_ms`` (0 if nothing moved then)."""
        second = now_ms // 1000
        if second == self._second:
            return self._last
        if second == self._second + 1:
            return self._this
        return 0

    def _roll(self, second: int) -> None:
        if second == self._second:
            return
        self._last = self._this if second == self._second + 1 else 0
        self._this, self._second = 0, second
