"""The remoting server connection shell (services/common/remoting_conn.py) on a real loopback socket:
requests multiplexed by opaque and answered as they finish, oneway requests unanswered, a failing handler
answered SYSTEM_ERROR, a malformed frame or silence closing the connection, and on_closed called once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from services.common import remoting_conn
from services.common.codes import ResponseCode
from services.common.remoting_conn import RemotingConnection, orphaned_oneway
from services.remoting.codec import FrameDecoder, encode
from services.remoting.command import RemotingCommand, make_request, make_response

pytestmark = pytest.mark.component


SLOW_STARTED: list[int] = []
SLOW_FINISHED: list[int] = []
GATE: list[asyncio.Event] = []  # code 5 waits until the test sets the event in here


async def handler(request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
    if request.code == 1:  # slow
        await asyncio.sleep(0.2)
    if request.code == 4:  # slower: still in flight when its sender goes
        SLOW_STARTED.append(request.opaque)
        await asyncio.sleep(0.3)
        SLOW_FINISHED.append(request.opaque)
        return None if request.is_oneway else make_response(request, ResponseCode.SUCCESS)
    if request.code == 5:  # held until the test opens the gate
        SLOW_STARTED.append(request.opaque)
        await GATE[0].wait()
        SLOW_FINISHED.append(request.opaque)
        return None
    if request.code == 3:
        raise RuntimeError("secret detail")
    if request.is_oneway:
        conn.attributes["oneway"] = conn.attributes.get("oneway", 0) + 1
        return None
    return make_response(request, ResponseCode.SUCCESS, remark=f"done {request.code}")


def run(scenario: Callable[[str, int, list[RemotingConnection]], Awaitable[None]], idle_s: float = 5.0,
        **deadlines: float) -> None:
    async def main() -> None:
        closed: list[RemotingConnection] = []
        loop = asyncio.get_running_loop()
        srv = await loop.create_server(
            lambda: RemotingConnection(handler, idle_timeout_s=idle_s, on_closed=closed.append, **deadlines),
            "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        try:
            await asyncio.wait_for(scenario("127.0.0.1", port, closed), 10)
        finally:
            srv.close()
            await srv.wait_closed()
    asyncio.run(main())


async def read_commands(reader: asyncio.StreamReader, n: int) -> list[RemotingCommand]:
    decoder, got = FrameDecoder(), []
    while len(got) < n:
        data = await reader.read(4096)
        assert data, f"closed after {len(got)} answers"
        got += decoder.feed(data)
    return got


def test_requests_in_flight_are_answered_as_they_finish() -> None:
    async def scenario(host: str, port: int, closed: list[RemotingConnection]) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(encode(make_request(1, opaque=10)) + encode(make_request(2, opaque=11))
                     + encode(make_request(2, opaque=12, oneway=True)) + encode(make_request(3, opaque=13)))
        answers = await read_commands(reader, 3)
        assert [a.opaque for a in answers] == [11, 13, 10]  # the slow one last
        assert [a.code for a in answers] == [ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR, ResponseCode.SUCCESS]
        assert all(a.is_response for a in answers)
        assert "secret" not in str(answers[1].remark)
        writer.close()
        for _ in range(100):
            if closed:
                break
            await asyncio.sleep(0.01)
        assert len(closed) == 1 and closed[0].attributes == {"oneway": 1}
    run(scenario)


def test_a_oneway_request_in_flight_is_carried_out_after_its_sender_went() -> None:
    """A producer writes a oneway END_TRANSACTION and closes: the broker must still store it. A request that
    waits for an answer nobody can read any more is cancelled."""
    async def scenario(host: str, port: int, closed: list[RemotingConnection]) -> None:
        _, writer = await asyncio.open_connection(host, port)
        writer.write(encode(make_request(4, opaque=20, oneway=True)) + encode(make_request(4, opaque=21)))
        await writer.drain()
        await until(lambda: len(SLOW_STARTED) == 2)
        writer.close()
        await until(lambda: bool(closed) and len(SLOW_FINISHED) == 1)
        await asyncio.sleep(0.4)  # the cancelled one would have finished by now
        assert sorted(SLOW_STARTED) == [20, 21] and SLOW_FINISHED == [20]
    SLOW_STARTED.clear()
    SLOW_FINISHED.clear()
    run(scenario)


def test_oneway_requests_carried_on_after_their_connections_closed_are_bounded_for_the_server(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack: slow oneway requests, the connection closed, again and again, each time under the
    per-connection bound. Beyond the process's bound they are cancelled; within it they are carried out."""
    monkeypatch.setattr(remoting_conn, "MAX_ORPHANED_ONEWAY", 6)

    async def scenario(host: str, port: int, closed: list[RemotingConnection]) -> None:
        GATE.append(asyncio.Event())
        for round_ in range(4):  # 4 connections x 3 oneway requests: 12 orphans asked for
            _, writer = await asyncio.open_connection(host, port)
            writer.write(b"".join(encode(make_request(5, opaque=100 + 10 * round_ + i, oneway=True))
                                  for i in range(3)))
            await writer.drain()
            await until(lambda r=round_: len(SLOW_STARTED) == 3 * (r + 1))
            writer.close()
            await until(lambda r=round_: len(closed) == r + 1)
            assert orphaned_oneway() <= 6
        assert orphaned_oneway() == 6
        GATE[0].set()
        await until(lambda: orphaned_oneway() == 0)
        await asyncio.sleep(0.1)  # a cancelled one would have finished by now
        assert sorted(SLOW_FINISHED) == [100, 101, 102, 110, 111, 112]
    SLOW_STARTED.clear()
    SLOW_FINISHED.clear()
    GATE.clear()
    run(scenario)


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_malformed_frame_closes_the_connection() -> None:
    async def scenario(host: str, port: int, closed: list[RemotingConnection]) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"\x00\x00\x00\x08\x07\x00\x00\x00garbage!")  # serialize type 7
        assert await reader.read(100) == b""
    run(scenario)


def test_a_huge_length_prefix_is_refused_before_any_body_is_read() -> None:
    async def scenario(host: str, port: int, closed: list[RemotingConnection]) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"\x7f\xff\xff\xff")
        assert await reader.read(100) == b""
    run(scenario)


def test_a_silent_connection_is_closed() -> None:
    async def scenario(host: str, port: int, closed: list[RemotingConnection]) -> None:
        reader, _ = await asyncio.open_connection(host, port)
        assert await reader.read(100) == b""
    run(scenario, idle_s=0.3)


def test_a_frame_trickled_a_byte_at_a_time_is_cut_at_its_deadlines() -> None:
    """Bytes keep coming, but the head must be in within head_timeout_s of the frame's first byte and the
    rest within frame_timeout_s of the head: the silence timer no longer restarts on every byte."""
    frame = encode(make_request(2, opaque=1))
    body = encode(make_request(2, opaque=2, body=b"b" * 1000))

    async def trickle(host: str, port: int, at_once: bytes, slowly: bytes) -> float:
        """Seconds from the first slow byte until the server closed the connection."""
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(at_once)
        started = asyncio.get_running_loop().time()
        for byte in slowly:
            writer.write(bytes([byte]))
            try:
                if await asyncio.wait_for(reader.read(100), 0.1) == b"":
                    break
            except TimeoutError:
                continue
        writer.close()
        return asyncio.get_running_loop().time() - started

    async def scenario(host: str, port: int, closed: list[RemotingConnection]) -> None:
        assert await trickle(host, port, b"", frame) < 0.9  # its head alone would take over a second
        head = len(body) - 1000
        assert 0.9 < await trickle(host, port, body[:head], body[head:]) < 2.0
    run(scenario, idle_s=0.2, head_timeout_s=0.5, frame_timeout_s=1.2)


def test_the_answer_keeps_the_request_serialize_type() -> None:
    from services.remoting.command import SerializeType

    async def scenario(host: str, port: int, closed: list[RemotingConnection]) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(encode(make_request(2, opaque=5, serialize_type=SerializeType.ROCKETMQ)))
        [answer] = await read_commands(reader, 1)
        assert answer.serialize_type is SerializeType.ROCKETMQ and answer.opaque == 5
        writer.close()
    run(scenario)


def test_a_front_handler_takes_requests_without_tasks_and_they_count_as_in_flight() -> None:
    """Code 5 is taken by the front handler and answered later by callback; 6 makes the front handler
    raise (answered SYSTEM_ERROR); others it declines and they go to the handler. Reading pauses while
    max_in_flight requests are taken and resumes when half are finished."""
    held: list[tuple[RemotingCommand, RemotingConnection]] = []

    def front(request: RemotingCommand, conn: RemotingConnection) -> bool:
        if request.code == 6:
            raise RuntimeError("secret detail")
        if request.code != 5:
            return False
        held.append((request, conn))
        return True

    async def main() -> None:
        made: list[RemotingConnection] = []

        def protocol() -> RemotingConnection:
            made.append(RemotingConnection(handler, max_in_flight=4, front=front))
            return made[-1]
        srv = await asyncio.get_running_loop().create_server(protocol, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.sockets[0].getsockname()[1])
        try:
            writer.write(encode(make_request(2, opaque=1)) + encode(make_request(6, opaque=2))
                         + b"".join(encode(make_request(5, opaque=10 + i)) for i in range(6)))
            first = await read_commands(reader, 2)
            assert sorted((a.opaque, a.code) for a in first) == [(1, ResponseCode.SUCCESS),
                                                                 (2, ResponseCode.SYSTEM_ERROR)]
            assert "secret" not in str(first[1].remark)
            for _ in range(100):
                if len(held) >= 4:
                    break
                await asyncio.sleep(0.01)
            conn = made[0]
            assert conn.in_flight == len(held) >= 4 and conn._paused  # reading paused at max_in_flight
            while held:
                request, owner = held.pop(0)
                owner.finish(request, make_response(request, ResponseCode.SUCCESS, remark="later"))
                await asyncio.sleep(0.01)
            answers = await read_commands(reader, 6)
            assert sorted(a.opaque for a in answers) == list(range(10, 16))
            assert {a.remark for a in answers} == {"later"} and conn.in_flight == 0 and not conn._paused
        finally:
            writer.close()
            srv.close()
            await srv.wait_closed()
    asyncio.run(asyncio.wait_for(main(), 10))
