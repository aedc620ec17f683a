"""JSON bodies (services/remoting/bodies.py): golden text as fastjson writes each RocketMQ class (bean
properties sorted by name, null ones left out, Long map keys bare), reading back, and type errors naming
the path of the bad field.

Classes followed (RocketMQ 8fc57f1, remoting/src/main/java/org/apache/rocketmq/remoting/protocol/):
body/SyncStateSet.java:25, body/BrokerReplicasInfo.java:27 (ReplicasInfo :48, ReplicaIdentity :130),
EpochEntry.java:24, body/EpochEntryCache.java:24, body/BrokerMemberGroup.java:27,
body/ElectMasterResponseBody.java:26, route/BrokerData.java:32, body/ClusterInfo.java:29,
route/QueueData.java:24, route/TopicRouteData.java:34.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.remoting.bodies import (
    Body,
    BrokerData,
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ClusterInfo,
    ElectMasterResponseBody,
    EpochEntry,
    EpochEntryCache,
    QueueData,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
    TopicRouteData,
    decode_broker_names,
    encode_broker_names,
)
from services.remoting.errors import BodyError

A1, A2 = "127.0.0.1:30911", "127.0.0.1:30921"

GOLDEN: list[tuple[Body, bytes]] = [
    # body/SyncStateSet.java:25-26: Set<Long> syncStateSet, int syncStateSetEpoch
    (SyncStateSet(frozenset({2, 1}), 3), b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}'),
    # body/BrokerReplicasInfo.java:27 replicasInfoTable; ReplicasInfo :48-54; ReplicaIdentity :130-134
    (BrokerReplicasInfo({"broker-a": ReplicasInfo(
        1, A1, 2, 3, (ReplicaIdentity("broker-a", 1, A1, True),), (ReplicaIdentity("broker-a", 2, A2, False),))}),
     (b'{"replicasInfoTable":{"broker-a":{"inSyncReplicas":[{"alive":true,"brokerAddress":"127.0.0.1:30911",'
     b'"brokerId":1,"brokerName":"broker-a"}],"masterAddress":"127.0.0.1:30911","masterBrokerId":1,'
     b'"masterEpoch":2,"notInSyncReplicas":[{"alive":false,"brokerAddress":"127.0.0.1:30921","brokerId":2,'
     b'"brokerName":"broker-a"}],"syncStateSetEpoch":3}}}')),
    # body/EpochEntryCache.java:24-28; EpochEntry.java:24-26 (endOffset defaults to Long.MAX_VALUE)
    (EpochEntryCache("DefaultCluster", "broker-a", 1, (EpochEntry(1, 0, 1024), EpochEntry(2, 1024)), 2048),
     (b'{"brokerId":1,"brokerName":"broker-a","clusterName":"DefaultCluster","epochList":[{"endOffset":1024,'
     b'"epoch":1,"startOffset":0},{"endOffset":9223372036854775807,"epoch":2,"startOffset":1024}],'
     b'"maxOffset":2048}')),
    # body/ElectMasterResponseBody.java:26-27; body/BrokerMemberGroup.java:27-29 (Map<Long, String>: bare keys)
    (ElectMasterResponseBody(BrokerMemberGroup("DefaultCluster", "broker-a", {2: A2, 1: A1}), frozenset({1, 2})),
     (b'{"brokerMemberGroup":{"brokerAddrs":{1:"127.0.0.1:30911",2:"127.0.0.1:30921"},"brokerName":"broker-a",'
     b'"cluster":"DefaultCluster"},"syncStateSet":[1,2]}')),
    (ElectMasterResponseBody(None), b'{"syncStateSet":[]}'),
    # body/ClusterInfo.java:29-30; route/BrokerData.java:32-46 (HashMap<Long, String> brokerAddrs: bare keys;
    # zoneName null, so left out)
    (ClusterInfo({"broker-a": BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})},
                 {"DefaultCluster": frozenset({"broker-a"})}),
     (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
     b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},'
     b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')),
    # route/TopicRouteData.java:34-39 (orderTopicConf and topicQueueMappingByBroker null: left out);
    # route/QueueData.java:24-28
    (TopicRouteData((QueueData("broker-a", 4, 4, 6, 0),),
                    (BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911"}, zone_name="z1"),)),
     (b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster",'
     b'"enableActingMaster":false,"zoneName":"z1"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
     b'"perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')),
]


@pytest.mark.parametrize(("body", "text"), GOLDEN, ids=lambda v: type(v).__name__ if isinstance(v, Body) else "")
def test_golden(body: Body, text: bytes) -> None:
    assert body.encode() == text
    assert type(body).decode(text) == body


def test_quoted_broker_ids_are_read_too() -> None:
    """What a requester that asks for standard JSON gets from RocketMQ's name server (BrowserCompatible)."""
    data = BrokerData("c", "b", {0: "h:1", 1: "h:2"})
    standard = data.encode(standard=True)
    assert standard == b'{"brokerAddrs":{"0":"h:1","1":"h:2"},"brokerName":"b","cluster":"c","enableActingMaster":false}'
    assert BrokerData.decode(standard) == data


def test_absent_collections_are_empty_and_unknown_fields_ignored() -> None:
    assert TopicRouteData.decode(b'{"new":1}') == TopicRouteData()
    assert SyncStateSet.decode(b"{}") == SyncStateSet(frozenset(), 0)
    assert EpochEntry.decode(b'{"epoch":1,"startOffset":5}') == EpochEntry(1, 5)  # endOffset: Long.MAX_VALUE


def test_static_topic_mapping_is_kept_as_read() -> None:
    text = b'{"topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a","epoch":1}}}'
    assert TopicRouteData.decode(text).topic_queue_mapping_by_broker == {"broker-a": {"bname": "broker-a",
                                                                                      "epoch": 1}}


def test_broker_names_list() -> None:  # 1006's request body: RemotingSerializable.decode(body, List.class)
    assert encode_broker_names(["broker-a", "broker-b"]) == b'["broker-a","broker-b"]'
    assert decode_broker_names(b'["broker-a"]') == ("broker-a",)
    with pytest.raises(BodyError, match=r"\[1\] is an integer, not a string"):
        decode_broker_names(b'["a",1]')
    with pytest.raises(BodyError, match="not an array"):
        decode_broker_names(b'{"a":1}')


@pytest.mark.parametrize(("cls", "text", "match"), [
    (SyncStateSet, b"[]", "^body is an array, not an object"),
    (SyncStateSet, b'{"syncStateSet":["1"]}', r"^syncStateSet\[0\] is a string, not an integer"),
    (SyncStateSet, b'{"syncStateSet":[null]}', r"syncStateSet\[0\] is null"),
    (SyncStateSet, b'{"syncStateSetEpoch":2147483648}', "syncStateSetEpoch = 2147483648 is outside int32"),
    (SyncStateSet, b'{"syncStateSet":{}}', "syncStateSet is an object, not an array"),
    (BrokerReplicasInfo, b'{"replicasInfoTable":{"a":{"masterEpoch":"2"}}}',
     "replicasInfoTable.a.masterEpoch is a string, not an integer"),
    (BrokerReplicasInfo, b'{"replicasInfoTable":{"a":{"inSyncReplicas":[{"alive":"yes"}]}}}',
     r"replicasInfoTable.a.inSyncReplicas\[0\].alive is a string, not a boolean"),
    (BrokerReplicasInfo, b'{"replicasInfoTable":{7:{}}}', "key 7 must be quoted"),
    (BrokerData, b'{"brokerAddrs":{"x":"h"}}', "brokerAddrs.x: key 'x' is not a broker id"),
    (BrokerData, b'{"brokerAddrs":{"01":"h"}}', "not a broker id"),
    (BrokerData, b'{"brokerAddrs":{0:1}}', "brokerAddrs.0 is an integer, not a string"),
    (BrokerData, b'{"brokerAddrs":{0:"a","0":"b"}}', "duplicate key '0' \\(the same name as 0\\)"),
    (BrokerData, b'{"brokerAddrs":{"-0":"a"}}', "key '-0' is not a broker id"),
    (BrokerData, b'{"brokerAddrs":{"01":"a"}}', "key '01' is not a broker id"),
    (BrokerData, b'{"cluster":5}', "cluster is an integer, not a string"),
    (ClusterInfo, b'{"clusterAddrTable":{"c":"broker-a"}}', "clusterAddrTable.c is a string, not an array"),
    (ElectMasterResponseBody, b'{"brokerMemberGroup":[]}', "brokerMemberGroup is an array, not an object"),
    (TopicRouteData, b'{"queueDatas":[{"perm":1.5}]}', r"queueDatas\[0\].perm is a number, not an integer"),
    (TopicRouteData, b'{"topicQueueMappingByBroker":[]}', "topicQueueMappingByBroker is an array"),
    (EpochEntryCache, b'{"epochList":[{"endOffset":null}]}', r"epochList\[0\].endOffset is missing"),
    (EpochEntryCache, b'{"brokerId":1', "not valid JSON"),
])
def test_refused(cls: type[Body], text: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match):
        cls.decode(text)


def test_size_limit() -> None:
    with pytest.raises(BodyError, match="more than the limit of 10"):
        SyncStateSet.decode(b'{"syncStateSet":[]}', max_bytes=10)


ids = st.integers(0, 2**63 - 1)
names = st.text(min_size=1, max_size=8)


@given(st.builds(BrokerData, names, names, st.dictionaries(ids, names, max_size=3), st.none() | names,
                 st.booleans()))
@settings(deadline=None)
def test_broker_data_round_trip(data: BrokerData) -> None:
    assert BrokerData.decode(data.encode()) == data
    assert BrokerData.decode(data.encode(standard=True)) == data


@given(st.binary(max_size=120))
@settings(deadline=None)
def test_any_bytes_give_a_body_or_a_body_error(data: bytes) -> None:
    for cls in (ClusterInfo, TopicRouteData, BrokerReplicasInfo, ElectMasterResponseBody):
        try:
            cls.decode(data)
        except BodyError:
            pass
