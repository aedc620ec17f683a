"""The controller's HTTP contract in one place: the path of every route, the request models the server
validates, and the response models a client checks an answer against (``SyncStateData.model_validate``),
so the server, the broker's client, mqctl and the tests' fake controller use the same names and shapes.

The remoting protocol carries the same operations under RocketMQ's request codes and headers
(services/remoting/headers.py; the mapping is in services/controller/remoting.py and
services/common/remoting_admin.py).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from services.common.answers import View
from services.common.fields import (
    BrokerId,
    BrokerIdOrNone,
    Epoch,
    EpochOrNone,
    Flag,
    JavaInt,
    Name,
    Offset,
    OptionalName,
    RequestId,
)
from services.controller.heartbeat import DEFAULT_BROKER_CHANNEL_EXPIRED_TIME, MAX_PRIORITY

PREFIX = "/v1/controller"
METADATA = f"{PREFIX}/metadata"
GET_NEXT_BROKER_ID = f"{PREFIX}/getNextBrokerId"
APPLY_BROKER_ID = f"{PREFIX}/applyBrokerId"
REGISTER_BROKER = f"{PREFIX}/registerBroker"
HEARTBEAT = f"{PREFIX}/heartbeat"
CHANNEL = f"{PREFIX}/channel"
ALTER_SYNC_STATE_SET = f"{PREFIX}/alterSyncStateSet"
ELECT_MASTER = f"{PREFIX}/electMaster"
REPLICA_INFO = f"{PREFIX}/replicaInfo"
BROKER_KEYS = f"{PREFIX}/brokerKeys"
SYNC_STATE_DATA = f"{PREFIX}/syncStateData"
CLEAN_BROKER_DATA = f"{PREFIX}/cleanBrokerData"
EVENTS = f"{PREFIX}/events"
CONFIG = f"{PREFIX}/config"
#: Writes, and what brokers send (their calls and liveness), need the token when one is configured.
PROTECTED_PATHS = frozenset({APPLY_BROKER_ID, REGISTER_BROKER, HEARTBEAT, ALTER_SYNC_STATE_SET, ELECT_MASTER,
                             CLEAN_BROKER_DATA, CONFIG})


def route(path: str) -> str:
    """A path as the router declares it (without the prefix)."""
    return path.removeprefix(PREFIX)


# ---------------------------------------------------------------------------------------------- requests
#: A broker's Ed25519 public key as 64 lower-case hex characters ("" or absent: the broker brings none).
PublicKey = Annotated[str, Field(pattern=r"^([0-9a-f]{64})?$")]
#: SyncStateSets and name lists: far more members than any broker group has, far fewer than a body could hold.
MAX_LIST = 1000


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=False)


class BrokerSetRequest(_Model):
    clusterName: Name
    brokerName: Name


class ApplyBrokerIdRequest(BrokerSetRequest):
    appliedBrokerId: BrokerId
    registerCheckCode: Name
    publicKey: PublicKey = ""
    requestId: RequestId | None = None


class RegisterBrokerRequest(BrokerSetRequest):
    brokerId: BrokerId
    brokerAddress: Name
    publicKey: PublicKey = ""
    requestId: RequestId | None = None


class HeartbeatRequest(_Model):
    clusterName: Name
    brokerName: Name
    brokerAddr: Name
    brokerId: BrokerId | None = None
    epoch: EpochOrNone = -1
    maxOffset: Offset = -1
    confirmOffset: Offset = -1
    # At most the controller's maxHeartbeatTimeoutMillis, checked by the route (it is configuration).
    heartbeatTimeoutMills: Annotated[StrictInt, Field(ge=1)] = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
    electionPriority: JavaInt = MAX_PRIORITY
    asyncLearner: Flag = False
    incarnation: Annotated[StrictInt, Field(ge=0, le=2**63 - 1)] = 0


class AlterSyncStateSetRequest(_Model):
    brokerName: Name
    masterBrokerId: BrokerId
    masterEpoch: Epoch
    newSyncStateSet: list[BrokerId] = Field(min_length=1, max_length=MAX_LIST)
    syncStateSetEpoch: Epoch
    #: The master's signature over the change (hex), required when the master registered a key.
    signature: Annotated[str, Field(pattern=r"^([0-9a-f]{128})?$")] = ""
    requestId: RequestId | None = None


class ElectMasterBody(_Model):
    clusterName: OptionalName = ""
    brokerName: Name
    brokerId: BrokerIdOrNone = -1
    designateElect: Flag = False
    requestId: RequestId | None = None


class CleanBrokerDataRequest(_Model):
    clusterName: OptionalName | None = None
    brokerName: Name
    brokerControllerIdsToClean: Annotated[str, Field(max_length=4096)] | None = None
    isCleanLivingBroker: Flag = False
    requestId: RequestId | None = None



# --------------------------------------------------------------------------------------------- responses


class _Answer(BaseModel):
    """An answer's ``data``: unknown fields are ignored (a newer server may add some), known ones checked."""

    model_config = ConfigDict(extra="ignore", strict=True)


class NextBrokerId(_Answer):
    clusterName: str
    brokerName: str
    nextBrokerId: Annotated[int, Field(ge=1)]


class MasterView(_Answer):
    """A group's master and SyncStateSet (replicaInfo; registerBroker's and electMaster's answers)."""

    masterBrokerId: int | None = None
    masterAddress: str | None = None
    masterEpoch: int | None = None
    syncStateSet: list[int] = Field(default_factory=list)
    syncStateSetEpoch: int | None = None


class Replica(_Answer):
    brokerName: str | None = None
    brokerId: int
    brokerAddress: str
    alive: bool


class BrokerReplicas(_Answer):
    """One group in syncStateData."""

    clusterName: str | None = None
    brokerName: str
    masterBrokerId: int | None = None
    masterAddress: str | None = None
    masterEpoch: int
    syncStateSetEpoch: int
    inSyncReplicas: list[Replica]
    notInSyncReplicas: list[Replica]


class SyncStateData(_Answer):
    brokers: list[BrokerReplicas]


class AlterResult(_Answer):
    newSyncStateSetEpoch: int
    syncStateSet: list[int]


class BrokerKey(_Answer):
    brokerId: int
    publicKey: str


class BrokerKeys(_Answer):
    keys: list[BrokerKey]


class Metadata(View):
    """getControllerMetaData: the group, its leader and peers (a RocketMQ controller's lacks the self and raft
    fields)."""

    group: str | None = None
    controllerLeaderId: str | None = None
    controllerLeaderAddress: str | None = None
    isLeader: bool | None = None
    selfId: str | None = None
    selfAddress: str | None = None
    peers: list[str] = Field(default_factory=list)
    #: The controller group's id (made at its first start; mqctl's own, absent from RocketMQ's).
    clusterId: str | None = None


class Elected(View):
    """An admin election's answer (shown as it came, with mqadmin's echo of the names asked for)."""

    clusterName: str | None = None
    brokerName: str | None = None
    masterBrokerId: int | None = None
    masterAddress: str | None = None
    masterEpoch: int | None = None
    syncStateSetEpoch: int | None = None
    syncStateSet: list[int] = Field(default_factory=list)


class EventsPage(_Answer):
    events: list[dict[str, Any]]
    nextIndex: int
    latestIndex: int


class ControllerConfig(_Answer):
    config: dict[str, Any]
