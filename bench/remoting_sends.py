"""Single-message sends over RocketMQ's remoting protocol against today's unbatched HTTP sends, on the same
broker in one run.

    python -m bench.remoting_sends [--seconds 12] [--rounds 4] [--size 1024] [--in-flight 256] [--connections 4]

One broker (one replica, ASYNC_FLUSH, as the unbatched HTTP figure in docs/performance.md) is driven in
alternating slices (HTTP, remoting, remoting, HTTP, ...; see ``bench.common.alternate``):

- **HTTP, unbatched**: one producer, one message per ``POST /v1/broker/sendMessages``, one request in
  flight (the way the earlier figure was measured);
- **remoting**: ``SEND_MESSAGE_V2`` (310) frames, one message each, ``--in-flight`` requests outstanding on
  each of ``--connections`` connections, answered by ``opaque`` in any order. The load generator is its own
  process (a lean asyncio client: the frame is encoded once and only its opaque changes), so the two share
  the machine's cores as a real client and broker would.

msg/s counts SUCCESS answers (PUT_OK); the ratio is remoting / HTTP. Latency is from writing a frame to
reading its answer.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import re
import struct
import sys
import time
from typing import Any

from bench.common import alternate, scratch_dir, summary, table, write_result
from bench.replicated_writes import drive as drive_http
from bench.replicated_writes import start
from services.remoting import broker_headers as bh
from services.remoting.codec import encode
from services.remoting.command import RequestCode, make_request
from services.remoting.message import encode_properties

#: Ten-digit opaques, all below int32's maximum.
FIRST_OPAQUE = 1_000_000_000
_CODE = re.compile(rb'"code":(-?\d+)')
_OPAQUE = re.compile(rb'"opaque":(-?\d+)')


def send_frame(size: int, opaque_digits: int = 10) -> tuple[bytes, bytes]:
    """A SEND_MESSAGE_V2 frame as RocketMQ's producers send it (with a client-made UNIQ_KEY, here the same in
    every frame), split around its opaque. Opaques are taken from ``FIRST_OPAQUE`` up, all of
    ten digits (no zero padding: JSON has no leading zeros), so the header's length never changes."""
    header = bh.SendMessageRequestHeaderV2(
        producer_group="bench_producer", topic="BenchRemoting", default_topic="TBW102",
        default_topic_queue_nums=4, queue_id=-1, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties({"UNIQ_KEY": "7F0000011F9C18B4AAC2812D6E710000", "WAIT": "true"}), reconsume_times=0, unit_mode="false", batch="false")
    marker = FIRST_OPAQUE
    frame = encode(make_request(RequestCode.SEND_MESSAGE_V2, marker, header.to_ext_fields(), b"x" * size))
    text = f'"opaque":{marker}'.encode()
    at = frame.index(text) + len(b'"opaque":')
    return frame[:at], frame[at + opaque_digits:]


async def _connection(address: str, seconds: float, size: int, in_flight: int, results: dict[str, Any]) -> None:
    host, _, port = address.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head, tail = send_frame(size)
    sent: dict[int, float] = {}
    next_opaque = FIRST_OPAQUE
    stop = time.monotonic() + seconds
    buffer = b""
    done = asyncio.Event()

    def send(count: int) -> None:
        nonlocal next_opaque
        parts = []
        now = time.perf_counter()
        for _ in range(count):
            opaque = next_opaque
            next_opaque += 1
            sent[opaque] = now
            parts.append(head + str(opaque).encode() + tail)
        writer.write(b"".join(parts))

    send(in_flight)
    while not done.is_set():
        data = await reader.read(1 << 20)
        if not data:
            break
        buffer += data
        answered = 0
        while len(buffer) >= 8:
            length, mark = struct.unpack_from(">ii", buffer)
            if len(buffer) < 4 + length:
                break
            header = buffer[8:8 + (mark & 0xFFFFFF)]
            buffer = buffer[4 + length:]
            opaque = int(_OPAQUE.search(header).group(1))  # type: ignore[union-attr]
            code = int(_CODE.search(header).group(1))  # type: ignore[union-attr]
            results["latencies"].append((time.perf_counter() - sent.pop(opaque)) * 1000)
            results["codes"][code] = results["codes"].get(code, 0) + 1
            answered += 1
        if time.monotonic() < stop:
            send(answered)
        elif not sent:
            done.set()
    writer.close()


def _generator(address: str, seconds: float, size: int, in_flight: int, connections: int,
               out: Any) -> None:
    results: dict[str, Any] = {"latencies": [], "codes": {}}

    async def main() -> float:
        started = time.monotonic()
        await asyncio.gather(*(_connection(address, seconds, size, in_flight, results) for _ in range(connections)))
        return time.monotonic() - started
    elapsed = asyncio.run(main())
    out.send({"elapsed": elapsed, "codes": results["codes"], "latencies": results["latencies"]})


def drive_remoting(address: str, seconds: float, size: int, in_flight: int, connections: int) -> dict[str, Any]:
    """The load generator in its own process; its counts."""
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("fork").Process(
        target=_generator, args=(address, seconds, size, in_flight, connections, child), daemon=True)
    process.start()
    result = parent.recv()
    process.join(10)
    ok = result["codes"].get(0, 0)
    return {"msgPerSec": ok / result["elapsed"], "acked": ok, "seconds": result["elapsed"],
            "statuses": {str(k): v for k, v in result["codes"].items()}, "ackLatencyMs": summary(result["latencies"]),
            "latencies": result["latencies"]}


class Side:
    def __init__(self, name: str, run: Any) -> None:
        self.name, self.run = name, run
        self.slices: list[dict[str, Any]] = []

    def slice(self, seconds: float, measured: bool = True) -> None:
        result = self.run(seconds)
        if measured:
            self.slices.append(result)

    def row(self) -> dict[str, Any]:
        acked = sum(s["acked"] for s in self.slices)
        seconds = sum(s["seconds"] for s in self.slices)
        latencies = [x for s in self.slices for x in s["latencies"]]
        statuses: dict[str, int] = {}
        for s in self.slices:
            for k, v in s["statuses"].items():
                statuses[k] = statuses.get(k, 0) + v
        lat = summary(latencies)
        return {"case": self.name, "msgPerSec": acked / seconds if seconds else 0.0, "p50Ms": lat["p50"],
                "p99Ms": lat["p99"], "statuses": statuses}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.remoting_sends", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=12.0, help="measured seconds per side")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--in-flight", type=int, default=256, help="requests outstanding per connection")
    parser.add_argument("--connections", type=int, default=4)
    args = parser.parse_args()
    root = scratch_dir("mqctl-bench-remoting-")
    cluster = start(root / "single", 1, "ASYNC_FLUSH")
    try:
        master = cluster.master_of("broker-a")
        assert master is not None
        address = master.address
        http = Side("HTTP, unbatched", lambda s: drive_http(address, s, 1, args.size, 1))
        remoting = Side(f"remoting, {args.connections}x{args.in_flight} in flight",
                        lambda s: drive_remoting(address, s, args.size, args.in_flight, args.connections))
        alternate([http, remoting], args.rounds, args.seconds, args.warmup)
        rows = [http.row(), remoting.row()]
    finally:
        cluster.down()
    ratio = rows[1]["msgPerSec"] / rows[0]["msgPerSec"] if rows[0]["msgPerSec"] else float("inf")
    print(table(rows, ["case", "msgPerSec", "p50Ms", "p99Ms"]))
    print(f"ratio remoting / HTTP unbatched: {ratio:.1f}x (target >= 10x)")
    path = write_result("remoting_sends", {"args": vars(args), "rows": rows, "ratio": ratio})
    print(f"result: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["drive_remoting", "main", "send_frame"]

