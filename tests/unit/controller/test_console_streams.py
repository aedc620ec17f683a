"""The console stream's bounds without a network: the message is the same JSON the page always got, built from one
shared head per view; the node serves at most MAX_STREAMS streams and gets each place back however a stream
ends; and the HTTP guard cuts off a connection whose client stops taking its answer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastapi import FastAPI

from services.common.httpguard import GuardedHttpToolsProtocol
from services.common.httplimits import HttpLimits
from services.controller import console
from services.controller.config import ControllerConfig
from services.controller.controller import ControllerManager
from tests.unit.controller.test_api_limits import Client


def test_a_message_is_the_view_and_its_events_as_one_json_object() -> None:
    snapshot = {"at": 1, "node": {"id": "n0"}, "groups": [{"brokerName": "a", "replicas": []}]}
    events = [{"index": 7, "type": "ElectMasterEvent"}]
    message = console.message_head(snapshot) + console.message_tail(events)
    assert message.startswith(b"event: state\ndata: ") and message.endswith(b"\n\n")
    assert json.loads(message[len(b"event: state\ndata: "):]) == {**snapshot, "events": events}
    assert console.message_head({}) + console.message_tail([]) == b'event: state\ndata: {"events":[]}\n\n'


def test_streams_beyond_the_cap_are_refused_and_their_places_come_back() -> None:
    count = console.StreamCount(2)
    assert count.take() and count.take() and not count.take()
    count.give_back()
    assert count.take()


@pytest.mark.parametrize("ending", ["finished", "failed", "cancelled"])
def test_a_stream_gives_its_place_back_however_it_ends(ending: str) -> None:
    ended: list[bool] = []

    async def body() -> Any:
        yield b"retry: 2000\n\n"
        if ending == "failed":
            raise RuntimeError("the view could not be read")
        if ending == "cancelled":
            await asyncio.Event().wait()  # a client that goes away while the stream waits for news

    async def send(message: Any) -> None:
        return None

    async def receive() -> Any:
        await asyncio.sleep(0 if ending == "cancelled" else 3600)
        return {"type": "http.disconnect"}

    async def run() -> None:
        response = console.CountedStream(body(), lambda: ended.append(True), media_type="text/event-stream")
        try:
            await response({"type": "http", "asgi": {"spec_version": "2.3"}}, receive, send)
        except RuntimeError:
            assert ending == "failed"
    asyncio.run(run())
    assert ended == [True]


def test_a_node_serving_its_most_streams_answers_503_system_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "MAX_STREAMS", 0)
    app = FastAPI()
    console.install_console(app, ControllerManager(ControllerConfig()))
    response = Client(app).get(console.STREAM)
    assert response.status_code == 503
    assert response.json()["codeName"] == "SYSTEM_BUSY" and "already serves 0 console streams" in \
        response.json()["remark"]


class FakeTimers:
    def __init__(self) -> None:
        self.pending: list[Any] = []

    def call_later(self, delay: float, callback: Any) -> Any:
        timers = self

        class Handle:
            def cancel(self) -> None:
                timers.pending.remove(entry)
        entry = (delay, callback)
        self.pending.append(entry)
        return Handle()


class FakeTransport:
    aborted = False

    def abort(self) -> None:
        self.aborted = True


class FakeFlow:
    def pause_writing(self) -> None: ...

    def resume_writing(self) -> None: ...


def guarded(limits: HttpLimits) -> tuple[GuardedHttpToolsProtocol, FakeTimers, FakeTransport]:
    protocol = GuardedHttpToolsProtocol.__new__(GuardedHttpToolsProtocol)
    timers, transport = FakeTimers(), FakeTransport()
    protocol.loop, protocol.transport, protocol.flow = timers, transport, FakeFlow()  # type: ignore[assignment]
    protocol.limits, protocol.client, protocol._stall = limits, ("127.0.0.1", 5555), None
    return protocol, timers, transport


def test_a_client_that_takes_nothing_of_its_answer_for_the_body_deadline_is_cut_off() -> None:
    protocol, timers, transport = guarded(HttpLimits(body_timeout_s=2.0))
    protocol.pause_writing()  # the answer backed up past the high-water mark
    protocol.pause_writing()
    assert [delay for delay, _ in timers.pending] == [2.0]
    timers.pending[0][1]()
    assert transport.aborted


def test_a_client_that_takes_its_answer_again_is_left_alone() -> None:
    protocol, timers, transport = guarded(HttpLimits(body_timeout_s=2.0))
    protocol.pause_writing()
    protocol.resume_writing()  # it read enough to bring the buffer under the low-water mark
    assert timers.pending == [] and not transport.aborted
