"""A broker id that a controller has registered but whose broker never runs: what a stopped, removed broker
leaves behind, made in milliseconds instead of by starting and stopping a JVM. It is registered as a
starting broker registers (1012 next id, 1013 apply it, 1003 register), over RocketMQ's remoting protocol,
so the same steps work against RocketMQ's controllers and ours."""

from __future__ import annotations

import time

from services.common.codes import ResponseCode
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.headers import (
    ApplyBrokerIdRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    RegisterBrokerToControllerRequestHeader,
)
from tests.support.remoting import ask


def _ok(leader: str, request: RemotingCommand) -> RemotingCommand:
    answer = ask(leader, request)
    assert answer.code == ResponseCode.SUCCESS, f"{leader} answered {request.code}: {answer.code} {answer.remark}"
    return answer


def register_phantom(leader: str, cluster: str, group: str, address: str) -> int:
    """Register ``address`` in ``group`` with the controller leader; the broker id it got."""
    names = {"cluster_name": cluster, "broker_name": group}
    answer = _ok(leader, make_request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, 1,
                                      GetNextBrokerIdRequestHeader(**names).to_ext_fields()))
    broker_id = GetNextBrokerIdResponseHeader.from_ext_fields(answer.ext_fields).next_broker_id
    assert broker_id is not None
    check = f"{address};{int(time.time() * 1000)}"
    _ok(leader, make_request(RequestCode.CONTROLLER_APPLY_BROKER_ID, 2, ApplyBrokerIdRequestHeader(
        **names, applied_broker_id=broker_id, register_check_code=check).to_ext_fields()))
    _ok(leader, make_request(RequestCode.CONTROLLER_REGISTER_BROKER, 3, RegisterBrokerToControllerRequestHeader(
        **names, broker_id=broker_id, broker_address=address, invoke_time=int(time.time() * 1000)).to_ext_fields()))
    return broker_id
