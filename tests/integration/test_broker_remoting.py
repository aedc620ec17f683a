"""Real broker processes serve RocketMQ's remoting protocol on their listen port, beside HTTP: sends (10, 310,
320) and pulls (11, and a lite pull consumer's 361) with RocketMQ's message encoding, long polling woken by a put from either protocol,
consumer offsets kept durably and copied to slaves so a group resumes after a failover, the controller-mode
codes (1007, 907, and 1008 as a hint only), a slave's refusal of sends, and hostile frames.

The client here is our own (RemotingClient and the codec); tests/integration/test_real_client.py runs the
same paths with the Apache RocketMQ C++ client.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.common.broker_client import BrokerClient
from services.common.codes import ResponseCode as C
from services.common.remoting_client import RemotingClient
from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting.bodies import EpochEntryCache
from services.remoting.codec import FrameDecoder, encode
from services.remoting.command import RemotingCommand, RequestCode, SerializeType, make_request
from services.remoting.message import BatchEntry, decode_pulled, encode_batch, encode_properties
from tests.integration.conftest import run_cli
from tests.integration.test_broker import FAST_BROKER, pull_all, runtime, wait_role

pytestmark = pytest.mark.integration

RC = RequestCode
HA = {**FAST_BROKER, "allAckInSyncStateSet": "true", "haSendHeartbeatInterval": 300, "checkSyncStateSetPeriod": 500,
      "haHousekeepingInterval": 3000, "haMaxTimeSlaveNotCatchup": 3000}




def send(topic: str, body: bytes, code: int = RC.SEND_MESSAGE, queue_id: int = 0, *,
         serialize_type: SerializeType = SerializeType.JSON, **props: str) -> RemotingCommand:
    header = bh.SendMessageRequestHeader(
        producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=queue_id,
        sys_flag=0, born_timestamp=1_700_000_000_000, flag=3, properties=encode_properties(props))
    ext = header.to_ext_fields()
    if code != RC.SEND_MESSAGE:
        ext = bh.SendMessageRequestHeaderV2(
            producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=queue_id,
            sys_flag=0, born_timestamp=1_700_000_000_000, flag=3, properties=header.properties).to_ext_fields()
    return make_request(code, 0, ext, body, serialize_type=serialize_type)


def pull(topic: str, queue_id: int, offset: int, suspend_ms: int = 0, group: str = "cg",
         lite: bool = False) -> RemotingCommand:
    """11, or with ``lite`` 361 as a DefaultLitePullConsumer sends it (PullSysFlag's lite bit, 16, set)."""
    header = bh.PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=32,
        sys_flag=4 | (2 if suspend_ms else 0) | (16 if lite else 0), commit_offset=0,
        suspend_timeout_millis=suspend_ms, subscription="*", sub_version=0)
    return make_request(bh.LITE_PULL_MESSAGE if lite else RC.PULL_MESSAGE, 0, header.to_ext_fields())


def offsets(code: int, topic: str, queue_id: int, group: str = "cg", **extra: str) -> RemotingCommand:
    return make_request(code, 0, {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), **extra})


def http_send(node: BrokerNode, topic: str, body: str, queue_id: int) -> None:
    with BrokerClient(5.0) as client:
        env = client.request(node.address, "POST", bc.SEND_MESSAGE,
                             json={"topic": topic, "body": body, "queueId": queue_id, "tags": "viaHttp"})
    assert env.data["status"] == "PUT_OK"


def test_a_client_sends_pulls_and_keeps_offsets_over_remoting(controller: ControllerCluster,
                                                              brokers: list[BrokerNode], tmp_path: Path) -> None:
    node = make_broker(tmp_path, "broker-a", 1, controller.addresses, **FAST_BROKER)
    brokers.append(node)
    node.start()
    wait_role(node, "MASTER")

    async def scenario() -> None:
        client = RemotingClient(10.0)
        try:
            await sends_and_pulls(client, node)
            await lite_pulls(client, node)
            await long_polling(client, node)
            await consumer_offsets(client, node)
            await controller_mode_codes(client, node)
        finally:
            await client.close()

    asyncio.run(scenario())
    # what remoting wrote, HTTP reads: keys and tags in their places
    by_body = {m["body"]: m for m in pull_all(node, "RemotingTopic")}
    assert (by_body["one"]["keys"], by_body["one"]["tags"]) == ("k1", "tagA")
    assert {"one", "two", "b1", "b2", "via-http", "late"} <= set(by_body)
    hostile_frames_close_only_their_connection(node)


async def sends_and_pulls(client: RemotingClient, node: BrokerNode) -> None:
    one = await client.call(node.address, send("RemotingTopic", b"one", queue_id=1, KEYS="k1", TAGS="tagA"))
    assert one.code == C.SUCCESS and one.ext_fields["queueOffset"] == "0"
    two = await client.call(node.address, send("RemotingTopic", b"two", RC.SEND_MESSAGE_V2, 1,
                                               serialize_type=SerializeType.ROCKETMQ))
    assert (two.code, two.serialize_type) == (C.SUCCESS, SerializeType.ROCKETMQ)  # answered as asked
    batch = encode_batch([BatchEntry(b"b1", {"TAGS": "tagB"}), BatchEntry(b"b2", {"KEYS": "kb"}, 9)])
    request = send("RemotingTopic", b"", RC.SEND_BATCH_MESSAGE, 1)
    answer = await client.call(node.address, make_request(RC.SEND_BATCH_MESSAGE, 0, request.ext_fields, batch))
    assert answer.code == C.SUCCESS and len(answer.ext_fields["msgId"].split(",")) == 2
    http_send(node, "RemotingTopic", "via-http", 1)

    found = await client.call(node.address, pull("RemotingTopic", 1, 0))
    assert (found.code, found.ext_fields["nextBeginOffset"]) == (C.SUCCESS, "5")
    messages = decode_pulled(found.body)
    assert [m.body for m in messages] == [b"one", b"two", b"b1", b"b2", b"via-http"]
    assert messages[0].msg_id == one.ext_fields["msgId"] and (messages[0].keys, messages[0].tags) == ("k1", "tagA")
    assert [m.flag for m in messages] == [3, 3, 0, 9, 0] and messages[0].born_timestamp == 1_700_000_000_000
    assert messages[4].born_host.ip == bytes(4) and messages[4].tags == "viaHttp"  # sent over HTTP: no born host
    assert messages[0].born_host.ip == bytes([127, 0, 0, 1])
    at_end = await client.call(node.address, pull("RemotingTopic", 1, 5))
    assert (at_end.code, at_end.remark) == (C.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
    moved = await client.call(node.address, pull("RemotingTopic", 1, 99))
    assert (moved.code, moved.ext_fields["nextBeginOffset"]) == (C.PULL_OFFSET_MOVED, "5")


async def lite_pulls(client: RemotingClient, node: BrokerNode) -> None:
    """A lite pull consumer's pulls (361) are answered as 11's: the same messages, offsets and codes."""
    for offset in (0, 3, 5, 99):
        plain, lite = [await client.call(node.address, pull("RemotingTopic", 1, offset, lite=flag))
                       for flag in (False, True)]
        assert (lite.code, lite.remark, dict(lite.ext_fields)) == (plain.code, plain.remark, dict(plain.ext_fields))
        assert [m.body for m in decode_pulled(lite.body)] == [m.body for m in decode_pulled(plain.body)]


async def long_polling(client: RemotingClient, node: BrokerNode) -> None:
    """A pull held at the end of a queue is answered by the next message, whichever protocol put it. The
    broker serves one connection's requests in the order they arrive, so once the answer to a request sent
    after the pull is back, the pull has been read and is waiting."""
    held = asyncio.ensure_future(client.call(node.address, pull("RemotingTopic", 1, 5, suspend_ms=20_000),
                                             timeout_s=30.0))
    held_lite = asyncio.ensure_future(client.call(node.address, pull("RemotingTopic", 1, 5, 20_000, lite=True),
                                                  timeout_s=30.0))
    after = await client.call(node.address, make_request(RC.GET_MAX_OFFSET, 0, {"topic": "RemotingTopic",
                                                                                "queueId": "1"}))
    assert after.ext_fields == {"offset": "5"} and not held.done() and not held_lite.done()
    await asyncio.to_thread(http_send, node, "RemotingTopic", "late", 1)
    for answer in (await held, await held_lite):  # a lite pull is held as a pull is
        assert answer.code == C.SUCCESS, answer  # a hold that timed out would answer PULL_NOT_FOUND
        assert [m.body for m in decode_pulled(answer.body)] == [b"late"]


async def consumer_offsets(client: RemotingClient, node: BrokerNode) -> None:
    fresh = await client.call(node.address, offsets(RC.QUERY_CONSUMER_OFFSET, "RemotingTopic", 1))
    assert fresh.ext_fields == {"offset": "0"}  # no offset, and the queue still starts at 0
    assert (await client.call(node.address, offsets(RC.QUERY_CONSUMER_OFFSET, "RemotingTopic", 2))).code == \
        C.QUERY_NOT_FOUND
    await client.oneway(node.address, offsets(RC.UPDATE_CONSUMER_OFFSET, "RemotingTopic", 1, commitOffset="4"))
    # oneway: no answer, but requests on one connection are served in order
    assert (await client.call(node.address, offsets(RC.QUERY_CONSUMER_OFFSET, "RemotingTopic", 1))).ext_fields == {
        "offset": "4"}
    top = await client.call(node.address, make_request(RC.GET_MAX_OFFSET, 0, {"topic": "RemotingTopic",
                                                                              "queueId": "1"}))
    assert top.ext_fields == {"offset": "6"}
    bad = await client.call(node.address, offsets(RC.UPDATE_CONSUMER_OFFSET, "RemotingTopic", 1, commitOffset="x"))
    assert bad.code == C.INVALID_PARAMETER and "commitOffset" in (bad.remark or "")


async def controller_mode_codes(client: RemotingClient, node: BrokerNode) -> None:
    cache = EpochEntryCache.decode((await client.call(node.address, make_request(RC.GET_BROKER_EPOCH_CACHE, 0))).body)
    assert (cache.broker_name, cache.broker_id, [e.epoch for e in cache.epoch_list]) == ("broker-a", 0, [1])
    ha = bb.HARuntimeInfo.decode((await client.call(node.address, make_request(RC.GET_BROKER_HA_STATUS, 0))).body)
    assert ha.master and ha.master_commit_log_max_offset == cache.max_offset
    before = await asyncio.to_thread(runtime, node)
    await client.oneway(node.address, make_request(RC.NOTIFY_BROKER_ROLE_CHANGED, 0, {
        "masterAddress": "127.0.0.1:1", "masterEpoch": "2147483647", "masterBrokerId": "9"},
        b'{"syncStateSet":[9],"syncStateSetEpoch":99}'))
    unsupported = await client.call(node.address, make_request(9999, 0))
    assert unsupported.code == C.REQUEST_CODE_NOT_SUPPORTED  # answered after the oneway: it was read
    after = await asyncio.to_thread(runtime, node)
    assert (after["role"], after["masterEpoch"]) == (before["role"], before["masterEpoch"]) == ("MASTER", 1)


def hostile_frames_close_only_their_connection(node: BrokerNode) -> None:
    host, port = node.address.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"\x00\x00\x00\x02\x00\x00")  # a frame shorter than its mark
        assert sock.recv(100) == b""  # closed
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(encode(make_request(RC.PULL_MESSAGE, 5, {"topic": "../../etc"})))
        decoder, answers = FrameDecoder(), []
        while not answers:
            answers = decoder.feed(sock.recv(65536))
        assert answers[0].code == C.INVALID_PARAMETER and answers[0].opaque == 5
    assert runtime(node)["role"] == "MASTER"


def test_a_slave_refuses_sends_and_consumer_offsets_survive_a_failover(controllers: ControllerCluster,
                                                                      brokers: list[BrokerNode],
                                                                      tmp_path: Path) -> None:
    first = make_broker(tmp_path, "broker-a", 1, controllers.addresses, **HA)
    second = make_broker(tmp_path, "broker-a", 2, controllers.addresses, **HA)
    brokers.extend([first, second])
    first.start()
    wait_role(first, "MASTER")
    second.start()
    wait_role(second, "SLAVE")

    async def before_failover() -> None:
        client = RemotingClient(10.0)
        try:
            refused = await client.call(second.address, send("FailoverTopic", b"x"))
            assert refused.code == C.SERVICE_NOT_AVAILABLE and first.address in (refused.remark or "")
            for index in range(4):
                assert (await client.call(first.address, send("FailoverTopic", f"m{index}".encode(), queue_id=0))
                        ).code == C.SUCCESS
            assert (await client.call(first.address, offsets(RC.UPDATE_CONSUMER_OFFSET, "FailoverTopic", 0,
                                                             commitOffset="3"))).code == C.SUCCESS
            await poll_offset(client, second, "3")  # the slave copied the master's table
        finally:
            await client.close()

    asyncio.run(before_failover())
    first.kill()
    wait_role(second, "MASTER", timeout=60)

    async def after_failover() -> None:
        client = RemotingClient(10.0)
        try:
            resumed = await client.call(second.address, offsets(RC.QUERY_CONSUMER_OFFSET, "FailoverTopic", 0))
            assert resumed.ext_fields == {"offset": "3"}
            rest = await client.call(second.address, pull("FailoverTopic", 0, 3))
            assert [m.body for m in decode_pulled(rest.body)] == [b"m3"]
            assert (await client.call(second.address, send("FailoverTopic", b"after"))).code == C.SUCCESS
        finally:
            await client.close()

    asyncio.run(after_failover())


async def poll_offset(client: RemotingClient, node: BrokerNode, expected: str) -> None:
    async def query() -> str | None:
        answer = await client.call(node.address, offsets(RC.QUERY_CONSUMER_OFFSET, "FailoverTopic", 0,
                                                         setZeroIfNotFound="false"))
        return answer.ext_fields.get("offset")

    deadline = asyncio.get_running_loop().time() + 30
    while (got := await query()) != expected:
        assert asyncio.get_running_loop().time() < deadline, f"the slave's offset is still {got}"
        await asyncio.sleep(0.2)



def test_a_damaged_consumer_offsets_file_stops_the_broker_with_one_line(tmp_path: Path) -> None:
    node = make_broker(tmp_path, "broker-a", 1, "127.0.0.1:1", **FAST_BROKER)
    node.write_conf()
    offsets = node.store_dir / "config" / "consumerOffset.json"
    offsets.parent.mkdir(parents=True)
    offsets.write_text('{"crc":1,"offsetTable":{"T@g":{0:7}}}')  # the offset does not match its crc
    done = run_cli("startBroker", "-c", str(node.conf_file), timeout=60)
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr
    (line,) = [text for text in done.stderr.splitlines() if text.startswith("Error:")]
    assert f"{offsets} is damaged (its offsets do not match its crc)" in line
    assert "Damaged consumerOffset.json" in line
