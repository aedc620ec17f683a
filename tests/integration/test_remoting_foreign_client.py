"""A RocketMQ client nobody here wrote, against our remoting codec.

The Apache RocketMQ C++ client (PyPI ``rocketmq==0.4.4``: a ctypes wrapper around a bundled
``librocketmq.so``) runs in a subprocess with its name server pointed at a stand-in written in this file:
a small asyncio server that reads frames with our ``FrameDecoder`` and answers with our ``encode``. The
client's producer asks the name server for a topic's route (GET_ROUTEINFO_BY_TOPIC, 105) before sending;
the stand-in has no routes, so the client falls back to the auto-create topic TBW102, is refused again,
and gives up with "No route info of this topic", which is the expected end.

What proves the two sides understand each other: the stand-in decodes every request (code, language CPP,
JSON header, the topic among the client's extFields); the client matches every answer to its request by
opaque (a missed answer would make it log a response timeout and reconnect, so one connection and no
timeout in its log mean it got each answer); and it reads our code and remark (it logs "<remark>,<code>"
for an error answer, which the second test checks for every request's opaque).
"""

from __future__ import annotations

import asyncio
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from services.common.codes import ResponseCode
from services.remoting.codec import FrameDecoder, encode
from services.remoting.command import LanguageCode, RemotingCommand, RequestCode, SerializeType, make_response
from services.remoting.errors import RemotingProtocolError
from services.remoting.headers import GetRouteInfoRequestHeader

pytestmark = pytest.mark.integration

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
    producer.send_sync(message)
except Exception as exc:
    print("SEND-FAILED", type(exc).__name__, exc, flush=True)
else:
    print("SEND-OK", flush=True)
finally:
    producer.shutdown()
"""


@pytest.fixture(scope="module")
def cpp_client() -> None:
    """Skip (with the reason) only where the wheel cannot load; where it should, a missing one is an error."""
    probe = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True, text=True,
                           timeout=60, check=False)
    if probe.returncode == 0:
        return
    supported = sys.platform == "linux" and platform.machine() == "x86_64"
    if "No module named 'rocketmq'" in probe.stderr and supported:
        pytest.fail("the RocketMQ C++ client is not installed: pip install -e '.[test]' (rocketmq==0.4.4)")
    pytest.skip(f"the RocketMQ C++ client (rocketmq==0.4.4, manylinux x86_64 only) cannot load here: "
                f"{probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else probe.returncode}")


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


async def run_client(server: StandInNameServer, topic: str, home: Path) -> ClientRun:
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    env = {**os.environ, "HOME": str(home)}  # the client writes its log under $HOME/logs/rocketmq-cpp
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLIENT, f"127.0.0.1:{port}", "mqctl-test-producer", topic, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        stdout, _ = await asyncio.wait_for(proc.communicate(), CLIENT_TIMEOUT_S)
    except TimeoutError:
        pytest.fail(f"the client did not finish within {CLIENT_TIMEOUT_S} s "
                    f"({len(server.requests)} requests on {server.connections} connections)")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        listener.close()
        await listener.wait_closed()
    logs = sorted((home / "logs" / "rocketmq-cpp").glob("*"))
    return ClientRun(stdout.decode(errors="replace"), "".join(p.read_text(errors="replace") for p in logs))


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
