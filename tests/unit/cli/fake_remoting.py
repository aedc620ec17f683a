"""A broker that answers RocketMQ's requests in memory, in place of the command line's blocking remoting
client (no socket): the topic configs (21), a queue's offsets (30, 31), pulls (11) and a group's committed
offsets (14, 15). Every request it gets is kept, as (address, code, ext fields)."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.common.codes import ResponseCode
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand, RequestCode, make_response
from services.remoting.message import PulledMessage, encode_pulled
from services.remoting.namesrv_bodies import TopicConfig, TopicConfigSerializeWrapper


@dataclass
class FakeRemotingBroker:
    #: topic -> queue id -> the queue's messages from its min offset on
    queues: dict[str, dict[int, list[PulledMessage]]] = field(default_factory=dict)
    #: (group, topic, queue id) -> committed offset
    committed: dict[tuple[str, str, int], int] = field(default_factory=dict)
    requests: list[tuple[str, int, dict[str, str]]] = field(default_factory=list)

    def client(self, *args: object, **kwargs: object) -> FakeRemotingBroker:
        """Stands in for ``BlockingRemoting(...)``."""
        return self

    def close(self) -> None:
        pass

    def call(self, host: str, port: int, request: RemotingCommand, deadline: float) -> RemotingCommand:
        self.requests.append((f"{host}:{port}", request.code, dict(request.ext_fields)))
        fields = dict(request.ext_fields)
        if request.code == bh.GET_ALL_TOPIC_CONFIG:
            table = {name: TopicConfig(name, len(qs), len(qs)) for name, qs in self.queues.items()}
            return make_response(request, 0, body=TopicConfigSerializeWrapper(table).encode())
        if request.code in (RequestCode.GET_MIN_OFFSET, RequestCode.GET_MAX_OFFSET):
            low, high = self._bounds(fields["topic"], int(fields["queueId"]))
            offset = low if request.code == RequestCode.GET_MIN_OFFSET else high
            return make_response(request, 0, ext_fields={"offset": str(offset)})
        if request.code == RequestCode.PULL_MESSAGE:
            return self._pull(request, bh.PullMessageRequestHeader.from_ext_fields(fields))
        key = (fields.get("consumerGroup", ""), fields.get("topic", ""), int(fields.get("queueId", 0)))
        if request.code == RequestCode.QUERY_CONSUMER_OFFSET:
            if key not in self.committed:
                return make_response(request, ResponseCode.QUERY_NOT_FOUND, "Not found")
            return make_response(request, 0, ext_fields={"offset": str(self.committed[key])})
        if request.code == RequestCode.UPDATE_CONSUMER_OFFSET:
            self.committed[key] = int(fields["commitOffset"])
            return make_response(request, 0)
        return make_response(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "not faked")

    def _bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        messages = self.queues.get(topic, {}).get(queue_id, [])
        low = messages[0].queue_offset if messages else 0
        return low, low + len(messages)

    def _pull(self, request: RemotingCommand, header: bh.PullMessageRequestHeader) -> RemotingCommand:
        low, high = self._bounds(header.topic, header.queue_id)
        offsets = {"suggestWhichBrokerId": "0", "minOffset": str(low), "maxOffset": str(high)}
        if header.queue_offset >= high:
            return make_response(request, ResponseCode.PULL_NOT_FOUND, "no new message",
                                 {**offsets, "nextBeginOffset": str(high)})
        found = [m for m in self.queues[header.topic][header.queue_id]
                 if header.queue_offset <= m.queue_offset][:min(header.max_msg_nums, 32)]
        return make_response(request, 0, ext_fields={**offsets, "nextBeginOffset": str(found[-1].queue_offset + 1)},
                             body=b"".join(encode_pulled(m) for m in found))
