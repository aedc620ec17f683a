"""Custom headers (services/remoting/headers.py): the exact extFields of each header RocketMQ defines, and
RocketMQ's parsing rules, made strict.

The wire names are the Java field names, which RemotingCommand.makeCustomHeaderToNet (RocketMQ 8fc57f1,
remoting/.../protocol/RemotingCommand.java:430) writes with value.toString(); required fields are those
marked @CFNotNull, checked by decodeCommandCustomHeader (line 306). Each golden below names the class and the
line of its first field under remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.remoting import headers as h
from services.remoting.codec import decode_frame, encode
from services.remoting.command import RequestCode, SerializeType, make_request
from services.remoting.errors import HeaderFieldError
from services.remoting.headers import (
    REQUEST_HEADERS,
    RESPONSE_HEADERS,
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    ApplyBrokerIdResponseHeader,
    BrokerHeartbeatRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    CustomHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    GetRouteInfoRequestHeader,
    NotifyBrokerRoleChangedRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
    UnRegisterBrokerRequestHeader,
)

GOLDEN: list[tuple[CustomHeader, dict[str, str]]] = [
    # controller/AlterSyncStateSetRequestHeader.java:28 (brokerName, masterBrokerId, masterEpoch, invokeTime)
    (AlterSyncStateSetRequestHeader(broker_name="broker-a", master_broker_id=1, master_epoch=3,
                                    invoke_time=1700000000000),
     {"brokerName": "broker-a", "masterBrokerId": "1", "masterEpoch": "3", "invokeTime": "1700000000000"}),
    # controller/AlterSyncStateSetResponseHeader.java:23 (int newSyncStateSetEpoch: always written)
    (AlterSyncStateSetResponseHeader(), {"newSyncStateSetEpoch": "0"}),
    (AlterSyncStateSetResponseHeader(new_sync_state_set_epoch=4), {"newSyncStateSetEpoch": "4"}),
    # controller/ElectMasterRequestHeader.java:33 (clusterName "", brokerName "", brokerId -1, designateElect)
    (ElectMasterRequestHeader(), {"clusterName": "", "brokerName": "", "brokerId": "-1",
                                  "designateElect": "false"}),
    (ElectMasterRequestHeader(cluster_name="DefaultCluster", broker_name="broker-a", broker_id=2,
                              designate_elect=True, invoke_time=5),
     {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "2", "designateElect": "true",
      "invokeTime": "5"}),
    # controller/ElectMasterResponseHeader.java:25
    (ElectMasterResponseHeader(master_broker_id=2, master_address="127.0.0.1:30921", master_epoch=5,
                               sync_state_set_epoch=6),
     {"masterBrokerId": "2", "masterAddress": "127.0.0.1:30921", "masterEpoch": "5", "syncStateSetEpoch": "6"}),
    # controller/GetMetaDataResponseHeader.java:23 (boolean isLeader: the field's name, not the getter's)
    (GetMetaDataResponseHeader(group="group1", controller_leader_id="n0", controller_leader_address="h:9878",
                               is_leader=True, peers="n0-h:9878;n1-h:9868"),
     {"group": "group1", "controllerLeaderId": "n0", "controllerLeaderAddress": "h:9878", "isLeader": "true",
      "peers": "n0-h:9878;n1-h:9868"}),
    (GetMetaDataResponseHeader(), {"isLeader": "false"}),
    # controller/GetReplicaInfoRequestHeader.java:28, GetReplicaInfoResponseHeader.java:24
    (GetReplicaInfoRequestHeader(broker_name="broker-a"), {"brokerName": "broker-a"}),
    (GetReplicaInfoResponseHeader(master_broker_id=1, master_address="a:1", master_epoch=2),
     {"masterBrokerId": "1", "masterAddress": "a:1", "masterEpoch": "2"}),
    # controller/admin/CleanControllerBrokerDataRequestHeader.java:35
    (CleanControllerBrokerDataRequestHeader(cluster_name="c", broker_name="b", broker_controller_ids_to_clean="1;2",
                                            is_clean_living_broker=True, invoke_time=9),
     {"clusterName": "c", "brokerName": "b", "brokerControllerIdsToClean": "1;2", "isCleanLivingBroker": "true",
      "invokeTime": "9"}),
    # controller/register/ApplyBrokerIdRequestHeader.java:32, ApplyBrokerIdResponseHeader.java:25
    (ApplyBrokerIdRequestHeader(cluster_name="c", broker_name="b", applied_broker_id=3,
                                register_check_code="10.0.0.1:10911;1700000000000"),
     {"clusterName": "c", "brokerName": "b", "appliedBrokerId": "3",
      "registerCheckCode": "10.0.0.1:10911;1700000000000"}),
    (ApplyBrokerIdResponseHeader(cluster_name="c", broker_name="b"), {"clusterName": "c", "brokerName": "b"}),
    # controller/register/GetNextBrokerIdRequestHeader.java:32, GetNextBrokerIdResponseHeader.java:25
    (GetNextBrokerIdRequestHeader(cluster_name="c", broker_name="b"), {"clusterName": "c", "brokerName": "b"}),
    (GetNextBrokerIdResponseHeader(cluster_name="c", broker_name="b", next_broker_id=4),
     {"clusterName": "c", "brokerName": "b", "nextBrokerId": "4"}),
    # controller/register/RegisterBrokerToControllerRequestHeader.java:32 and its response header (line 25)
    (RegisterBrokerToControllerRequestHeader(cluster_name="c", broker_name="b", broker_id=1,
                                             broker_address="10.0.0.1:10911", invoke_time=7),
     {"clusterName": "c", "brokerName": "b", "brokerId": "1", "brokerAddress": "10.0.0.1:10911",
      "invokeTime": "7"}),
    (RegisterBrokerToControllerResponseHeader(cluster_name="c", broker_name="b", master_broker_id=1,
                                              master_address="a:1", master_epoch=2, sync_state_set_epoch=3),
     {"clusterName": "c", "brokerName": "b", "masterBrokerId": "1", "masterAddress": "a:1", "masterEpoch": "2",
      "syncStateSetEpoch": "3"}),
    # namesrv/BrokerHeartbeatRequestHeader.java:34
    (BrokerHeartbeatRequestHeader(cluster_name="c", broker_addr="a:1", broker_name="b", broker_id=1, epoch=2,
                                  max_offset=1024, confirm_offset=512, heartbeat_timeout_mills=10000,
                                  election_priority=0),
     {"clusterName": "c", "brokerAddr": "a:1", "brokerName": "b", "brokerId": "1", "epoch": "2",
      "maxOffset": "1024", "confirmOffset": "512", "heartbeatTimeoutMills": "10000", "electionPriority": "0"}),
    # NotifyBrokerRoleChangedRequestHeader.java:28
    (NotifyBrokerRoleChangedRequestHeader(master_address="a:1", master_epoch=2, sync_state_set_epoch=3,
                                          master_broker_id=1),
     {"masterAddress": "a:1", "masterEpoch": "2", "syncStateSetEpoch": "3", "masterBrokerId": "1"}),
    # namesrv/GetRouteInfoRequestHeader.java:36, with RpcRequestHeader's/TopicRequestHeader's short names
    (GetRouteInfoRequestHeader(topic="TopicTest", accept_standard_json_only=True, logical=False, namespace="ns1",
                               namespaced=True, broker_name="broker-a", oneway=False),
     {"topic": "TopicTest", "acceptStandardJsonOnly": "true", "lo": "false", "ns": "ns1", "nsd": "true",
      "bname": "broker-a", "oway": "false"}),
    # namesrv/RegisterBrokerRequestHeader.java:36 (boolean compressed and Integer bodyCrc32 = 0: always written)
    (RegisterBrokerRequestHeader(broker_name="broker-a", broker_addr="10.0.0.1:10911", cluster_name="c",
                                 ha_server_addr="10.0.0.1:10912", broker_id=0, heartbeat_timeout_millis=10000,
                                 enable_acting_master=False, body_crc32=1274312998),
     {"brokerName": "broker-a", "brokerAddr": "10.0.0.1:10911", "clusterName": "c",
      "haServerAddr": "10.0.0.1:10912", "brokerId": "0", "heartbeatTimeoutMillis": "10000",
      "enableActingMaster": "false", "compressed": "false", "bodyCrc32": "1274312998"}),
    # namesrv/RegisterBrokerResponseHeader.java:26 (both @CFNullable)
    (RegisterBrokerResponseHeader(ha_server_addr="a:2", master_addr="a:1"), {"haServerAddr": "a:2",
                                                                              "masterAddr": "a:1"}),
    (RegisterBrokerResponseHeader(), {}),
    # namesrv/UnRegisterBrokerRequestHeader.java:35
    (UnRegisterBrokerRequestHeader(broker_name="b", broker_addr="a:1", cluster_name="c", broker_id=2),
     {"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "brokerId": "2"}),
    # namesrv/QueryDataVersionRequestHeader.java:32, QueryDataVersionResponseHeader.java:26
    (QueryDataVersionRequestHeader(broker_name="b", broker_addr="a:1", cluster_name="c", broker_id=0),
     {"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "brokerId": "0"}),
    (QueryDataVersionResponseHeader(changed=True), {"changed": "true"}),
    # namesrv/PutKVConfigRequestHeader.java:26, GetKVConfigRequestHeader.java:26, DeleteKVConfigRequestHeader.java:26,
    # GetKVConfigResponseHeader.java:25, GetKVListByNamespaceRequestHeader.java:26 (all but value @CFNotNull)
    (h.PutKVConfigRequestHeader(namespace="ORDER_TOPIC_CONFIG", key="T", value="broker-a:4"),
     {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"}),
    (h.GetKVConfigRequestHeader(namespace="n", key="k"), {"namespace": "n", "key": "k"}),
    (h.DeleteKVConfigRequestHeader(namespace="n", key="k"), {"namespace": "n", "key": "k"}),
    (h.GetKVConfigResponseHeader(value="v"), {"value": "v"}),
    (h.GetKVConfigResponseHeader(), {}),
    (h.GetKVListByNamespaceRequestHeader(namespace="n"), {"namespace": "n"}),
    # namesrv/WipeWritePermOfBrokerRequestHeader.java:26 and ResponseHeader:25, AddWritePermOf...: the same
    (h.WipeWritePermOfBrokerRequestHeader(broker_name="b"), {"brokerName": "b"}),
    (h.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=3), {"wipeTopicCount": "3"}),
    (h.AddWritePermOfBrokerRequestHeader(broker_name="b"), {"brokerName": "b"}),
    (h.AddWritePermOfBrokerResponseHeader(add_topic_count=0), {"addTopicCount": "0"}),
    # namesrv/DeleteTopicFromNamesrvRequestHeader.java:26 (clusterName may be absent)
    (h.DeleteTopicFromNamesrvRequestHeader(topic="T", cluster_name="c"), {"topic": "T", "clusterName": "c"}),
    (h.DeleteTopicFromNamesrvRequestHeader(topic="T"), {"topic": "T"}),
    # GetBrokerMemberGroupRequestHeader.java:27
    (h.GetBrokerMemberGroupRequestHeader(cluster_name="c", broker_name="b"), {"clusterName": "c", "brokerName": "b"}),
]


@pytest.mark.parametrize(("header", "ext"), GOLDEN, ids=lambda v: type(v).__name__ if isinstance(v, CustomHeader)
                         else "")
def test_golden_ext_fields(header: CustomHeader, ext: dict[str, str]) -> None:
    assert header.to_ext_fields() == ext
    assert type(header).from_ext_fields(ext) == header


def test_every_header_class_has_a_golden() -> None:
    covered = {type(h) for h, _ in GOLDEN}
    assert set(REQUEST_HEADERS.values()) | set(RESPONSE_HEADERS.values()) <= covered


def test_header_in_a_rocketmq_frame() -> None:
    header = ElectMasterRequestHeader(cluster_name="c", broker_name="b", broker_id=-1)
    command = make_request(RequestCode.CONTROLLER_ELECT_MASTER, opaque=1, ext_fields=header.to_ext_fields(),
                           serialize_type=SerializeType.ROCKETMQ)
    assert ElectMasterRequestHeader.from_ext_fields(decode_frame(encode(command)).ext_fields) == header


def test_what_the_cpp_client_sends_for_a_route() -> None:
    ext = {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "r2KscApgmp4mTbXF2/WzOmrUVqw=", "topic": "T"}
    assert GetRouteInfoRequestHeader.from_ext_fields(ext) == GetRouteInfoRequestHeader(topic="T")


def test_absent_fields_take_java_defaults() -> None:
    assert GetMetaDataResponseHeader.from_ext_fields({}) == GetMetaDataResponseHeader(is_leader=False)
    assert AlterSyncStateSetResponseHeader.from_ext_fields({}).new_sync_state_set_epoch == 0
    assert AlterSyncStateSetRequestHeader.from_ext_fields({}).invoke_time is None
    assert BrokerHeartbeatRequestHeader.from_ext_fields(
        {"clusterName": "c", "brokerAddr": "a", "brokerName": "b"}).broker_id is None


def test_parsing_follows_java() -> None:
    # Long.parseLong accepts a sign and leading zeros; Boolean.parseBoolean ignores case
    parsed = BrokerHeartbeatRequestHeader.from_ext_fields({
        "clusterName": "c", "brokerAddr": "a", "brokerName": "b", "brokerId": "+007", "epoch": "-0",
        "maxOffset": "9223372036854775807"})
    assert (parsed.broker_id, parsed.epoch, parsed.max_offset) == (7, 0, 2**63 - 1)
    assert GetMetaDataResponseHeader.from_ext_fields({"isLeader": "TRUE"}).is_leader is True


@pytest.mark.parametrize(("cls", "ext", "match"), [
    (BrokerHeartbeatRequestHeader, {"brokerAddr": "a", "brokerName": "b"}, "'clusterName' is missing"),
    (ElectMasterRequestHeader, {"clusterName": "c", "brokerName": "b", "brokerId": "1"},
     "'designateElect' is missing"),
    (CleanControllerBrokerDataRequestHeader, {}, "'brokerName' is missing"),
    (GetRouteInfoRequestHeader, {"AccessKey": "x"}, "'topic' is missing"),
    (GetReplicaInfoResponseHeader, {"masterEpoch": "2147483648"}, "'masterEpoch' 2147483648 is outside an int32"),
    (GetReplicaInfoResponseHeader, {"masterBrokerId": "9223372036854775808"}, "outside an int64"),
    (GetReplicaInfoResponseHeader, {"masterEpoch": "1.0"}, "'masterEpoch' must be a decimal integer"),
    (GetReplicaInfoResponseHeader, {"masterEpoch": " 1"}, "decimal integer"),
    (GetReplicaInfoResponseHeader, {"masterEpoch": "1_000"}, "decimal integer"),
    (GetReplicaInfoResponseHeader, {"masterEpoch": "\u0661"}, "decimal integer"),  # an Arabic-Indic one
    (GetReplicaInfoResponseHeader, {"masterEpoch": ""}, "decimal integer"),
    (GetReplicaInfoResponseHeader, {"masterEpoch": "1" * 5000}, "decimal integer"),
    (GetMetaDataResponseHeader, {"isLeader": "yes"}, "'isLeader' must be true or false"),
    (GetMetaDataResponseHeader, {"isLeader": "1"}, "true or false"),
])
def test_refused_ext_fields(cls: type[CustomHeader], ext: dict[str, str], match: str) -> None:
    with pytest.raises(HeaderFieldError, match=f"^{cls.__name__}: field .*{match}") as caught:
        cls.from_ext_fields(ext)
    assert caught.value.header == cls.__name__


@pytest.mark.parametrize("build", [
    lambda: GetReplicaInfoResponseHeader(master_epoch=2**31),
    lambda: GetReplicaInfoResponseHeader(master_broker_id=True),
    lambda: GetReplicaInfoResponseHeader(master_address=5),  # type: ignore[arg-type]
    lambda: GetMetaDataResponseHeader(is_leader=1),  # type: ignore[arg-type]
    lambda: BrokerHeartbeatRequestHeader(cluster_name=None, broker_addr="a", broker_name="b"),  # type: ignore[arg-type]
])
def test_a_header_cannot_hold_what_rocketmq_cannot_read(build: object) -> None:
    with pytest.raises(HeaderFieldError):
        build()  # type: ignore[operator]


def test_request_headers_by_code() -> None:
    assert REQUEST_HEADERS[904] is BrokerHeartbeatRequestHeader
    assert REQUEST_HEADERS[105] is GetRouteInfoRequestHeader
    assert RESPONSE_HEADERS[1005] is GetMetaDataResponseHeader
    assert set(REQUEST_HEADERS) == {904, 1001, 1002, 1003, 1004, 1008, 1011, 1012, 1013, 103, 104, 105, 322, 100, 101, 102,
                                    219, 205, 327, 216, 901}


@given(st.dictionaries(st.sampled_from(["clusterName", "brokerAddr", "brokerName", "brokerId", "epoch",
                                        "maxOffset", "electionPriority", "x"]), st.text(max_size=25)))
@settings(deadline=None)
def test_any_ext_fields_give_a_header_or_a_field_error(ext: dict[str, str]) -> None:
    try:
        header = BrokerHeartbeatRequestHeader.from_ext_fields(ext)
    except HeaderFieldError:
        return
    assert BrokerHeartbeatRequestHeader.from_ext_fields(header.to_ext_fields()) == header
