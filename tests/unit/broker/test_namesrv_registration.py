"""The broker's name-server registrations (services/broker/namesrv_registration.py) against recording
remoting servers on loopback: what it sends (REGISTER_BROKER as BrokerOuterAPI writes it), as master (id 0)
and as slave (its own id), when (a new topic at once, a role change, soon again after a refusal), the
unregistration on stop, the signature of its key over every field a name server reads, and nothing at all
without the auth token when one is configured."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace

import pytest

from services.broker.config import BrokerConfig
from services.broker.ha.auth import BrokerKey
from services.broker.namesrv_registration import BrokerIdentity, NamesrvRegistration, register_request
from services.common.clock import FakeClock
from services.common.codes import ResponseCode
from services.common.remoting_conn import RemotingConnection
from services.common.signing import signature_ok
from services.controller.namesrv_remoting import registration_proof
from services.remoting import headers as h
from services.remoting.acl import Verifier
from services.remoting.command import RemotingCommand, RequestCode, make_response
from services.remoting.namesrv_bodies import DataVersion, RegisterBrokerBody, TopicConfig, body_crc32

CONFIG = BrokerConfig(brokerClusterName="c1", brokerName="broker-x", listenPort=30911, haListenPort=30912)


class Recorder:
    """A name server that records every request and answers ``code``."""

    def __init__(self, code: int = ResponseCode.SUCCESS) -> None:
        self.code = code
        self.requests: list[RemotingCommand] = []

    async def handle(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        self.requests.append(request)
        return make_response(request, self.code, None if self.code == ResponseCode.SUCCESS else "refused here")

    def registrations(self) -> list[tuple[int, RegisterBrokerBody]]:
        out = []
        for r in self.requests:
            if r.code == RequestCode.REGISTER_BROKER:
                header = h.RegisterBrokerRequestHeader.from_ext_fields(r.ext_fields)
                out.append((header.broker_id, RegisterBrokerBody.decode(r.body)))
        return out


@asynccontextmanager
async def name_servers(*recorders: Recorder) -> AsyncIterator[list[str]]:
    servers = [await asyncio.get_running_loop().create_server(lambda r=r: RemotingConnection(r.handle),  # type: ignore[misc]
                                                              "127.0.0.1", 0) for r in recorders]
    try:
        yield [f"127.0.0.1:{s.sockets[0].getsockname()[1]}" for s in servers]
    finally:
        for server in servers:
            server.close()


async def until(predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


def test_the_request_is_what_a_rocketmq_broker_sends() -> None:
    topics = {"T": TopicConfig("T", 4, 4, 6)}
    request = register_request(CONFIG, 0, topics, DataVersion(2, 5, 1))
    assert request.code == 103
    assert dict(request.ext_fields) == {
        "brokerName": "broker-x", "brokerAddr": "127.0.0.1:30911", "clusterName": "c1",
        "haServerAddr": "127.0.0.1:30912", "brokerId": "0", "enableActingMaster": "false", "compressed": "false",
        "bodyCrc32": str(body_crc32(request.body))}
    body = RegisterBrokerBody.decode(request.body)
    assert body.topic_config_serialize_wrapper.topic_config_table == topics
    assert body.topic_config_serialize_wrapper.data_version == DataVersion(2, 5, 1)


def configs(*names: str) -> dict[str, TopicConfig]:
    return {n: TopicConfig(n, 4, 4, 6) for n in names}


def test_a_master_registers_as_0_with_every_name_server_and_its_topics_and_tbw102() -> None:
    async def test() -> None:
        first, second = Recorder(), Recorder()
        async with name_servers(first, second) as addresses:
            reg = NamesrvRegistration(CONFIG, addresses, lambda: BrokerIdentity(2, True, 3),
                                      lambda: configs("Orders"), FakeClock())
            await reg.register_all()
            await reg.stop()
        for recorder in (first, second):
            [(broker_id, body)] = recorder.registrations()
            wrapper = body.topic_config_serialize_wrapper
            assert broker_id == 0
            assert wrapper.topic_config_table == {"Orders": TopicConfig("Orders", 4, 4, 6),
                                                  "TBW102": TopicConfig("TBW102", 4, 4, 7)}
            assert wrapper.data_version == DataVersion(3, FakeClock().now_ms(), 1)
            unregister = h.UnRegisterBrokerRequestHeader.from_ext_fields(recorder.requests[-1].ext_fields)
            assert (recorder.requests[-1].code, unregister.broker_id, unregister.broker_addr) == (
                RequestCode.UNREGISTER_BROKER, 0, "127.0.0.1:30911")
    run(test)


def test_a_slave_registers_under_its_own_id_and_the_version_moves_with_its_topics() -> None:
    async def test() -> None:
        recorder, topics = Recorder(), configs("A")
        async with name_servers(recorder) as addresses:
            reg = NamesrvRegistration(CONFIG, addresses, lambda: BrokerIdentity(2, False, 1), lambda: topics,
                                      FakeClock())
            await reg.register_all()
            await reg.register_all()
            topics.update(configs("B"))
            await reg.register_all()
            await reg.client.close()
        versions = [(i, b.topic_config_serialize_wrapper.data_version.counter) for i, b in recorder.registrations()]
        assert versions == [(2, 1), (2, 1), (2, 2)]
    run(test)


def test_no_id_yet_means_no_registration() -> None:
    async def test() -> None:
        recorder = Recorder()
        async with name_servers(recorder) as addresses:
            reg = NamesrvRegistration(CONFIG, addresses, lambda: BrokerIdentity(None, False, 0), dict,
                                      FakeClock())
            await reg.register_all()
            await reg.stop()
        assert recorder.requests == []
    run(test)


def test_a_new_topic_and_a_role_change_register_at_once() -> None:
    async def test() -> None:
        recorder = Recorder()
        async with name_servers(recorder) as addresses:
            reg = NamesrvRegistration(CONFIG, addresses, lambda: BrokerIdentity(1, True, 1), lambda: configs("A"),
                                      FakeClock(), interval_s=3600)
            reg.start()
            await until(lambda: len(recorder.registrations()) == 1, "the first registration")
            reg.note_topics(["A"])  # known: nothing to do
            reg.note_topics(["A", "Brand-new"])
            await until(lambda: len(recorder.registrations()) == 2, "the registration of a new topic")
            reg.trigger()
            await until(lambda: len(recorder.registrations()) == 3, "the registration after a role change")
            await reg.stop()
    run(test)


def test_a_refusal_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    async def test() -> None:
        recorder = Recorder(ResponseCode.NO_PERMISSION)
        async with name_servers(recorder) as addresses:
            reg = NamesrvRegistration(CONFIG, addresses, lambda: BrokerIdentity(1, True, 1), dict,
                                      FakeClock())
            for _ in range(3):
                await reg.register_all()
            await reg.client.close()
    with caplog.at_level(logging.INFO, logger="services.broker.namesrv_registration"):
        run(test)
    refusals = [r for r in caplog.records if "refused to register this broker: refused here (code 16)" in r.message]
    assert len(refusals) == 1 and refusals[0].levelno == logging.WARNING


def test_with_an_auth_token_every_request_is_signed_with_it() -> None:
    async def test() -> None:
        recorder = Recorder()
        async with name_servers(recorder) as addresses:
            clock = FakeClock()
            config = BrokerConfig(authToken="s3cret-token")
            reg = NamesrvRegistration(config, addresses, lambda: BrokerIdentity(1, True, 1), dict, clock)
            await reg.register_all()
            await reg.stop()  # registered: unregisters
        assert [r.code for r in recorder.requests] == [RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER]
        verifier = Verifier("s3cret-token")
        for request in recorder.requests:
            assert verifier.check(request, clock.now_ms()) is None
    run(test)


def test_a_broker_with_a_key_signs_every_field_a_name_server_reads() -> None:
    async def test() -> None:
        recorder, key = Recorder(), BrokerKey.generate()
        async with name_servers(recorder) as addresses:
            reg = NamesrvRegistration(CONFIG, addresses, lambda: BrokerIdentity(1, True, 1), lambda: configs("A"),
                                      FakeClock(), key=key)
            await reg.register_all()
            await reg.client.close()
        [request] = recorder.requests
        proof = registration_proof(request)
        assert proof is not None and proof.signed_ms == FakeClock().now_ms()
        assert signature_ok(key.public_hex, proof.signature, proof.message)
        for name, value in (("brokerAddr", "127.0.0.1:1"), ("clusterName", "c"), ("brokerId", "1"),
                            ("heartbeatTimeoutMillis", "999999"), ("__ZONE_NAME", "z"), ("signedAt", "1")):
            changed = replace(request, ext_fields={**request.ext_fields, name: value})
            moved = registration_proof(changed)
            assert moved is not None and not signature_ok(key.public_hex, moved.signature, moved.message), name
        other_body = registration_proof(replace(request, body=request.body.replace(b'"A"', b'"B"')))
        assert other_body is not None and not signature_ok(key.public_hex, other_body.signature, other_body.message)
    run(test)


def test_a_refused_registration_is_retried_soon_then_less_often() -> None:
    async def test() -> None:
        recorder = Recorder(ResponseCode.NO_PERMISSION)
        async with name_servers(recorder) as addresses:
            reg = NamesrvRegistration(CONFIG, addresses, lambda: BrokerIdentity(1, True, 1), dict,
                                      FakeClock(), interval_s=3600, retry_first_s=0.05)
            reg.start()
            # The first retry comes after 0.05 s; once its refusal is read, the next waits twice as long (a
            # slow machine may have seen more refusals by the time this looks: each one doubles the wait).
            await until(lambda: len(recorder.registrations()) >= 2 and (reg._retry_s or 0) > 0.05,
                        "a retry after the refusal, and its refusal read")
            assert reg._retry_s in {0.05 * 2 ** n for n in range(1, 12)}
            recorder.code = ResponseCode.SUCCESS
            await until(lambda: len(recorder.registrations()) >= 3, "the next retry")
            await until(lambda: reg._retry_s is None, "taken: back to the interval")
            await reg.stop()
    run(test)


def test_a_controller_that_is_no_name_server_is_not_retried_sooner() -> None:
    """RocketMQ's controllers answer 103 with REQUEST_CODE_NOT_SUPPORTED: the registration goes on with the
    name servers of namesrvAddr (a controller among them is asked once), and no refusal makes it retry
    before the next round."""
    async def test() -> None:
        controller, namesrv = Recorder(ResponseCode.REQUEST_CODE_NOT_SUPPORTED), Recorder()
        async with name_servers(controller, namesrv) as (to_controller, to_namesrv):
            reg = NamesrvRegistration(CONFIG, [to_controller], lambda: BrokerIdentity(1, True, 1), dict,
                                      FakeClock(), name_servers=[to_namesrv, to_controller])
            await reg.register_all()
            assert reg._retry_s is None and reg.registered_id == 0
            [(_, theirs)], [(_, ours)] = namesrv.registrations(), controller.registrations()
            # RocketMQ's name server refuses a first registration of one topic: it gets SELF_TEST_TOPIC too
            assert sorted(theirs.topic_config_serialize_wrapper.topic_config_table) == ["SELF_TEST_TOPIC", "TBW102"]
            assert sorted(ours.topic_config_serialize_wrapper.topic_config_table) == ["TBW102"]
            await reg.client.close()
    run(test)
