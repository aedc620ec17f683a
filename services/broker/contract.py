"""The broker's HTTP contract: every route's path, the request models the broker validates, and the models of
its answers' ``data`` that clients check them with (``services/controller/contract.py`` is the controller's).

The server (``services/broker/api.py``), mqctl's broker commands, the local-cluster supervisors and the
remoting translation for RocketMQ brokers (``services/common/remoting_admin.py``) take their paths from here;
``BrokerClient``'s typed reads return these models, so an answer that breaks the contract is a refusal naming
the field, not a ``KeyError`` somewhere later. Answer models ignore fields they do not know (a newer broker may
add some); the status views (runtimeInfo, haStatus) keep them, since they are shown as they come. Fields a
RocketMQ broker's answers cannot fill (over remoting) are optional.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.common.answers import View
from services.common.fields import BrokerId, Epoch, OptionalName, QueueId

PREFIX = "/v1/broker"
SEND_MESSAGE = f"{PREFIX}/sendMessage"
SEND_MESSAGES = f"{PREFIX}/sendMessages"
PULL_MESSAGE = f"{PREFIX}/pullMessage"
TOPICS = f"{PREFIX}/topics"
EPOCH_CACHE = f"{PREFIX}/epochCache"
RUNTIME_INFO = f"{PREFIX}/runtimeInfo"
HA_STATUS = f"{PREFIX}/haStatus"
NOTIFY_ROLE_CHANGED = f"{PREFIX}/notifyRoleChanged"
HEALTHZ = "/healthz"

#: Routes whose bodies may be as large as a batch of messages (the others take 64 KiB).
SEND_ROUTES = (SEND_MESSAGE, SEND_MESSAGES)
#: Routes that need the auth token when the broker has one.
PROTECTED_PATHS = frozenset({NOTIFY_ROLE_CHANGED})


def route(path: str) -> str:
    """A path relative to the broker router's prefix."""
    assert path.startswith(PREFIX), path
    return path[len(PREFIX):]


# ---------------------------------------------------------------------------------------------- requests
class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SendMessageRequest(_Request):
    topic: str = Field(min_length=1, max_length=255)
    body: str | None = None
    bodyBase64: str | None = None
    keys: str = ""
    tags: str = ""
    queueId: QueueId | None = None
    properties: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_body(self) -> SendMessageRequest:
        if (self.body is None) == (self.bodyBase64 is None):
            raise ValueError("give exactly one of body (UTF-8 text) and bodyBase64")
        return self


class SendMessagesRequest(_Request):
    messages: list[SendMessageRequest] = Field(min_length=1, max_length=10_000)


class RoleChangedRequest(_Request):
    masterBrokerId: BrokerId | None = None
    masterAddress: OptionalName | None = None
    masterEpoch: Epoch
    syncStateSetEpoch: Epoch = 0
    syncStateSet: list[BrokerId] = Field(default_factory=list, max_length=1000)


# --------------------------------------------------------------------------------------------- responses
class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class SendResult(_Answer):
    status: str
    msgId: str | None = None
    queueId: int | None = None
    queueOffset: int | None = None
    commitLogOffset: int | None = None
    #: Where to send instead, on SERVICE_NOT_AVAILABLE from a slave or a fenced broker.
    masterAddress: str | None = None


class SendBatchResult(_Answer):
    status: str
    results: list[SendResult] = Field(default_factory=list)
    masterAddress: str | None = None


class PulledMessage(_Answer):
    msgId: str | None = None
    topic: str
    queueId: int
    queueOffset: int
    commitLogOffset: int | None = None
    body: str | None = None
    bodyBase64: str | None = None
    keys: str = ""
    tags: str = ""
    properties: dict[str, str] = Field(default_factory=dict)
    storeTimestamp: int | None = None
    storeSize: int | None = None


class PullResult(_Answer):
    status: str
    nextBeginOffset: int
    minOffset: int
    maxOffset: int
    messages: list[PulledMessage] = Field(default_factory=list)


class QueueRow(_Answer):
    queueId: int
    minOffset: int | None = None
    maxOffset: int | None = None
    writtenOffset: int | None = None


class TopicRow(_Answer):
    topic: str
    queues: list[QueueRow]


class Topics(_Answer):
    topics: list[TopicRow]

    def queue_ids(self, topic: str) -> list[int] | None:
        """The queue ids of ``topic`` (None: the broker does not have it)."""
        return next(([q.queueId for q in row.queues] for row in self.topics if row.topic == topic), None)


class EpochRow(_Answer):
    epoch: int
    startOffset: int
    endOffset: int


class EpochCache(_Answer):
    clusterName: str | None = None
    brokerName: str | None = None
    brokerId: int | None = None
    brokerAddress: str | None = None
    role: str
    masterEpoch: int | None = None
    epochEntries: list[EpochRow]
    maxOffset: int
    confirmOffset: int | None = None


class RuntimeInfo(View):
    clusterName: str
    brokerName: str
    brokerId: int | None = None
    brokerAddress: str
    haAddress: str | None = None
    role: str
    registered: bool
    masterEpoch: int
    masterBrokerId: int | None = None
    masterAddress: str | None = None
    syncStateSet: list[int] = Field(default_factory=list)
    syncStateSetEpoch: int | None = None
    minOffset: int
    maxOffset: int
    confirmOffset: int
    flushedOffset: int


class HaStatus(View):
    """A master's (with ``slaves``) or a slave's replication status; RocketMQ brokers' (over remoting) lack
    the names and some offsets."""

    clusterName: str | None = None
    brokerName: str | None = None
    brokerId: int | None = None
    brokerAddr: str | None = None
    role: str
    masterEpoch: int | None = None
    maxOffset: int | None = None
    confirmOffset: int | None = None
    flushedOffset: int | None = None


class RoleAnswer(_Answer):
    role: Annotated[str, Field(min_length=1)]
