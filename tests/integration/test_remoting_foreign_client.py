"""A RocketMQ client nobody here wrote, against our remoting codec and against a real controller acting
as its name server.

The Apache RocketMQ C++ client (PyPI ``rocketmq==0.4.4``: a ctypes wrapper around a bundled
``librocketmq.so``) runs in a subprocess. Its producer asks the name server for a topic's route
(GET_ROUTEINFO_BY_TOPIC, 105) before sending, falls back to the auto-create topic TBW102 for a topic
with no route, and then sends (SEND_MESSAGE, 10) to the address listed as id 0 of the route.

The first two tests point it at a stand-in name server written here (our ``FrameDecoder`` and ``encode``)
that has no routes: the client gives up with "No route info of this topic", the expected end. What proves
the two sides understand each other: the stand-in decodes every request (code, language CPP, JSON header,
the topic among the client's extFields); the client matches every answer to its request by opaque (a
missed answer would make it log a response timeout and reconnect, so one connection and no timeout in
its log mean it got each answer); and it reads our code and remark (it logs "<remark>,<code>" for an
error answer, which the second test checks for every request's opaque).

The last two point it at a real controller process. A stand-in broker registers with the controller as a
RocketMQ broker does (REGISTER_BROKER, 103, over our RemotingClient), with a topic and TBW102; the client
must then find the route the controller gives, send to the stand-in broker's address, and read its
answer (it prints its SendResult: OK, its message id, and the queue offset the stand-in answered): once
for the registered topic, once for a topic nobody created, through TBW102. Brokers do not serve remoting
yet, hence the stand-in; it reads the client's frames with the standard json module (the client writes
some extFields values as JSON numbers), so it tests the controller's answers and nothing of the broker
side.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mqctl.cluster import ControllerCluster
from services.common.codes import ResponseCode
from services.common.remoting_client import RemotingClient
from services.remoting.codec import FrameDecoder, encode
from services.remoting.command import (
    RESPONSE_FLAG,
    LanguageCode,
    RemotingCommand,
    RequestCode,
    SerializeType,
    make_request,
    make_response,
)
from services.remoting.errors import RemotingProtocolError
from services.remoting.headers import GetRouteInfoRequestHeader, RegisterBrokerRequestHeader
from services.remoting.namesrv_bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    body_crc32,
)
from tests.integration.conftest import FAST_SCANS

pytestmark = pytest.mark.component

CLIENT_TIMEOUT_S = 60.0
AUTO_CREATE_TOPIC = "TBW102"

CLIENT = """
import sys
from rocketmq.client import Message, Producer

producer = Producer(sys.argv[2])
producer.set_namesrv_addr(sys.argv[1])
producer.start()
message = Message(sys.argv[3])
message.set_keys("key-1")
message.set_tags("tagA")
message.set_body("hello")
try:
    result = producer.send_sync(message)
except Exception as exc:
    print("SEND-FAILED", type(exc).__name__, exc, flush=True)
else:
    print("SEND-OK", result.status.name, result.msg_id, result.offset, flush=True)
finally:
    producer.shutdown()
"""




@dataclass
class StandInNameServer:
    """Answers every request with ``answer(request)``; keeps what it decoded."""

    answer: Callable[[RemotingCommand], RemotingCommand]
    requests: list[RemotingCommand] = field(default_factory=list)
    answers: list[RemotingCommand] = field(default_factory=list)
    connections: int = 0
    errors: list[RemotingProtocolError] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for request in decoder.feed(data):
                    self.requests.append(request)
                    if not request.is_oneway:
                        self.answers.append(self.answer(request))
                        writer.write(encode(self.answers[-1]))
                await writer.drain()
        except RemotingProtocolError as exc:
            self.errors.append(exc)
        except ConnectionError:
            pass
        finally:
            writer.close()


@dataclass
class ClientRun:
    output: str
    log: str


async def run_producer(namesrv: str, topic: str, home: Path, progress: Callable[[], str]) -> ClientRun:
    """Run the C++ producer once against ``namesrv``; ``progress`` describes the far side on a timeout."""
    env = {**os.environ, "HOME": str(home)}  # the client writes its log under $HOME/logs/rocketmq-cpp
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLIENT, namesrv, "mqctl-test-producer", topic, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        stdout, _ = await asyncio.wait_for(proc.communicate(), CLIENT_TIMEOUT_S)
    except TimeoutError:
        pytest.fail(f"the client did not finish within {CLIENT_TIMEOUT_S} s ({progress()})")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    logs = sorted((home / "logs" / "rocketmq-cpp").glob("*"))
    return ClientRun(stdout.decode(errors="replace"), "".join(p.read_text(errors="replace") for p in logs))


async def run_client(server: StandInNameServer, topic: str, home: Path) -> ClientRun:
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        return await run_producer(f"127.0.0.1:{port}", topic, home, lambda: (
            f"{len(server.requests)} requests on {server.connections} connections"))
    finally:
        listener.close()
        await listener.wait_closed()


def no_route(request: RemotingCommand) -> RemotingCommand:
    """What RocketMQ's name server answers for an unknown topic (ClientRequestProcessor, TOPIC_NOT_EXIST)."""
    topic = request.ext_fields.get("topic", "")
    return make_response(request, ResponseCode.TOPIC_NOT_EXIST,
                         f"No topic route info in name server for the topic: {topic}")


def refuse_by_opaque(request: RemotingCommand) -> RemotingCommand:
    return make_response(request, ResponseCode.SYSTEM_ERROR, f"stand-in answer to opaque {request.opaque}")


def assert_route_requests(server: StandInNameServer, topic: str) -> None:
    assert server.errors == []
    assert len(server.requests) >= 2
    for request in server.requests:
        assert request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
        assert request.language is LanguageCode.CPP
        assert request.serialize_type is SerializeType.JSON
        assert not request.is_response and not request.is_oneway
        assert {"AccessKey", "Signature", "OnsChannel"} <= set(request.ext_fields)  # ACL fields, ignored
    topics = [GetRouteInfoRequestHeader.from_ext_fields(r.ext_fields).topic for r in server.requests]
    assert topics[:2] == [topic, AUTO_CREATE_TOPIC] and set(topics) == {topic, AUTO_CREATE_TOPIC}
    opaques = [r.opaque for r in server.requests]
    assert len(set(opaques)) == len(opaques)
    assert [(a.opaque, a.serialize_type, a.is_response) for a in server.answers] == [
        (o, SerializeType.JSON, True) for o in opaques]


def assert_client_got_every_answer(server: StandInNameServer, run: ClientRun, topic: str) -> None:
    assert f"No route info of this topic: {topic}" in run.output, run.output
    assert "SEND-OK" not in run.output
    assert server.connections == 1, run.log[-3000:]
    # what the client logs when an answer does not come: "waitResponse of code:105 with opaque:N timeout"
    # and "wait response timeout or get NULL response of code:105, so closeTransport"
    assert "waitResponse" not in run.log and "wait response timeout" not in run.log, run.log[-3000:]


def test_cpp_producer_reads_topic_not_exist(cpp_client: None, tmp_path: Path) -> None:
    topic = "MqctlForeignClientTopic"
    server = StandInNameServer(no_route)
    run = asyncio.run(run_client(server, topic, tmp_path))
    assert_route_requests(server, topic)
    assert all(a.code == ResponseCode.TOPIC_NOT_EXIST for a in server.answers)
    assert_client_got_every_answer(server, run, topic)


def test_cpp_producer_reads_our_code_and_remark_by_opaque(cpp_client: None, tmp_path: Path) -> None:
    topic = "MqctlForeignClientRemark"
    server = StandInNameServer(refuse_by_opaque)
    run = asyncio.run(run_client(server, topic, tmp_path))
    assert_route_requests(server, topic)
    assert_client_got_every_answer(server, run, topic)
    for request in server.requests:  # MQClientAPIImpl logs "<remark>,<code>" for an error answer
        assert f"stand-in answer to opaque {request.opaque},{int(ResponseCode.SYSTEM_ERROR)}" in run.log


# ------------------------------------------------------------------ a real controller as the name server

FC_CLUSTER, FC_GROUP, FC_TOPIC = "ForeignClientCluster", "broker-fc", "MqctlRoutedTopic"
MSG_ID = "7F00000100002A9F00000000000004D2"  # the broker's offset message id (the client reports its own)


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[str]:
    """One real controller process; its client port is the name server the C++ client is given."""
    cluster = ControllerCluster(tmp_path / "cluster", size=1, extra=dict(FAST_SCANS))
    cluster.configure()
    cluster.start()
    try:
        cluster.leader(timeout=60)
        yield cluster.nodes[0].address
    finally:
        cluster.kill_all()


@dataclass
class StandInBroker:
    """Answers SEND_MESSAGE with SUCCESS and a message id, anything else with SUCCESS; keeps each request's
    code and extFields (values as the client wrote them: strings, and numbers for a few)."""

    requests: list[tuple[int, dict[str, object]]] = field(default_factory=list)
    connections: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                length = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(length)
                header_length = struct.unpack(">i", frame[:4])[0] & 0xFFFFFF
                header = json.loads(frame[4:4 + header_length])
                self.requests.append((int(header["code"]), dict(header.get("extFields") or {})))
                if not int(header.get("flag", 0)) & 2:
                    writer.write(encode(self.answer(int(header["code"]), int(header["opaque"]),
                                                    header.get("extFields") or {})))
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @staticmethod
    def answer(code: int, opaque: int, request_ext: dict[str, object]) -> RemotingCommand:
        ext: dict[str, str] = {}
        if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):  # SendMessageResponseHeader
            ext = {"msgId": MSG_ID, "queueId": str(request_ext.get("queueId", 0)), "queueOffset": "1234"}
        return RemotingCommand(code=ResponseCode.SUCCESS, opaque=opaque, flag=RESPONSE_FLAG, ext_fields=ext)

    def sends(self) -> list[dict[str, object]]:
        return [ext for code, ext in self.requests if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)]


def registration(broker_addr: str) -> RemotingCommand:
    """What a RocketMQ broker sends its name servers: the topic, and TBW102 since it allows auto-creation."""
    topics = {FC_TOPIC: TopicConfig(FC_TOPIC, 4, 4, 6), "TBW102": TopicConfig("TBW102", 4, 4, 7)}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(topics, DataVersion(0, 1, 1))).encode()
    header = RegisterBrokerRequestHeader(broker_name=FC_GROUP, broker_addr=broker_addr, cluster_name=FC_CLUSTER,
                                         ha_server_addr=broker_addr, broker_id=0, body_crc32=body_crc32(body))
    return make_request(RequestCode.REGISTER_BROKER, 0, header.to_ext_fields(), body)


async def send_through_controller(controller: str, topic: str, home: Path) -> tuple[ClientRun, StandInBroker, str]:
    broker = StandInBroker()
    listener = await asyncio.start_server(broker.serve, "127.0.0.1", 0)
    address = f"127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    client = RemotingClient(timeout_s=5.0)  # its connection carries the registration: kept open throughout
    try:
        answer = await client.call(controller, registration(address))
        assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
        run = await run_producer(controller, topic, home, lambda: f"{len(broker.requests)} requests at the broker")
    finally:
        await client.close()
        listener.close()
        await listener.wait_closed()
    return run, broker, address


def assert_sent_to_the_routed_broker(run: ClientRun, broker: StandInBroker, topic: str) -> None:
    sends = broker.sends()
    assert len(sends) == 1 and broker.connections >= 1, run.output + run.log[-3000:]
    send = sends[0]
    assert (send["topic"], send["defaultTopic"], send["producerGroup"]) == (topic, "TBW102", "mqctl-test-producer")
    assert send["queueId"] in (0, 1, 2, 3)  # one of the 4 queues of the route (a JSON number from this client)
    properties = dict(p.split("\x01", 1) for p in str(send["properties"]).split("\x02") if p)
    assert (properties["KEYS"], properties["TAGS"]) == ("key-1", "tagA")
    # SendResult: OK, the client's own message id (its UNIQ_KEY) and the queue offset the broker answered
    assert f"SEND-OK OK {properties['UNIQ_KEY']} 1234" in run.output, run.output


def test_cpp_producer_sends_where_a_real_controller_routes_it(cpp_client: None, controller: str,
                                                               tmp_path: Path) -> None:
    run, broker, _ = asyncio.run(send_through_controller(controller, FC_TOPIC, tmp_path))
    assert_sent_to_the_routed_broker(run, broker, FC_TOPIC)


def test_cpp_producer_creates_a_topic_through_tbw102_from_a_real_controller(cpp_client: None, controller: str,
                                                                           tmp_path: Path) -> None:
    topic = "MqctlAutoCreatedTopic"  # registered by no broker: the client falls back to TBW102's route
    run, broker, _ = asyncio.run(send_through_controller(controller, topic, tmp_path))
    assert_sent_to_the_routed_broker(run, broker, topic)
