"""Asking RocketMQ's servers over the remoting protocol whether they are ready (with our own client and
codec: nothing here is RocketMQ code)."""

from __future__ import annotations

from services.common.codes import ResponseCode
from services.remoting.bodies import BrokerReplicasInfo, ClusterInfo, ReplicasInfo, encode_broker_names
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.headers import GetMetaDataResponseHeader
from services.remoting.namesrv_bodies import TopicConfig, TopicConfigSerializeWrapper
from tests.support.remoting import ask

#: GET_BROKER_RUNTIME_INFO: every broker answers it once its remoting server runs.
GET_BROKER_RUNTIME_INFO = 28
#: GET_ALL_TOPIC_CONFIG: a broker's topics.
GET_ALL_TOPIC_CONFIG = 21


def _ok(address: str, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
    answer = ask(address, request, timeout_s)
    if answer.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"{address} answered {request.code} with code {answer.code}: {answer.remark}")
    return answer


def cluster_info(namesrv: str, timeout_s: float = 3.0) -> ClusterInfo:
    """106 GET_BROKER_CLUSTER_INFO to a name server."""
    answer = _ok(namesrv, make_request(RequestCode.GET_BROKER_CLUSTER_INFO, 1), timeout_s)
    return ClusterInfo.decode(answer.body) if answer.body else ClusterInfo()


def controller_metadata(controller: str, timeout_s: float = 3.0) -> GetMetaDataResponseHeader:
    """1005 CONTROLLER_GET_METADATA_INFO to one controller: its group, the leader it knows, its peers."""
    answer = _ok(controller, make_request(RequestCode.CONTROLLER_GET_METADATA_INFO, 1), timeout_s)
    return GetMetaDataResponseHeader.from_ext_fields(answer.ext_fields)


def sync_state(leader: str, broker_name: str, timeout_s: float = 3.0) -> ReplicasInfo | None:
    """1006 CONTROLLER_GET_SYNC_STATE_DATA for one group, asked of the controller leader."""
    request = make_request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, 1, body=encode_broker_names([broker_name]))
    answer = _ok(leader, request, timeout_s)
    return BrokerReplicasInfo.decode(answer.body).replicas_info_table.get(broker_name)


def broker_answers(broker: str, timeout_s: float = 3.0) -> bool:
    """28 GET_BROKER_RUNTIME_INFO to a broker: its remoting server is up."""
    _ok(broker, make_request(GET_BROKER_RUNTIME_INFO, 1), timeout_s)
    return True


def topic_configs(broker: str, timeout_s: float = 3.0) -> dict[str, TopicConfig]:
    """21 GET_ALL_TOPIC_CONFIG to a broker: its topics by name."""
    answer = _ok(broker, make_request(GET_ALL_TOPIC_CONFIG, 1), timeout_s)
    return dict(TopicConfigSerializeWrapper.decode(answer.body).topic_config_table)
