"""Fire-and-forget asyncio tasks that are kept alive until they end.

The event loop holds only weak references to tasks: one created and dropped may be garbage-collected
before it finishes. A ``TaskSet`` holds each until it is done, and ``close`` cancels and awaits the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["TaskSet"]


class TaskSet:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    async def close(self) -> None:
        """Cancel every task still running and wait for each to end, however it ends."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
