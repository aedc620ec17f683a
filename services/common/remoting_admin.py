"""The admin requests of our HTTP API, carried over RocketMQ's remoting protocol instead.

A RocketMQ 5 controller, name server or broker speaks only remoting. The command line asks its questions
as operations of our HTTP API (``GET /v1/controller/syncStateData`` ...); for an address that speaks only
remoting, :func:`translate` sends the RocketMQ request that asks the same question (``1006
CONTROLLER_GET_SYNC_STATE_DATA``) and reads RocketMQ's answer (fastjson ``BrokerReplicasInfo``) into the
data our API would have answered, so the commands above this layer, and their output, do not know which
protocol carried them. What RocketMQ's answer does not hold (a replica's cluster name, a slave's id in an
HA status) is None.

An operation with no RocketMQ counterpart (our event log, broker keys) is refused with a clear
:class:`NotOverRemoting` error naming it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from services.broker import contract as broker_contract
from services.common.codes import ResponseCode, code_name
from services.common.errors import ConfigError, MqctlError, RemoteError
from services.common.props import parse_properties
from services.controller import contract
from services.remoting import bodies
from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting import headers as h
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.errors import RemotingError
from services.remoting.message import decode_pulled, encode_properties
from services.remoting.namesrv_bodies import TopicConfigSerializeWrapper

__all__ = ["ADMIN_GROUP", "Answer", "NotOverRemoting", "cluster_info", "commit_offset", "query_offset", "queue_bounds",
           "translate"]

#: The producer and consumer group the command line's sends and pulls carry (mqadmin uses its own).
ADMIN_GROUP = "mqctl_admin"
#: RocketMQ's auto-create topic, named in every send (the broker may create the topic from it).
AUTO_CREATE_TOPIC = "TBW102"

#: One request to the address being translated for, answered (or an error raised) before the deadline.
Call = Callable[[RemotingCommand], RemotingCommand]


class NotOverRemoting(MqctlError):
    """The address speaks only remoting, and RocketMQ has no request for this operation."""

    exit_code = 1


@dataclass(frozen=True)
class Answer:
    """What our API's envelope would have held: its code, remark and data."""

    code: int
    remark: str
    data: Any


def translate(call: Call, method: str, path: str, json: Any, params: Mapping[str, Any] | None) -> Answer:
    handler = _ROUTES.get((method, path))
    if handler is None:
        raise NotOverRemoting(f"this server speaks only RocketMQ's remoting protocol, which has no request for "
                              f"{method} {path}; this command needs an mqctl server")
    try:
        return handler(call, json if isinstance(json, dict) else {}, dict(params or {}))
    except RemotingError as exc:  # a header or body the codec refused
        return Answer(int(ResponseCode.SYSTEM_ERROR), f"malformed remoting answer: {exc}", None)


# ---------------------------------------------------------------------------------- controller


def _metadata(call: Call, json: dict[str, Any], params: dict[str, Any]) -> Answer:
    answer = call(make_request(RequestCode.CONTROLLER_GET_METADATA_INFO, 0))
    if answer.code != ResponseCode.SUCCESS:
        return _failed(answer)
    header = h.GetMetaDataResponseHeader.from_ext_fields(answer.ext_fields)
    return Answer(answer.code, "", {
        "group": header.group, "controllerLeaderId": header.controller_leader_id,
        "controllerLeaderAddress": header.controller_leader_address, "isLeader": header.is_leader,
        "peers": _peers(header.peers or "")})


def _peers(text: str) -> list[str]:
    """RocketMQ writes ``n0:127.0.0.1:9878;n1:...;`` (DLedger's peer map); ``n0-addr`` is read too."""
    peers = []
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        peer_id, colon, address = item.partition(":")
        dash_id, dash, dash_address = item.partition("-")
        if dash and (not colon or len(dash_id) < len(peer_id)):
            peer_id, address = dash_id, dash_address
        peers.append(f"{peer_id}:{address}")
    return peers


def _leader_only(call: Call, answer: RemotingCommand) -> Answer:
    """A non-SUCCESS answer; for CONTROLLER_NOT_LEADER, with the leader's address asked of the same node
    (RocketMQ's answer names no leader; our client follows ``controllerLeaderAddress``)."""
    if answer.code != ResponseCode.CONTROLLER_NOT_LEADER:
        return _failed(answer)
    meta = _metadata(call, {}, {})
    hint = meta.data.get("controllerLeaderAddress") if isinstance(meta.data, dict) else None
    return Answer(answer.code, answer.remark or "", {"controllerLeaderAddress": hint})


def _sync_state_data(call: Call, json: dict[str, Any], params: dict[str, Any]) -> Answer:
    names = [str(n) for n in params.get("brokerName") or []]
    clusters: dict[str, str] = {}
    cluster = params.get("clusterName")
    if not names and cluster:
        info = cluster_info(call)
        names = sorted(info.cluster_addr_table.get(str(cluster), frozenset()))
        clusters = {name: str(cluster) for name in names}
        if not names:
            return Answer(int(ResponseCode.SUCCESS), "", {"brokers": []})
    answer = call(make_request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, 0, None, bodies.encode_broker_names(names)))
    if answer.code != ResponseCode.SUCCESS:
        return _leader_only(call, answer)
    table = bodies.BrokerReplicasInfo.decode(answer.body).replicas_info_table if answer.body else {}
    brokers = [_replicas(name, clusters.get(name), info) for name, info in table.items()]
    return Answer(answer.code, "", {"brokers": brokers})


def _replicas(name: str, cluster: str | None, info: bodies.ReplicasInfo) -> dict[str, Any]:
    def identity(r: bodies.ReplicaIdentity) -> dict[str, Any]:
        return {"brokerName": r.broker_name or name, "brokerId": r.broker_id, "brokerAddress": r.broker_address,
                "alive": bool(r.alive)}
    return {"clusterName": cluster, "brokerName": name, "masterBrokerId": info.master_broker_id,
            "masterAddress": info.master_address, "masterEpoch": info.master_epoch,
            "syncStateSetEpoch": info.sync_state_set_epoch,
            "inSyncReplicas": [identity(r) for r in info.in_sync_replicas],
            "notInSyncReplicas": [identity(r) for r in info.not_in_sync_replicas]}


def _elect_master(call: Call, json: dict[str, Any], params: dict[str, Any]) -> Answer:
    header = h.ElectMasterRequestHeader(
        cluster_name=str(json.get("clusterName") or ""), broker_name=str(json.get("brokerName") or ""),
        broker_id=_int(json.get("brokerId"), -1),
        designate_elect=bool(json.get("designateElect")), invoke_time=int(time.time() * 1000))
    answer = call(make_request(RequestCode.CONTROLLER_ELECT_MASTER, 0, header.to_ext_fields()))
    if answer.code != ResponseCode.SUCCESS:
        return _leader_only(call, answer)
    result = h.ElectMasterResponseHeader.from_ext_fields(answer.ext_fields)
    body = bodies.ElectMasterResponseBody.decode(answer.body) if answer.body else None
    group = body.broker_member_group if body is not None else None
    members = sorted((group.broker_addrs if group is not None else {}).items())
    return Answer(answer.code, "", {
        "clusterName": header.cluster_name, "brokerName": header.broker_name,
        "masterBrokerId": result.master_broker_id, "masterAddress": result.master_address,
        "masterEpoch": result.master_epoch, "syncStateSetEpoch": result.sync_state_set_epoch,
        "syncStateSet": sorted(body.sync_state_set) if body is not None else [],
        "brokers": [{"brokerId": i, "brokerAddress": a} for i, a in members]})


def _clean_broker_data(call: Call, json: dict[str, Any], params: dict[str, Any]) -> Answer:
    ids = json.get("brokerControllerIdsToClean")
    header = h.CleanControllerBrokerDataRequestHeader(
        cluster_name=json.get("clusterName"), broker_name=str(json.get("brokerName") or ""),
        broker_controller_ids_to_clean=str(ids) if ids else None,
        is_clean_living_broker=bool(json.get("isCleanLivingBroker")), invoke_time=int(time.time() * 1000))
    answer = call(make_request(RequestCode.CLEAN_BROKER_DATA, 0, header.to_ext_fields()))
    return Answer(answer.code, "", {}) if answer.code == ResponseCode.SUCCESS else _leader_only(call, answer)


def _get_config(call: Call, json: dict[str, Any], params: dict[str, Any]) -> Answer:
    answer = call(make_request(RequestCode.GET_CONTROLLER_CONFIG, 0))
    if answer.code != ResponseCode.SUCCESS:
        return _failed(answer)
    try:
        config = parse_properties(answer.body.decode("utf-8"), "the controller's answer")
    except (UnicodeDecodeError, ConfigError) as exc:
        return Answer(int(ResponseCode.SYSTEM_ERROR), f"the configuration answered is not properties text: {exc}",
                      None)
    return Answer(answer.code, "", {"config": config})


def _update_config(call: Call, json: dict[str, Any], params: dict[str, Any]) -> Answer:
    text = "".join(f"{key}={value}\n" for key, value in json.items())
    answer = call(make_request(RequestCode.UPDATE_CONTROLLER_CONFIG, 0, None, text.encode("utf-8")))
    return Answer(answer.code, "", {}) if answer.code == ResponseCode.SUCCESS else _failed(answer)


# ---------------------------------------------------------------------------------- name server


def cluster_info(call: Call) -> bodies.ClusterInfo:
    """106 GET_BROKER_CLUSTER_INFO: every broker group's addresses, and the groups of each cluster."""
    answer = call(make_request(RequestCode.GET_BROKER_CLUSTER_INFO, 0))
    if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        raise NotOverRemoting("this server is not a name server (it does not serve GET_BROKER_CLUSTER_INFO): "
                              "name the broker-sets with -b, or give the name server with -n")
    if answer.code != ResponseCode.SUCCESS:
        raise MqctlError(f"GET_BROKER_CLUSTER_INFO failed: {answer.remark or answer.code}")
    return bodies.ClusterInfo.decode(answer.body) if answer.body else bodies.ClusterInfo()


# ---------------------------------------------------------------------------------- broker


def _epoch_cache(call: Call, json: dict[str, Any], params: dict[str, Any]) -> Answer:
    answer = call(make_request(RequestCode.GET_BROKER_EPOCH_CACHE, 0))
    if answer.code != ResponseCode.SUCCESS:
        return _failed(answer)
    cache = bodies.EpochEntryCache.decode(answer.body)
    rows = [{"epoch": e.epoch, "startOffset": e.start_offset, "endOffset": e.end_offset} for e in cache.epoch_list]
    if rows:  # as mqadmin prints it: the open entry ends at the broker's max offset
        rows[-1]["endOffset"] = cache.max_offset
    return Answer(answer.code, "", {
        "clusterName": cache.cluster_name, "brokerName": cache.broker_name, "brokerId": cache.broker_id,
        # a RocketMQ broker in controller mode reports id 0 while it is master
        "role": "MASTER" if cache.broker_id == 0 else "SLAVE", "masterEpoch": None, "epochEntries": rows,
        "maxOffset": cache.max_offset, "confirmOffset": None})


def _ha_status(call: Call, json: dict[str, Any], params: dict[str, Any]) -> Answer:
    answer = call(make_request(RequestCode.GET_BROKER_HA_STATUS, 0))
    if answer.code != ResponseCode.SUCCESS:
        return _failed(answer)
    info = bb.HARuntimeInfo.decode(answer.body)
    base = {"clusterName": None, "brokerName": None, "brokerId": None, "masterEpoch": None, "confirmOffset": None}
    if info.master:
        slaves = [{"slaveId": None, "slaveAddress": c.addr, "ackOffset": c.slave_ack_offset, "lag": c.diff,
                   "inSync": c.in_sync, "transferSpeedKBps": c.transferred_byte_in_second / 1024,
                   "transferFromWhere": c.transfer_from_where, "lastCaughtUpAgoMs": None}
                  for c in info.ha_connection_info]
        return Answer(answer.code, "", {**base, "role": "MASTER", "maxOffset": info.master_commit_log_max_offset,
                                        "inSyncSlaveNums": info.in_sync_slave_nums, "slaves": slaves,
                                        "syncStateSet": None})
    client = info.ha_client_runtime_info
    return Answer(answer.code, "", {
        **base, "role": "SLAVE", "masterAddress": client.master_addr, "maxOffset": client.max_offset,
        "lastReadTimestamp": client.last_read_timestamp, "lastWriteTimestamp": client.last_write_timestamp,
        "transferSpeedKBps": client.transferred_byte_in_second / 1024,
        "masterFlushOffset": client.master_flush_offset, "state": None})


_SEND_STATUS: dict[int, str] = {ResponseCode.SUCCESS: "PUT_OK", ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
                ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
                ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE"}


def _send_message(call: Call, json: dict[str, Any], params: dict[str, Any]) -> Answer:
    given = json.get("properties")
    given = given if isinstance(given, dict) else {}
    properties = {**{str(k): str(v) for k, v in given.items()}, "KEYS": str(json.get("keys") or ""),
                  "TAGS": str(json.get("tags") or ""), "WAIT": "true"}
    header = bh.SendMessageRequestHeaderV2(
        producer_group=ADMIN_GROUP, topic=str(json.get("topic") or ""), default_topic=AUTO_CREATE_TOPIC,
        default_topic_queue_nums=4, queue_id=_int(json.get("queueId"), -1),
        sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties({k: v for k, v in properties.items() if v}), reconsume_times=0,
        unit_mode="false", batch="false")
    body = str(json.get("body") or "").encode("utf-8")
    answer = call(make_request(RequestCode.SEND_MESSAGE_V2, 0, header.to_ext_fields(), body))
    status = _SEND_STATUS.get(answer.code)
    if status is None:
        return _failed(answer)
    result = bh.SendMessageResponseHeader.from_ext_fields(answer.ext_fields)
    return Answer(answer.code, answer.remark or "", {
        "status": status, "msgId": result.msg_id, "queueId": result.queue_id, "queueOffset": result.queue_offset,
        "commitLogOffset": None})


_PULL_STATUS: dict[int, str] = {ResponseCode.SUCCESS: "FOUND", ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
                ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG", ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL"}


def _pull_message(call: Call, json: dict[str, Any], params: dict[str, Any]) -> Answer:
    header = bh.PullMessageRequestHeader(
        consumer_group=ADMIN_GROUP, topic=str(params.get("topic") or ""), queue_id=int(params.get("queueId") or 0),
        queue_offset=int(params.get("queueOffset") or 0), max_msg_nums=int(params.get("maxNums") or 32),
        sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0,
        expression_type="TAG")
    answer = call(make_request(RequestCode.PULL_MESSAGE, 0, header.to_ext_fields()))
    status = _PULL_STATUS.get(answer.code)
    if status is None:
        return _failed(answer)
    result = bh.PullMessageResponseHeader.from_ext_fields(answer.ext_fields)
    messages = decode_pulled(answer.body) if status == "FOUND" else []
    return Answer(int(ResponseCode.SUCCESS), "", {
        "status": status, "nextBeginOffset": result.next_begin_offset, "minOffset": result.min_offset,
        "maxOffset": result.max_offset, "messages": [_message(m) for m in messages]})


def _message(m: Any) -> dict[str, Any]:
    try:
        body: str | None = m.body.decode("utf-8")
        encoded = None
    except UnicodeDecodeError:
        import base64
        body, encoded = None, base64.b64encode(m.body).decode("ascii")
    props = {k: v for k, v in m.properties.items() if k not in ("KEYS", "TAGS")}
    return {"msgId": m.msg_id, "topic": m.topic, "queueId": m.queue_id, "queueOffset": m.queue_offset,
            "commitLogOffset": m.commit_log_offset, "body": body, "bodyBase64": encoded, "keys": m.keys,
            "tags": m.tags, "properties": props, "storeTimestamp": m.store_timestamp, "storeSize": None}


def _topics(call: Call, json: dict[str, Any], params: dict[str, Any]) -> Answer:
    answer = call(make_request(bh.GET_ALL_TOPIC_CONFIG, 0))
    if answer.code != ResponseCode.SUCCESS:
        return _failed(answer)
    wrapper = TopicConfigSerializeWrapper.decode(answer.body)
    topics = [{"topic": name, "queues": [{"queueId": q} for q in range(config.read_queue_nums)]}
              for name, config in sorted(wrapper.topic_config_table.items())]
    return Answer(answer.code, "", {"topics": topics})


def _int(value: Any, default: int) -> int:
    return default if value is None else int(value)


def _failed(answer: RemotingCommand) -> Answer:
    return Answer(answer.code, answer.remark or "", None)


Handler = Callable[[Call, dict[str, Any], dict[str, Any]], Answer]

_ROUTES: dict[tuple[str, str], Handler] = {
    ("GET", contract.METADATA): _metadata,
    ("GET", contract.SYNC_STATE_DATA): _sync_state_data,
    ("POST", contract.ELECT_MASTER): _elect_master,
    ("POST", contract.CLEAN_BROKER_DATA): _clean_broker_data,
    ("GET", contract.CONFIG): _get_config,
    ("POST", contract.CONFIG): _update_config,
    ("GET", broker_contract.EPOCH_CACHE): _epoch_cache,
    ("GET", broker_contract.HA_STATUS): _ha_status,
    ("POST", broker_contract.SEND_MESSAGE): _send_message,
    ("GET", broker_contract.PULL_MESSAGE): _pull_message,
    ("GET", broker_contract.TOPICS): _topics,
}


# ---------------------------------------------------------------------------------- consumer offsets
# A consumer group's committed offsets live in the broker and travel only as RocketMQ's requests (14, 15,
# 30, 31): the same calls serve our brokers and RocketMQ's.


def query_offset(call: Call, group: str, topic: str, queue_id: int) -> int | None:
    """14 QUERY_CONSUMER_OFFSET: the group's committed offset of the queue, None if it has none."""
    header = bh.QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id,
                                                 set_zero_if_not_found=False)
    answer = call(make_request(RequestCode.QUERY_CONSUMER_OFFSET, 0, header.to_ext_fields()))
    if answer.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    _ok(answer, "QUERY_CONSUMER_OFFSET")
    return bh.QueryConsumerOffsetResponseHeader.from_ext_fields(answer.ext_fields).offset


def queue_bounds(call: Call, topic: str, queue_id: int) -> tuple[int, int]:
    """31 GET_MIN_OFFSET and 30 GET_MAX_OFFSET of the queue."""
    low = call(make_request(RequestCode.GET_MIN_OFFSET, 0, bh.GetMinOffsetRequestHeader(
        topic=topic, queue_id=queue_id).to_ext_fields()))
    _ok(low, "GET_MIN_OFFSET")
    high = call(make_request(RequestCode.GET_MAX_OFFSET, 0, bh.GetMaxOffsetRequestHeader(
        topic=topic, queue_id=queue_id).to_ext_fields()))
    _ok(high, "GET_MAX_OFFSET")
    return (bh.GetMinOffsetResponseHeader.from_ext_fields(low.ext_fields).offset,
            bh.GetMaxOffsetResponseHeader.from_ext_fields(high.ext_fields).offset)


def commit_offset(call: Call, group: str, topic: str, queue_id: int, offset: int) -> None:
    """15 UPDATE_CONSUMER_OFFSET, answered (not oneway: the command says whether it was kept)."""
    header = bh.UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id,
                                                  commit_offset=offset)
    _ok(call(make_request(RequestCode.UPDATE_CONSUMER_OFFSET, 0, header.to_ext_fields())), "UPDATE_CONSUMER_OFFSET")


def _ok(answer: RemotingCommand, what: str) -> None:
    if answer.code != ResponseCode.SUCCESS:
        raise RemoteError(answer.code, f"{what}: {answer.remark or code_name(answer.code)}")
