"""Signed remoting requests cannot be rewritten by moving characters between neighbouring fields.

RocketMQ's ACL signature is over the values of the extFields in name order, concatenated with nothing
between them and without their names: ``brokerId=1, brokerName=2x`` and ``brokerId=12, brokerName=x`` sign
the same content. An attacker on the path (TLS off) could move characters that way in a signed request and
a controller accepted it. Here the attack is made on a real controller with an auth token: a signed 322 and
a signed 904 whose fields were shifted are refused, and the requests as signed are accepted.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from mqctl.cluster import ControllerCluster
from services.common.codes import ResponseCode
from services.common.controller_client import ControllerClient
from services.common.remoting_client import RemotingClient
from services.remoting import headers as h
from services.remoting.acl import ACCESS_KEY, SIGNATURE, SIGNED, sign, signature
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.namesrv_bodies import DataVersion
from tests.integration.conftest import FAST_SCANS, poll
from tests.support.remoting import ask

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOKEN = "t0ken-for-signed-fields"


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[ControllerCluster]:
    """One controller that requires signed requests."""
    cluster = ControllerCluster(tmp_path / "c", size=1, extra={**FAST_SCANS, "authToken": TOKEN})
    cluster.configure()
    cluster.start()
    try:
        cluster.leader(timeout=60)
        yield cluster
    finally:
        cluster.kill_all()


def _now() -> int:
    return time.time_ns() // 1_000_000


def shifted(request: RemotingCommand, left: str, right: str, count: int) -> RemotingCommand:
    """``request`` with the first ``count`` characters of field ``right`` moved to the end of ``left``: the
    concatenation of the values in name order, which RocketMQ's ACL signs, stays the same."""
    ext = dict(request.ext_fields)
    assert sorted(ext).index(right) == sorted(ext).index(left) + 1, "the fields must be neighbours"
    ext[left], ext[right] = ext[left] + ext[right][:count], ext[right][count:]
    return replace(request, ext_fields=ext)


def test_a_signed_322_with_characters_moved_between_fields_is_refused(guarded: ControllerCluster) -> None:
    address = guarded.nodes[0].address
    header = h.QueryDataVersionRequestHeader(broker_name="2x-broker", broker_addr="127.0.0.1:10911",
                                             cluster_name="DefaultCluster", broker_id=1)
    signed = sign(make_request(RequestCode.QUERY_DATA_VERSION, 0, header.to_ext_fields(), DataVersion(1, 2, 3).encode()),
                  TOKEN, _now())
    forged = shifted(signed, "brokerId", "brokerName", 1)  # brokerId 12, brokerName "x-broker"
    assert forged.ext_fields["brokerId"] == "12"
    refused = ask(address, forged)  # first, so that a replay check cannot be what refuses it
    assert refused.code == ResponseCode.NO_PERMISSION, f"the shifted request was answered {refused.code}"
    assert "does not match" in (refused.remark or "")
    accepted = ask(address, signed)
    assert accepted.code == ResponseCode.SUCCESS, accepted.remark


def test_mqctls_older_form_is_refused_until_the_controller_is_told_to_take_it(guarded: ControllerCluster) -> None:
    address = guarded.nodes[0].address
    header = h.QueryDataVersionRequestHeader(broker_name="broker-a", broker_addr="127.0.0.1:10911",
                                             cluster_name="DefaultCluster", broker_id=1).to_ext_fields()

    def older_form() -> RemotingCommand:  # as mqctl signed before: RocketMQ's signature and mqctlSigned
        ext = {**header, ACCESS_KEY: "mqctl", SIGNED: f"{RequestCode.QUERY_DATA_VERSION}:{_now()}"}
        body = DataVersion(1, 2, 3).encode()
        return make_request(RequestCode.QUERY_DATA_VERSION, 0, {**ext, SIGNATURE: signature(TOKEN, ext, body)}, body)

    refused = ask(address, older_form())
    assert refused.code == ResponseCode.NO_PERMISSION and "acceptLegacySignatures" in (refused.remark or "")
    with ControllerClient([address], token=TOKEN) as client:
        client.update_config_of(address, "acceptLegacySignatures", "true")
    assert ask(address, older_form()).code == ResponseCode.SUCCESS
    request = older_form()
    assert ask(address, request).code == ResponseCode.SUCCESS
    assert "replay" in (ask(address, request).remark or "")  # still accepted once only


def test_a_signed_heartbeat_with_characters_moved_between_fields_is_refused(guarded: ControllerCluster) -> None:
    node = guarded.nodes[0]
    beat = h.BrokerHeartbeatRequestHeader(cluster_name="DefaultCluster", broker_addr="127.0.0.1:10911",
                                          broker_name="9lives", broker_id=4, epoch=1, max_offset=0,
                                          heartbeat_timeout_mills=30_000)

    def signed_at(offset_ms: int) -> RemotingCommand:  # one signature per request: none is a replay of another
        return sign(make_request(RequestCode.BROKER_HEARTBEAT, 0, beat.to_ext_fields(), oneway=True), TOKEN,
                    _now() + offset_ms)

    forged_id = shifted(signed_at(0), "brokerId", "brokerName", 1)  # broker "lives", id 49
    forged_epoch = shifted(signed_at(1), "epoch", "heartbeatTimeoutMills", 2)  # epoch 130, timeout "000"
    signed = signed_at(2)
    assert forged_epoch.ext_fields["epoch"] == "130"

    def check() -> None:  # while the connection is open: its closing takes its broker out of the live table
        poll(lambda: 'broker="9lives",broker_id="4"' in _metrics(node.address), 20,
             "the heartbeat as signed to reach the live table")
        assert 'broker="lives",broker_id="49"' not in _metrics(node.address), "the shifted heartbeat was accepted"
        poll(lambda: _log(guarded).count("refused request 904") >= 2, 20, "both shifted heartbeats refused in the log")

    _send_oneway(node.address, [forged_id, forged_epoch, signed], check)  # in this order, on one connection


def _send_oneway(address: str, requests: list[RemotingCommand], check: Callable[[], None]) -> None:
    async def go() -> None:
        client = RemotingClient(timeout_s=5)
        try:
            for request in requests:
                await client.oneway(address, request)
            await client.call(address, make_request(RequestCode.GET_BROKER_CLUSTER_INFO, 0))  # all were read
            await asyncio.to_thread(check)
        finally:
            await client.close()
    asyncio.run(go())


def _metrics(address: str) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as answer:
        return str(answer.read().decode("utf-8"))


def _log(cluster: ControllerCluster) -> str:
    return (cluster.nodes[0].store_dir / "logs" / "controller.log").read_text(encoding="utf-8")
