"""A RocketMQ remoting command as a value: what travels in one frame, with no I/O attached.

A command is a request or a response (``flag`` bit 0) and a request may be oneway (``flag`` bit 1, no
answer expected). ``opaque`` pairs a response with its request: the answer carries the request's
opaque, and is written in the request's serialize type. ``ext_fields`` holds the request-specific
"custom header" (see headers.py): every value a string. ``body`` is opaque bytes, often fastjson JSON
(see fastjson.py and bodies.py).

The numbers are RocketMQ's own (``RemotingCommand``, ``LanguageCode``, ``SerializeType``,
``RequestCode`` and ``ResponseCode``/``RemotingSysResponseCode``), so frames from either side mean the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType

from services.common.codes import ResponseCode

__all__ = [
    "DEFAULT_VERSION",
    "INT32_MAX",
    "INT32_MIN",
    "ONEWAY_FLAG",
    "RESPONSE_FLAG",
    "LanguageCode",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "make_request",
    "make_response",
    "version_desc",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

#: flag bit 0: the command is a response (RemotingCommand.RPC_TYPE).
RESPONSE_FLAG = 1 << 0
#: flag bit 1: the request expects no response (RemotingCommand.RPC_ONEWAY).
ONEWAY_FLAG = 1 << 1

#: The version our commands carry: the ordinal of MQVersion.Version.V5_3_3, the RocketMQ release whose
#: behaviour this project follows. Servers gate a few answers on it (a route answer is written as
#: standard JSON for a requester at V4_9_4 = 401 or later).
DEFAULT_VERSION = 479
#: MQVersion.Version: from V4_0_0_SNAPSHOT (ordinal 212) on, a SNAPSHOT then a release per patch
#: version, up to V5_9_9 (611), then HIGHER_VERSION.
_V4_0_0_SNAPSHOT, _HIGHER = 212, 612


def version_desc(ordinal: int) -> str:
    """MQVersion.getVersionDesc for a client's or a broker's version ordinal (an ordinal before 4.0.0 is
    shown as ``V3(<ordinal>)``: no client of that age can talk to a 5.x broker)."""
    if ordinal >= _HIGHER:
        return "HIGHER_VERSION"
    if ordinal < _V4_0_0_SNAPSHOT:
        return f"V3({ordinal})"
    k, snapshot = divmod(ordinal - _V4_0_0_SNAPSHOT, 2)
    name = f"V{4 + k // 100}_{k // 10 % 10}_{k % 10}"
    return name + ("_SNAPSHOT" if snapshot == 0 else "")


class LanguageCode(IntEnum):
    """The requester's language: its name in a JSON header, its code as one byte in a ROCKETMQ header."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13

    @classmethod
    def from_code(cls, code: int) -> LanguageCode:
        """The language of a byte; a code newer than this list reads as OTHER (a client is not refused
        for its language, which nothing here depends on)."""
        try:
            return cls(code)
        except ValueError:
            return cls.OTHER

    @classmethod
    def from_name(cls, name: str) -> LanguageCode:
        """The language of a JSON header's name; an unknown name reads as OTHER, as for ``from_code``."""
        member = cls.__members__.get(name)
        return member if member is not None else cls.OTHER


class SerializeType(IntEnum):
    """How the header of a frame is written (the top byte of the frame's mark)."""

    JSON = 0
    ROCKETMQ = 1


class RequestCode(IntEnum):
    """The request codes this project speaks (RocketMQ's ``RequestCode`` numbers)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    HEART_BEAT = 34
    GET_CONSUMER_LIST_BY_GROUP = 38
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_BROKER_MEMBER_GROUP = 901
    BROKER_HEARTBEAT = 904
    GET_BROKER_HA_STATUS = 907
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    GET_BROKER_EPOCH_CACHE = 1007
    NOTIFY_BROKER_ROLE_CHANGED = 1008
    UPDATE_CONTROLLER_CONFIG = 1009
    GET_CONTROLLER_CONFIG = 1010
    CLEAN_BROKER_DATA = 1011
    CONTROLLER_GET_NEXT_BROKER_ID = 1012
    CONTROLLER_APPLY_BROKER_ID = 1013


def _check_int32(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"{name} must be an int32, got {value!r}")


@dataclass(frozen=True)
class RemotingCommand:
    """One request or response. ``remark`` None means absent; ``ext_fields`` is read-only once built."""

    code: int
    opaque: int = 0
    flag: int = 0
    language: LanguageCode = LanguageCode.PYTHON
    version: int = DEFAULT_VERSION
    remark: str | None = None
    ext_fields: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: SerializeType = SerializeType.JSON

    def __post_init__(self) -> None:
        for name, value in (("code", self.code), ("opaque", self.opaque), ("flag", self.flag),
                            ("version", self.version)):
            if type(value) is not int or not INT32_MIN <= value <= INT32_MAX:
                _check_int32(name, value)  # says what is wrong (an int subclass other than bool passes)
        if not isinstance(self.language, LanguageCode) or not isinstance(self.serialize_type, SerializeType):
            raise TypeError("language and serialize_type must be LanguageCode and SerializeType members")
        if self.remark is not None and not isinstance(self.remark, str):
            raise TypeError(f"remark must be a string or None, got {type(self.remark).__name__}")
        if not isinstance(self.body, bytes):
            raise TypeError(f"body must be bytes, got {type(self.body).__name__}")
        ext = dict(self.ext_fields)
        for key, text in ext.items():
            if not (isinstance(key, str) and isinstance(text, str)):
                raise TypeError("ext_fields must map strings to strings")
        object.__setattr__(self, "ext_fields", MappingProxyType(ext))

    @classmethod
    def decoded(cls, *, code: int, opaque: int, flag: int, language: LanguageCode, version: int,
                remark: str | None, ext_fields: dict[str, str], body: bytes,
                serialize_type: SerializeType) -> RemotingCommand:
        """A command from fields the codec has already checked (the same rules as ``__post_init__``:
        ints within int32, ``ext_fields`` strings to strings); only the codec calls this."""
        command = object.__new__(cls)
        for name, value in (("code", code), ("opaque", opaque), ("flag", flag), ("language", language),
                            ("version", version), ("remark", remark), ("ext_fields", MappingProxyType(ext_fields)),
                            ("body", body), ("serialize_type", serialize_type)):
            object.__setattr__(command, name, value)
        return command

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[object, ...]:
        return (self.code, self.opaque, self.flag, self.language, self.version, self.remark,
                tuple(sorted(self.ext_fields.items())), self.body, self.serialize_type)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)


def make_request(code: int, opaque: int, ext_fields: Mapping[str, str] | None = None, body: bytes = b"", *,
                 oneway: bool = False, serialize_type: SerializeType = SerializeType.JSON,
                 language: LanguageCode = LanguageCode.PYTHON, version: int = DEFAULT_VERSION) -> RemotingCommand:
    """A request; ``opaque`` is the caller's request id (unique among its requests in flight)."""
    return RemotingCommand(code=code, opaque=opaque, flag=ONEWAY_FLAG if oneway else 0, language=language,
                           version=version, ext_fields=dict(ext_fields or {}), body=body,
                           serialize_type=serialize_type)


def make_response(request: RemotingCommand, code: int, remark: str | None = None,
                  ext_fields: Mapping[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    """The answer to ``request``: its opaque, the response flag, and the request's serialize type (the
    requester may only read that one). A oneway request gets no answer, so asking for one is a bug."""
    if request.is_response:
        raise ValueError("cannot answer a response")
    if request.is_oneway:
        raise ValueError(f"request {request.code} (opaque {request.opaque}) is oneway and gets no answer")
    return RemotingCommand(code=code, opaque=request.opaque, flag=RESPONSE_FLAG, remark=remark,
                           ext_fields=dict(ext_fields or {}), body=body, serialize_type=request.serialize_type)
