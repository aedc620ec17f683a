"""RocketMQ's custom headers: the typed fields a request or response carries in ``extFields``.

Each class mirrors one RocketMQ ``CommandCustomHeader``: the wire names are the Java field names
(``makeCustomHeaderToNet`` writes every non-null field as ``name -> value.toString()``), so a boolean
field declared ``isLeader`` travels as ``isLeader``. Python attributes are the snake_case of the same
words. ``to_ext_fields`` writes numbers in decimal and booleans as ``true``/``false`` and leaves None
out; ``from_ext_fields`` checks what RocketMQ's ``decodeCommandCustomHeader`` parses, and more strictly:

* a field marked ``@CFNotNull`` in RocketMQ must be present (else ``HeaderFieldError``);
* an int field must be a decimal int32, a long field an int64 (``[+-]?[0-9]+``; RocketMQ logs a bad
  number and leaves the field at its default, here it is an error naming the field);
* a boolean must be ``true`` or ``false`` in any case (RocketMQ reads anything else as false);
* an absent field takes the Java default: 0 / false for a primitive, None for a boxed or String field,
  and None for ``invokeTime`` (RocketMQ stamps its own clock there; a sans-I/O codec has none);
* fields RocketMQ does not declare (``AccessKey``, ``Signature``, ``OnsChannel``, ...) are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from typing import Any, Self

from services.remoting.command import RequestCode
from services.remoting.errors import HeaderFieldError


class Kind(Enum):
    STRING = "a string"
    INT32 = "an int32"
    INT64 = "an int64"
    BOOLEAN = "a boolean"


_BOUNDS = {Kind.INT32: (-(2**31), 2**31 - 1), Kind.INT64: (-(2**63), 2**63 - 1)}


def _f(wire: str, kind: Kind, *, required: bool = False, default: Any = None) -> Any:
    """A header field: its wire name, its Java type, and whether RocketMQ marks it @CFNotNull.
    ``default=MISSING`` makes the field mandatory in the constructor too."""
    metadata = {"wire": wire, "kind": kind, "required": required}
    return field(default=default, metadata=metadata)


def _string(wire: str, *, required: bool = False, default: Any = None) -> Any:
    return _f(wire, Kind.STRING, required=required, default=default)


def _int(wire: str, *, required: bool = False, default: Any = None) -> Any:
    return _f(wire, Kind.INT32, required=required, default=default)


def _long(wire: str, *, required: bool = False, default: Any = None) -> Any:
    return _f(wire, Kind.INT64, required=required, default=default)


def _bool(wire: str, *, required: bool = False, default: Any = None) -> Any:
    return _f(wire, Kind.BOOLEAN, required=required, default=default)


@dataclass(frozen=True)
class _Spec:
    name: str
    wire: str
    kind: Kind
    required: bool
    default: Any
    low: int = 0  # an integer field's range
    high: int = 0

    @classmethod
    def of(cls, name: str, wire: str, kind: Kind, required: bool, default: Any) -> _Spec:
        low, high = _BOUNDS.get(kind, (0, 0))
        return cls(name, wire, kind, required, default, low, high)


_SPECS: dict[type, tuple[_Spec, ...]] = {}


def _specs(cls: type) -> tuple[_Spec, ...]:
    """The fields of a header class, read once per class (every CustomHeader subclass is a dataclass)."""
    specs = _SPECS.get(cls)
    if specs is None:
        specs = _SPECS[cls] = tuple(_Spec.of(f.name, f.metadata["wire"], f.metadata["kind"], f.metadata["required"],
                                          None if f.default is MISSING else f.default) for f in fields(cls))
    return specs


class CustomHeader:
    """Base of every header dataclass: validation, ``to_ext_fields`` and ``from_ext_fields``."""

    def __post_init__(self) -> None:
        for spec in _specs(type(self)):
            value = getattr(self, spec.name)
            if value is None:
                if spec.required:
                    raise HeaderFieldError(type(self).__name__, spec.wire, "is required")
            elif not _fits(spec.kind, value):
                raise HeaderFieldError(type(self).__name__, spec.wire, f"must be {spec.kind.value}, got {value!r}")
        self._check()

    def _check(self) -> None:
        """Rules beyond each field's type (a subclass's); run however the header was built."""

    @classmethod
    def wire_names(cls) -> tuple[str, ...]:
        """The extField names this header reads and writes."""
        return tuple(spec.wire for spec in _specs(cls))

    def to_ext_fields(self) -> dict[str, str]:
        ext: dict[str, str] = {}
        for spec in _specs(type(self)):
            value = getattr(self, spec.name)
            if value is not None:
                ext[spec.wire] = _to_text(value)
        return ext

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str], *, wire_of: type[CustomHeader] | None = None) -> Self:
        """Every field parsed and checked from its text; the header is built without checking the types a
        second time (parsing gave them), but with the class's own rules (``_check``).

        ``wire_of``: another header class with the same fields under other wire names (SEND_MESSAGE_V2's
        one-letter names): the fields are read under its names, and errors name it."""
        header = object.__new__(cls)
        specs = _specs(cls) if wire_of is None else _renamed_specs(cls, wire_of)
        name = cls.__name__ if wire_of is None else wire_of.__name__
        for spec in specs:
            raw = ext.get(spec.wire)
            if raw is None:
                if spec.required:
                    raise HeaderFieldError(name, spec.wire, "is missing (required)")
                value = spec.default
            elif spec.kind is Kind.STRING:
                value = raw
            elif spec.kind is Kind.BOOLEAN:
                value = _parse(name, spec.wire, spec.kind, raw)
            else:
                value = _parse_int(name, spec, raw)
            object.__setattr__(header, spec.name, value)
        header._check()
        return header

    @classmethod
    def _checked_values(cls, values: Mapping[str, Any]) -> Self:
        """A header from values that already passed this module's checks (another header's fields):
        every field must be given; only the class's own rules run again."""
        header = object.__new__(cls)
        for spec in _specs(cls):
            object.__setattr__(header, spec.name, values[spec.name])
        header._check()
        return header


_RENAMED: dict[tuple[type, type], tuple[_Spec, ...]] = {}


def _renamed_specs(cls: type, wire_of: type) -> tuple[_Spec, ...]:
    """``cls``'s fields under ``wire_of``'s wire names (the fields both have, by attribute name), with
    ``wire_of``'s required marks; read once per pair of classes."""
    specs = _RENAMED.get((cls, wire_of))
    if specs is None:
        theirs = {s.name: s for s in _specs(wire_of)}
        specs = _RENAMED[(cls, wire_of)] = tuple(
            _Spec.of(s.name, theirs[s.name].wire, s.kind, theirs[s.name].required, s.default) for s in _specs(cls))
    return specs


def _parse_int(header: str, spec: _Spec, raw: str) -> int:
    """``_parse`` of an integer field, with the bounds the spec holds (the hot path of every request)."""
    digits = raw[1:] if raw[:1] in "+-" and raw else raw
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 64):
        raise HeaderFieldError(header, spec.wire, f"must be a decimal integer, got {raw[:40]!r}")
    value = int(raw)
    if not spec.low <= value <= spec.high:
        raise HeaderFieldError(header, spec.wire, f"{value} is outside {spec.kind.value}")
    return value


def _fits(kind: Kind, value: object) -> bool:
    if kind is Kind.STRING:
        return isinstance(value, str)
    if kind is Kind.BOOLEAN:
        return isinstance(value, bool)
    low, high = _BOUNDS[kind]
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _to_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse(header: str, wire: str, kind: Kind, raw: str) -> object:
    if kind is Kind.STRING:
        return raw
    if kind is Kind.BOOLEAN:
        lowered = raw.lower()
        if lowered not in ("true", "false"):
            raise HeaderFieldError(header, wire, f"must be true or false, got {raw[:40]!r}")
        return lowered == "true"
    digits = raw[1:] if raw[:1] in ("+", "-") else raw
    # ASCII digits only (str.isdigit alone would take other scripts' digits); at most 64 of them
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 64):
        raise HeaderFieldError(header, wire, f"must be a decimal integer, got {raw[:40]!r}")
    value = int(raw)
    low, high = _BOUNDS[kind]
    if not low <= value <= high:
        raise HeaderFieldError(header, wire, f"{value} is outside {kind.value}")
    return value


# ------------------------------------------------------------------------- controller: brokers' calls


@dataclass(frozen=True, kw_only=True)
class BrokerHeartbeatRequestHeader(CustomHeader):
    """904 BROKER_HEARTBEAT (oneway, broker -> controller); header/namesrv/BrokerHeartbeatRequestHeader."""

    cluster_name: str = _string("clusterName", required=True, default=MISSING)
    broker_addr: str = _string("brokerAddr", required=True, default=MISSING)
    broker_name: str = _string("brokerName", required=True, default=MISSING)
    broker_id: int | None = _long("brokerId")
    epoch: int | None = _int("epoch")
    max_offset: int | None = _long("maxOffset")
    confirm_offset: int | None = _long("confirmOffset")
    heartbeat_timeout_mills: int | None = _long("heartbeatTimeoutMills")
    election_priority: int | None = _int("electionPriority")


@dataclass(frozen=True, kw_only=True)
class GetNextBrokerIdRequestHeader(CustomHeader):
    """1012 CONTROLLER_GET_NEXT_BROKER_ID."""

    cluster_name: str | None = _string("clusterName")
    broker_name: str | None = _string("brokerName")


@dataclass(frozen=True, kw_only=True)
class GetNextBrokerIdResponseHeader(CustomHeader):
    cluster_name: str | None = _string("clusterName")
    broker_name: str | None = _string("brokerName")
    next_broker_id: int | None = _long("nextBrokerId")


@dataclass(frozen=True, kw_only=True)
class ApplyBrokerIdRequestHeader(CustomHeader):
    """1013 CONTROLLER_APPLY_BROKER_ID."""

    cluster_name: str | None = _string("clusterName")
    broker_name: str | None = _string("brokerName")
    applied_broker_id: int | None = _long("appliedBrokerId")
    register_check_code: str | None = _string("registerCheckCode")


@dataclass(frozen=True, kw_only=True)
class ApplyBrokerIdResponseHeader(CustomHeader):
    cluster_name: str | None = _string("clusterName")
    broker_name: str | None = _string("brokerName")


@dataclass(frozen=True, kw_only=True)
class RegisterBrokerToControllerRequestHeader(CustomHeader):
    """1003 CONTROLLER_REGISTER_BROKER."""

    cluster_name: str | None = _string("clusterName")
    broker_name: str | None = _string("brokerName")
    broker_id: int | None = _long("brokerId")
    broker_address: str | None = _string("brokerAddress")
    invoke_time: int | None = _long("invokeTime")


@dataclass(frozen=True, kw_only=True)
class RegisterBrokerToControllerResponseHeader(CustomHeader):
    cluster_name: str | None = _string("clusterName")
    broker_name: str | None = _string("brokerName")
    master_broker_id: int | None = _long("masterBrokerId")
    master_address: str | None = _string("masterAddress")
    master_epoch: int | None = _int("masterEpoch")
    sync_state_set_epoch: int | None = _int("syncStateSetEpoch")


@dataclass(frozen=True, kw_only=True)
class AlterSyncStateSetRequestHeader(CustomHeader):
    """1001 CONTROLLER_ALTER_SYNC_STATE_SET; the new set travels in the body (bodies.SyncStateSet)."""

    broker_name: str | None = _string("brokerName")
    master_broker_id: int | None = _long("masterBrokerId")
    master_epoch: int | None = _int("masterEpoch")
    invoke_time: int | None = _long("invokeTime")


@dataclass(frozen=True, kw_only=True)
class AlterSyncStateSetResponseHeader(CustomHeader):
    new_sync_state_set_epoch: int = _int("newSyncStateSetEpoch", default=0)


@dataclass(frozen=True, kw_only=True)
class ElectMasterRequestHeader(CustomHeader):
    """1002 CONTROLLER_ELECT_MASTER. ``broker_id`` -1 lets the controller choose; with ``designate_elect``
    an administrator asks for that broker (RocketMQ's ofAdminTrigger)."""

    cluster_name: str = _string("clusterName", required=True, default="")
    broker_name: str = _string("brokerName", required=True, default="")
    broker_id: int = _long("brokerId", required=True, default=-1)
    designate_elect: bool = _bool("designateElect", required=True, default=False)
    invoke_time: int | None = _long("invokeTime")


@dataclass(frozen=True, kw_only=True)
class ElectMasterResponseHeader(CustomHeader):
    """The answer to 1002; bodies.ElectMasterResponseBody carries the member group and the new set."""

    master_broker_id: int | None = _long("masterBrokerId")
    master_address: str | None = _string("masterAddress")
    master_epoch: int | None = _int("masterEpoch")
    sync_state_set_epoch: int | None = _int("syncStateSetEpoch")


@dataclass(frozen=True, kw_only=True)
class GetReplicaInfoRequestHeader(CustomHeader):
    """1004 CONTROLLER_GET_REPLICA_INFO; the answer's body is bodies.SyncStateSet."""

    broker_name: str | None = _string("brokerName")


@dataclass(frozen=True, kw_only=True)
class GetReplicaInfoResponseHeader(CustomHeader):
    master_broker_id: int | None = _long("masterBrokerId")
    master_address: str | None = _string("masterAddress")
    master_epoch: int | None = _int("masterEpoch")


@dataclass(frozen=True, kw_only=True)
class NotifyBrokerRoleChangedRequestHeader(CustomHeader):
    """1008 NOTIFY_BROKER_ROLE_CHANGED (oneway, controller -> broker); the body is bodies.SyncStateSet."""

    master_address: str | None = _string("masterAddress")
    master_epoch: int | None = _int("masterEpoch")
    sync_state_set_epoch: int | None = _int("syncStateSetEpoch")
    master_broker_id: int | None = _long("masterBrokerId")


# --------------------------------------------------------------------------- controller: admin calls


@dataclass(frozen=True, kw_only=True)
class GetMetaDataResponseHeader(CustomHeader):
    """The answer to 1005 CONTROLLER_GET_METADATA_INFO (the request has no header)."""

    group: str | None = _string("group")
    controller_leader_id: str | None = _string("controllerLeaderId")
    controller_leader_address: str | None = _string("controllerLeaderAddress")
    is_leader: bool = _bool("isLeader", default=False)
    peers: str | None = _string("peers")


@dataclass(frozen=True, kw_only=True)
class CleanControllerBrokerDataRequestHeader(CustomHeader):
    """1011 CLEAN_BROKER_DATA. ``broker_controller_ids_to_clean`` is a ';'-separated id list.
    (1009 UPDATE_CONTROLLER_CONFIG and 1010 GET_CONTROLLER_CONFIG carry no header: their bodies are
    Java properties text.)"""

    cluster_name: str | None = _string("clusterName")
    broker_name: str = _string("brokerName", required=True, default=MISSING)
    broker_controller_ids_to_clean: str | None = _string("brokerControllerIdsToClean")
    is_clean_living_broker: bool = _bool("isCleanLivingBroker", default=False)
    invoke_time: int | None = _long("invokeTime")


# ------------------------------------------------------------------------------------ name server


@dataclass(frozen=True, kw_only=True)
class GetRouteInfoRequestHeader(CustomHeader):
    """105 GET_ROUTEINFO_BY_TOPIC; the answer's body is bodies.TopicRouteData. The last five fields come
    from RocketMQ's RpcRequestHeader/TopicRequestHeader, under their short wire names."""

    topic: str = _string("topic", required=True, default=MISSING)
    accept_standard_json_only: bool | None = _bool("acceptStandardJsonOnly")
    logical: bool | None = _bool("lo")
    namespace: str | None = _string("ns")
    namespaced: bool | None = _bool("nsd")
    broker_name: str | None = _string("bname")
    oneway: bool | None = _bool("oway")


@dataclass(frozen=True, kw_only=True)
class RegisterBrokerRequestHeader(CustomHeader):
    """103 REGISTER_BROKER (broker -> name server); the body is namesrv_bodies.RegisterBrokerBody, in
    zlib form when ``compressed``. ``body_crc32`` is ``UtilAll.crc32`` of the body; 0 means unchecked."""

    broker_name: str = _string("brokerName", required=True, default=MISSING)
    broker_addr: str = _string("brokerAddr", required=True, default=MISSING)
    cluster_name: str = _string("clusterName", required=True, default=MISSING)
    ha_server_addr: str = _string("haServerAddr", required=True, default=MISSING)
    broker_id: int = _long("brokerId", required=True, default=MISSING)
    heartbeat_timeout_millis: int | None = _long("heartbeatTimeoutMillis")
    enable_acting_master: bool | None = _bool("enableActingMaster")
    compressed: bool = _bool("compressed", default=False)
    body_crc32: int = _int("bodyCrc32", default=0)


@dataclass(frozen=True, kw_only=True)
class RegisterBrokerResponseHeader(CustomHeader):
    """The answer to 103: the group's master as this name server knows it (for a slave's registration)."""

    ha_server_addr: str | None = _string("haServerAddr")
    master_addr: str | None = _string("masterAddr")


@dataclass(frozen=True, kw_only=True)
class UnRegisterBrokerRequestHeader(CustomHeader):
    """104 UNREGISTER_BROKER (a broker shutting down)."""

    broker_name: str = _string("brokerName", required=True, default=MISSING)
    broker_addr: str = _string("brokerAddr", required=True, default=MISSING)
    cluster_name: str = _string("clusterName", required=True, default=MISSING)
    broker_id: int = _long("brokerId", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class QueryDataVersionRequestHeader(CustomHeader):
    """322 QUERY_DATA_VERSION (a broker with forceRegister=false asks before registering); the body is
    namesrv_bodies.DataVersion."""

    broker_name: str = _string("brokerName", required=True, default=MISSING)
    broker_addr: str = _string("brokerAddr", required=True, default=MISSING)
    cluster_name: str = _string("clusterName", required=True, default=MISSING)
    broker_id: int = _long("brokerId", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class QueryDataVersionResponseHeader(CustomHeader):
    """The answer to 322: whether the name server holds another DataVersion (its own is the body)."""

    changed: bool = _bool("changed", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class PutKVConfigRequestHeader(CustomHeader):
    """100 PUT_KV_CONFIG: set one key of a namespace of the name server's KV config."""

    namespace: str = _string("namespace", required=True, default=MISSING)
    key: str = _string("key", required=True, default=MISSING)
    value: str = _string("value", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class GetKVConfigRequestHeader(CustomHeader):
    """101 GET_KV_CONFIG; the value comes back in GetKVConfigResponseHeader."""

    namespace: str = _string("namespace", required=True, default=MISSING)
    key: str = _string("key", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class DeleteKVConfigRequestHeader(CustomHeader):
    """102 DELETE_KV_CONFIG."""

    namespace: str = _string("namespace", required=True, default=MISSING)
    key: str = _string("key", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class GetKVConfigResponseHeader(CustomHeader):
    """The answer to 101: the value (absent when the key is not set, with QUERY_NOT_FOUND)."""

    value: str | None = _string("value")


@dataclass(frozen=True, kw_only=True)
class GetKVListByNamespaceRequestHeader(CustomHeader):
    """219 GET_KVLIST_BY_NAMESPACE; the answer's body is bodies.KVTable."""

    namespace: str = _string("namespace", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class WipeWritePermOfBrokerRequestHeader(CustomHeader):
    """205 WIPE_WRITE_PERM_OF_BROKER: every topic of a broker group becomes read-only in this name server."""

    broker_name: str = _string("brokerName", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class WipeWritePermOfBrokerResponseHeader(CustomHeader):
    wipe_topic_count: int = _int("wipeTopicCount", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class AddWritePermOfBrokerRequestHeader(CustomHeader):
    """327 ADD_WRITE_PERM_OF_BROKER: every topic of a broker group becomes readable and writable again."""

    broker_name: str = _string("brokerName", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class AddWritePermOfBrokerResponseHeader(CustomHeader):
    add_topic_count: int = _int("addTopicCount", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class DeleteTopicFromNamesrvRequestHeader(CustomHeader):
    """216 DELETE_TOPIC_IN_NAMESRV: a topic's routes, on every group or on the groups of one cluster."""

    topic: str = _string("topic", required=True, default=MISSING)
    cluster_name: str | None = _string("clusterName")


@dataclass(frozen=True, kw_only=True)
class GetBrokerMemberGroupRequestHeader(CustomHeader):
    """901 GET_BROKER_MEMBER_GROUP; the answer's body is bodies.GetBrokerMemberGroupResponseBody."""

    cluster_name: str = _string("clusterName", required=True, default=MISSING)
    broker_name: str = _string("brokerName", required=True, default=MISSING)


#: The request header class of each request code that has one.
REQUEST_HEADERS: dict[int, type[CustomHeader]] = {
    RequestCode.BROKER_HEARTBEAT: BrokerHeartbeatRequestHeader,
    RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: AlterSyncStateSetRequestHeader,
    RequestCode.CONTROLLER_ELECT_MASTER: ElectMasterRequestHeader,
    RequestCode.CONTROLLER_REGISTER_BROKER: RegisterBrokerToControllerRequestHeader,
    RequestCode.CONTROLLER_GET_REPLICA_INFO: GetReplicaInfoRequestHeader,
    RequestCode.NOTIFY_BROKER_ROLE_CHANGED: NotifyBrokerRoleChangedRequestHeader,
    RequestCode.CLEAN_BROKER_DATA: CleanControllerBrokerDataRequestHeader,
    RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: GetNextBrokerIdRequestHeader,
    RequestCode.CONTROLLER_APPLY_BROKER_ID: ApplyBrokerIdRequestHeader,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
    RequestCode.UNREGISTER_BROKER: UnRegisterBrokerRequestHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionRequestHeader,
    RequestCode.PUT_KV_CONFIG: PutKVConfigRequestHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigRequestHeader,
    RequestCode.DELETE_KV_CONFIG: DeleteKVConfigRequestHeader,
    RequestCode.GET_KVLIST_BY_NAMESPACE: GetKVListByNamespaceRequestHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerRequestHeader,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerRequestHeader,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: DeleteTopicFromNamesrvRequestHeader,
    RequestCode.GET_BROKER_MEMBER_GROUP: GetBrokerMemberGroupRequestHeader,
}

#: The response header class of each request code whose answer has one.
RESPONSE_HEADERS: dict[int, type[CustomHeader]] = {
    RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: AlterSyncStateSetResponseHeader,
    RequestCode.CONTROLLER_ELECT_MASTER: ElectMasterResponseHeader,
    RequestCode.CONTROLLER_REGISTER_BROKER: RegisterBrokerToControllerResponseHeader,
    RequestCode.CONTROLLER_GET_REPLICA_INFO: GetReplicaInfoResponseHeader,
    RequestCode.CONTROLLER_GET_METADATA_INFO: GetMetaDataResponseHeader,
    RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: GetNextBrokerIdResponseHeader,
    RequestCode.CONTROLLER_APPLY_BROKER_ID: ApplyBrokerIdResponseHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerResponseHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionResponseHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigResponseHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerResponseHeader,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerResponseHeader,
}

__all__ = [
    "REQUEST_HEADERS",
    "RESPONSE_HEADERS",
    "AddWritePermOfBrokerRequestHeader",
    "AddWritePermOfBrokerResponseHeader",
    "AlterSyncStateSetRequestHeader",
    "AlterSyncStateSetResponseHeader",
    "ApplyBrokerIdRequestHeader",
    "ApplyBrokerIdResponseHeader",
    "BrokerHeartbeatRequestHeader",
    "CleanControllerBrokerDataRequestHeader",
    "CustomHeader",
    "DeleteKVConfigRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
    "ElectMasterRequestHeader",
    "ElectMasterResponseHeader",
    "GetBrokerMemberGroupRequestHeader",
    "GetKVConfigRequestHeader",
    "GetKVConfigResponseHeader",
    "GetKVListByNamespaceRequestHeader",
    "GetMetaDataResponseHeader",
    "GetNextBrokerIdRequestHeader",
    "GetNextBrokerIdResponseHeader",
    "GetReplicaInfoRequestHeader",
    "GetReplicaInfoResponseHeader",
    "GetRouteInfoRequestHeader",
    "Kind",
    "NotifyBrokerRoleChangedRequestHeader",
    "PutKVConfigRequestHeader",
    "QueryDataVersionRequestHeader",
    "QueryDataVersionResponseHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "RegisterBrokerToControllerRequestHeader",
    "RegisterBrokerToControllerResponseHeader",
    "UnRegisterBrokerRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
    "WipeWritePermOfBrokerResponseHeader",
]
