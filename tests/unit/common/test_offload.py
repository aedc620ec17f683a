"""Work off the event loop (services/common/offload.py): small work done where it is asked, large work on
one worker thread with the garbage collector paused, at most ``max_pending`` at once (``Busy`` beyond),
counted out when the thread is done even if the asker gave up."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from services.common.offload import Busy, Offload


def run(coroutine: object) -> object:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


def test_small_work_is_done_in_place_and_large_work_on_the_worker() -> None:
    async def scenario() -> tuple[str, str, bool]:
        offload = Offload(inline_bytes=100)
        try:
            here = await offload.run(100, lambda: threading.current_thread().name)
            there = await offload.run(101, lambda: threading.current_thread().name)
            collecting = await offload.run(101, gc.isenabled)
            return here, there, collecting
        finally:
            offload.close()
    here, there, collecting = run(scenario())  # type: ignore[misc]
    assert here == threading.current_thread().name and there.startswith("offload")
    assert collecting is False and gc.isenabled()


def test_errors_come_back_to_the_asker() -> None:
    def fail() -> None:
        raise ValueError("bad body")

    async def scenario() -> None:
        offload = Offload(inline_bytes=0)
        try:
            with pytest.raises(ValueError, match="bad body"):
                await offload.run(1, fail)
            assert offload.pending == 0 and gc.isenabled()
        finally:
            offload.close()
    run(scenario())


def test_beyond_max_pending_the_asker_is_refused_and_a_gone_asker_is_still_counted() -> None:
    release = threading.Event()

    async def scenario() -> None:
        offload = Offload(inline_bytes=0, max_pending=2)
        try:
            first = asyncio.create_task(offload.run(1, release.wait))
            second = asyncio.create_task(offload.run(1, lambda: 2))
            await asyncio.sleep(0)
            with pytest.raises(Busy, match="2 large requests"):
                await offload.run(1, lambda: 3)
            first.cancel()  # the asker goes; its work still runs, and still counts
            await asyncio.sleep(0)
            assert offload.pending == 2
            release.set()
            assert await second == 2
            assert offload.pending == 0
        finally:
            release.set()
            offload.close()
    run(scenario())
