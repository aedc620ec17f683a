"""The worst frame each request code accepts, read as its server reads it: how long the reading takes, and
the longest the event loop waited meanwhile.

    python -m bench.frame_parse [--scale 1.0]

One process: an event loop whose ticker wakes every 2 ms and records how late it was (from a collected heap
for each frame), and a server's two
steps for each frame, as the servers take them: the loop's (``RequestDecoder``: the frame fed in the 256 KiB
reads a socket gives, the header read, the body kept or skipped) and the request's decoding (its server's
own function, on the ``Offload`` worker when the body is over 8 KiB), then for a registration the route
table taking its topics between turns of the loop. Each frame is the largest its code admits, with the
body that costs most: a bare key first and an error at the very end, nothing but empty arrays, or the
most items the server keeps (topics, subscriptions, names, messages). ``--scale`` below 1 shrinks every
body (the smoke test). Prints a table and writes bench/results/frame_parse.json.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.common import scratch_dir, summary, table, write_result
from services.broker.processor.client_manage import read_heartbeat
from services.broker.remoting import request_limits as broker_limits
from services.broker.remoting_messages import Stamp, to_store_messages
from services.broker.store import MessageStore
from services.common.offload import Offload
from services.common.props import parse_properties
from services.controller.namesrv import Limits, Registration, RouteRefused, RouteTable
from services.controller.namesrv_remoting import read_registration, stepped
from services.controller.remoting import request_limits as controller_limits
from services.remoting import bodies
from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting import headers as h
from services.remoting.codec import encode
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.errors import BodyError, HeaderFieldError
from services.remoting.limits import MAX_HEADER, RequestDecoder, RequestLimits
from services.remoting.message import BatchEntry, SocketAddress, encode_batch
from services.remoting.namesrv_bodies import (
    MAX_TOPICS,
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from tests.support.frames import REGISTRATION, hostile_body

RC = RequestCode
MAX_MESSAGE_SIZE = 4 * 2**20  # the brokers' default maxMessageSize
READ = 256 * 1024  # what one read of a loaded socket gives


@dataclass
class Case:
    name: str
    code: int
    limits: RequestLimits
    body: bytes
    decode: Callable[[RemotingCommand], object] | None  # None: the body is never read
    ext: dict[str, str] | None = None
    header_pad: int = 0  # characters of a header field, to make the largest header


def cases(scale: float) -> list[Case]:
    controller, broker = controller_limits(_controller_codes()), broker_limits(_broker_codes(), MAX_MESSAGE_SIZE)

    def bound(limits: RequestLimits, code: int) -> int:
        return int(limits.body(code).max_bytes * scale) - 4096

    found = []
    for code, limits, decode, legit in _json_codes(controller, broker):
        for bare_key in (True, False):
            found.append(Case(f"{code} {'bare key + error' if bare_key else 'empty arrays'}", code, limits,
                              hostile_body(bound(limits, code), bare_key), decode, REGISTRATION if code == 103 else None))
        found.append(Case(f"{code} {legit[0]}", code, limits, legit[1](bound(limits, code)), decode,
                          REGISTRATION if code == 103 else None))
    found.append(Case("103 compressed, 300,000 topics", RC.REGISTER_BROKER, controller, _compressed(scale), _registration,
                      {**REGISTRATION, "compressed": "true"}))
    found.append(Case("320 batch, most messages", RC.SEND_BATCH_MESSAGE, broker, _batch(bound(broker, 320)), _messages,
                      _send_header(batch=True)))
    found.append(Case("310 one message, largest body", RC.SEND_MESSAGE_V2, broker, b"m" * bound(broker, 310), _messages,
                      _send_header(batch=False)))
    found.append(Case("1009 most properties", RC.UPDATE_CONTROLLER_CONFIG, controller,
                      b"".join(b"k%d=v\n" % i for i in range(bound(controller, 1009) // 9)), _config))
    found.append(Case("1004 largest header, no body read", RC.CONTROLLER_GET_REPLICA_INFO, controller, b"x" * 4000, None,
                      {"brokerName": "b"}, int((MAX_HEADER - 200) * scale)))
    return found


def _json_codes(controller: RequestLimits, broker: RequestLimits) -> list[tuple[int, RequestLimits, Any, Any]]:
    return [
        (RC.REGISTER_BROKER, controller, _registration, ("most topics", _topics)),
        (RC.CONTROLLER_GET_SYNC_STATE_DATA, controller, lambda r: bodies.decode_broker_names(r.body),
         ("most names", _names)),
        (RC.CONTROLLER_ALTER_SYNC_STATE_SET, controller, lambda r: bodies.SyncStateSet.decode(r.body),
         ("most ids", _ids)),
        (RC.QUERY_DATA_VERSION, controller, lambda r: DataVersion.decode(r.body), ("most fields", _fields)),
        (RC.HEART_BEAT, broker, lambda r: read_heartbeat(r.body), ("most subscriptions", _heartbeat)),
    ]


def _controller_codes() -> list[int]:
    return [RC.REGISTER_BROKER, RC.CONTROLLER_GET_SYNC_STATE_DATA, RC.CONTROLLER_ALTER_SYNC_STATE_SET,
            RC.QUERY_DATA_VERSION, RC.UPDATE_CONTROLLER_CONFIG, RC.CONTROLLER_GET_REPLICA_INFO]


def _broker_codes() -> list[int]:
    return [RC.HEART_BEAT, RC.SEND_MESSAGE_V2, RC.SEND_BATCH_MESSAGE, RC.NOTIFY_BROKER_ROLE_CHANGED]


# ---------------------------------------------------------------------------------- the bodies


def _topics(size: int) -> bytes:
    count = min(MAX_TOPICS, size // 170)
    table = {f"T{i:07d}": TopicConfig(f"T{i:07d}", 8, 8, 6) for i in range(count)}
    return RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(1, 2, 3))).encode()[:size]


def _compressed(scale: float) -> bytes:
    count = int(MAX_TOPICS * scale)
    table = {f"T{i:06d}": TopicConfig(f"T{i:06d}", 1, 1, 6) for i in range(count)}
    return RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(1, 2, 3))).encode_compressed()


def _names(size: int) -> bytes:
    return bodies.encode_broker_names([f"broker-{i:07d}" for i in range(size // 18)])


def _ids(size: int) -> bytes:
    return bodies.SyncStateSet(frozenset(range(10**12, 10**12 + size // 15)), 1).encode()


def _fields(size: int) -> bytes:
    return b'{"counter":1,' + b",".join(b'"f%d":%d' % (i, i) for i in range(size // 16)) + b"}"


def _heartbeat(size: int) -> bytes:
    per_group = 1000  # the most a group's list may hold
    count = size // (per_group * 126)
    groups = tuple(bb.ConsumerData(f"G{g:04d}", subscription_data_set=tuple(
        bb.SubscriptionData(f"T{g:04d}_{t:04d}", "*") for t in range(per_group))) for g in range(max(1, count)))
    return bb.HeartbeatData("client-1", (), groups).encode()


def _batch(size: int) -> bytes:
    return encode_batch([BatchEntry(b"x") for _ in range(min(100_000, size // 24))])


def _send_header(batch: bool) -> dict[str, str]:
    return bh.SendMessageRequestHeaderV2(producer_group="pg", topic="Bench", default_topic="TBW102",
                                         default_topic_queue_nums=4, queue_id=0, sys_flag=0, born_timestamp=1,
                                         flag=0, properties="", batch=str(batch).lower()).to_ext_fields()


# --------------------------------------------------------------------------------- the decoders


def _registration(request: RemotingCommand) -> object:
    return read_registration(request, h.RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields), Limits())


def _config(request: RemotingCommand) -> object:
    return parse_properties(request.body.decode("utf-8"), "the request body")


_STORE: list[MessageStore] = []


def _messages(request: RemotingCommand) -> object:
    if not _STORE:
        _STORE.append(MessageStore(scratch_dir("mqctl-bench-frames-"), "127.0.0.1:10911"))
    header = bh.parse_send_header(request.code, dict(request.ext_fields))
    messages = to_store_messages(header, request.body, SocketAddress.parse("127.0.0.1", 1), Stamp("DefaultCluster"))
    assert isinstance(messages, list)
    for message in messages:
        _STORE[0].validate(message)
    return messages


# --------------------------------------------------------------------------------------- a run


async def ticker(lags: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(0.002)
        lags.append((time.perf_counter() - started - 0.002) * 1000)


async def measure(case: Case, offload: Offload) -> dict[str, Any]:
    ext = dict(case.ext or {})
    if case.header_pad:
        ext["pad"] = "p" * case.header_pad
    frame = encode(make_request(case.code, 1, ext, case.body))
    gc.collect()  # what the case before left is not this one's to collect
    lags: list[float] = []
    stop = asyncio.Event()
    tick = asyncio.create_task(ticker(lags, stop))
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    decoder, items = RequestDecoder(case.limits), []
    for at in range(0, len(frame), READ):
        items += decoder.feed(frame[at:at + READ])
        await asyncio.sleep(0)
    framed = time.perf_counter()
    outcome = await _decode(items[0], case, offload)
    done = time.perf_counter()
    stop.set()
    await tick
    return {"case": case.name, "frameKiB": len(frame) // 1024, "loopMs": (framed - started) * 1000,
            "decodeMs": (done - framed) * 1000, "outcome": outcome, "maxLagMs": summary(lags)["max"],
            "p99LagMs": summary(lags)["p99"]}


async def _decode(item: object, case: Case, offload: Offload) -> str:
    if not isinstance(item, RemotingCommand):
        return "refused unread"
    if case.decode is None:
        return "header only"
    decode = case.decode
    try:
        value = await offload.run(len(item.body), lambda: decode(item))
    except (BodyError, HeaderFieldError, RouteRefused) as exc:  # what the servers answer INVALID_PARAMETER
        return f"refused: {type(exc).__name__}"
    if isinstance(value, TopicConfigSerializeWrapper):
        await stepped(RouteTable(lambda: 0).registering(Registration(
            "c", "stranger", 0, "127.0.0.1:9", "", value.topic_config_table, value.data_version), topics_checked=True))
        return f"taken: {len(value.topic_config_table):,} topics"
    return "taken"


async def run_all(scale: float) -> list[dict[str, Any]]:
    offload = Offload()
    try:
        return [await measure(case, offload) for case in cases(scale)]
    finally:
        offload.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="bodies at this fraction of their bound")
    args = parser.parse_args()
    rows = asyncio.run(run_all(args.scale))
    print(table(rows, ["case", "frameKiB", "loopMs", "decodeMs", "maxLagMs", "p99LagMs", "outcome"]))
    worst = max(rows, key=lambda r: r["maxLagMs"])
    print(f"\nlongest the loop waited: {worst['maxLagMs']:.1f} ms ({worst['case']})")
    path = write_result("frame_parse", {"args": vars(args), "cases": rows})
    print(f"result: {path}")


if __name__ == "__main__":
    main()
