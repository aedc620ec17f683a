"""A stranger's costliest frames, and a probe that times a node's answers meanwhile (tests and the chaos
harness: the ``huge_frame`` fault)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from types import TracebackType
from typing import Self

from services.remoting import headers as h
from services.remoting.codec import FrameDecoder, decode_frame, encode
from services.remoting.command import RemotingCommand, RequestCode, make_request

#: The largest frame a connection may carry (RocketMQ's frameMaxLength), less room for the header.
LARGEST_BODY = 16 * 2**20 - 4096


def hostile_body(size: int, bare_key: bool) -> bytes:
    """A JSON body of ``size`` bytes made to cost its reader the most: a bare integer key first (which sends
    a reader that cannot take it quickly to its slow path) and an error at the very end, or hundreds of
    thousands of empty arrays (each an object to build, and then to free)."""
    if bare_key:
        head, unit, tail = b'{1:0,"x":[', b"0,", b"0]}x"
    else:
        head, unit, tail = b'{"x":[', b"[],", b"[]]}"
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


#: A REGISTER_BROKER header a name server takes (its body is then read): a group nobody else uses.
REGISTRATION = h.RegisterBrokerRequestHeader(
    broker_name="stranger", broker_addr="127.0.0.1:9", cluster_name="Strangers", ha_server_addr="127.0.0.1:10",
    broker_id=0, compressed=False, body_crc32=0).to_ext_fields()


def huge_request(code: int, size: int, bare_key: bool, opaque: int = 1) -> bytes:
    """The frame of a ``code`` request with a hostile body of ``size`` bytes (and a registration's header)."""
    ext = REGISTRATION if code == RequestCode.REGISTER_BROKER else {}
    return encode(make_request(code, opaque, ext, hostile_body(size, bare_key)))


def send_frame(address: str, frame: bytes, timeout_s: float = 120.0) -> RemotingCommand | None:
    """``frame`` on a connection of its own; the answer, or None if the connection ends without one."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5.0) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(frame)
        decoder, data = FrameDecoder(), b""
        while chunk := sock.recv(65536):
            data += chunk
            if decoder.feed(chunk):
                return decode_frame(data[:4 + int.from_bytes(data[:4], "big")])
    return None


class Probe:
    """Asks ``address`` ``request`` again and again (one in flight, ``interval_s`` apart) on one connection,
    from a thread of its own, and keeps how long each answer took; an answer still awaited when the probe
    stops counts for as long as it was awaited."""

    def __init__(self, address: str, request: RemotingCommand, interval_s: float = 0.01) -> None:
        self.address, self.request, self.interval_s = address, request, interval_s
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True, name="probe")

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=180)

    async def _run(self) -> None:
        host, _, port = self.address.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        decoder, opaque = FrameDecoder(), 0
        try:
            while not self._stop.is_set():
                opaque += 1
                started = time.perf_counter()
                writer.write(encode(make_request(self.request.code, opaque, dict(self.request.ext_fields))))
                while not self._stop.is_set() and not any(a.opaque == opaque for a in await self._read(reader, decoder)):
                    pass
                self.latencies.append(time.perf_counter() - started)
                await asyncio.sleep(self.interval_s)
        finally:
            writer.close()

    @staticmethod
    async def _read(reader: asyncio.StreamReader, decoder: FrameDecoder) -> list[RemotingCommand]:
        try:
            data = await asyncio.wait_for(reader.read(65536), 0.2)
        except TimeoutError:
            return []
        if not data:
            raise ConnectionError("the probed node closed the connection")
        return decoder.feed(data)

    def share_within(self, seconds: float) -> float:
        """The share of answers that took at most ``seconds``."""
        return sum(1 for x in self.latencies if x <= seconds) / max(1, len(self.latencies))

    def summary(self) -> str:
        ordered = sorted(self.latencies) or [0.0]
        return (f"{len(ordered)} answers: p50 {ordered[len(ordered) // 2] * 1000:.1f} ms, "
                f"p90 {ordered[int(len(ordered) * 0.9)] * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms")
