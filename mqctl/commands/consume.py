"""consumeMessage: read a topic's messages from a broker, as a consumer group if asked.

``table`` and ``json`` read up to ``--count`` messages queue by queue (over HTTP, or RocketMQ's requests to
a broker that speaks only those). ``mqadmin`` reads as mqadmin's consumeMessage reads, with RocketMQ's
requests to either kind of broker (services/common/tool_consumer.py), so that it prints what mqadmin
prints: every step of the reading and each message as the Java client shows it.
"""

from __future__ import annotations

import re
import time
from typing import Any

import click

from mqctl import render_broker
from mqctl.app import App, pass_app
from mqctl.options import CONTROLLER_ADDR_HELP, format_option
from mqctl.render_consume import show_consumed_mqadmin
from services.common import remoting_admin
from services.common.addresses import split_address
from services.common.broker_client import BrokerClient, master_of
from services.common.codes import ResponseCode
from services.common.controller_client import check_address
from services.common.errors import RemoteError, UsageError
from services.common.remoting_blocking import BlockingRemoting
from services.common.tool_consumer import TOOLS_GROUP, RemotingSource, ToolConsumer
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand, make_request
from services.remoting.javaorder import message_queue_order
from services.remoting.namesrv_bodies import TopicConfigSerializeWrapper

#: A consumer group name as brokers accept it (RocketMQ's topic/group character rule).
GROUP_NAME = re.compile(r"[%|a-zA-Z0-9_-]{1,255}")
#: How many messages are read when --count is not given: mqctl's own formats, and mqadmin's.
DEFAULT_COUNT, MQADMIN_DEFAULT_COUNT = 32, 128
#: PermName.PERM_READ: a topic whose queues may be read.
_PERM_READ = 4


@click.command("consumeMessage")
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-q", "-i", "--queueId", "queue_id", type=click.IntRange(min=0), default=None,
              help="Queue id (default: every queue).")
@click.option("-o", "--offset", type=click.IntRange(min=0), default=None,
              help="Queue offset to start from (default 0; with -g, where the group stopped).")
@click.option("-n", "--count", type=click.IntRange(min=1), default=None,
              help=f"Maximum number of messages (default {DEFAULT_COUNT}; {MQADMIN_DEFAULT_COUNT} with --format "
                   "mqadmin, as mqadmin).")
@click.option("-g", "--consumerGroup", "group", default=None,
              help="Consume as this consumer group: start where it stopped and commit what was read (the "
                   "broker keeps it, and copies it to its slaves).")
@click.option("--consumeFromWhere", "from_where", type=click.Choice(["first", "last"]), default="first",
              show_default=True, help="With -g: where a group with no committed offset starts.")
@click.option("-c", "--clusterName", "cluster_name", help="Cluster (its first master).")
@click.option("-b", "--brokerName", "broker_name", help="Broker name; its master is found through the controller.")
@click.option("--brokerAddr", "broker_addr", help="Read from this broker address (e.g. a slave).")
@click.option("-a", "--controllerAddress", "controller_address", metavar="ADDR", help=CONTROLLER_ADDR_HELP)
@format_option
@pass_app
def consume_message(app: App, topic: str, queue_id: int | None, offset: int | None, count: int | None,
                    group: str | None, from_where: str, cluster_name: str | None, broker_name: str | None,
                    broker_addr: str | None, controller_address: str | None, fmt: str) -> None:
    """Read messages of a topic (only confirmed messages are readable).

    With -g the group's committed offsets are used and moved on, as a RocketMQ consumer's are (over
    RocketMQ's own requests, so this also works against a RocketMQ broker); after a failover the new master
    has them, so the group goes on where it stopped.

    \b
    Examples:
      mqctl consumeMessage -t TopicTest -b broker-a
      mqctl consumeMessage -t TopicTest -q 0 -o 100 -n 10 --brokerAddr 127.0.0.1:10911 --format json
      mqctl consumeMessage -t TopicTest -b broker-a -g my-group -n 100
    """
    if group is not None and not GROUP_NAME.fullmatch(group):
        raise UsageError(f"bad consumer group {group!r}: use 1-255 letters, digits, '%', '|', '_' and '-'")
    if broker_addr is not None:
        name, address = broker_name or broker_addr, check_address(broker_addr, "broker")
    else:
        with app.controller(controller_address) as client:
            name, address = master_of(client, broker_name, cluster_name)
    remoting = Remoting(address, app.timeout)
    try:
        offsets = GroupOffsets(remoting, group, from_where) if group else None
        if fmt == "mqadmin":
            read = Reading(topic, name, queue_id, offset, count or MQADMIN_DEFAULT_COUNT)
            show_consumed_mqadmin(app, fmt, _read_as_mqadmin(remoting, read, offsets).events, topic, name)
            return
        messages = _read(app, broker_addr, address, topic, queue_id, offset, count or DEFAULT_COUNT, offsets)
    finally:
        remoting.close()
    render_broker.show_consumed(app, fmt, address, messages)


def _read(app: App, broker_addr: str | None, address: str, topic: str, queue_id: int | None, offset: int | None,
          count: int, offsets: GroupOffsets | None) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    with app.brokers(broker_addr) as brokers:
        queues = [queue_id] if queue_id is not None else _queue_ids(brokers, address, topic)
        for qid in queues:
            start = offset if offset is not None else offsets.start(topic, qid) if offsets else 0
            end = _read_queue(brokers, address, topic, qid, start, count, messages)
            if offsets is not None and end > start:
                offsets.commit(topic, qid, end)
    return messages


def _read_queue(brokers: BrokerClient, address: str, topic: str, qid: int, start: int, count: int,
                messages: list[dict[str, Any]]) -> int:
    """Pull from ``start`` until ``count`` messages are in ``messages`` or the queue ends; the offset after
    the last message read."""
    next_offset = start
    while len(messages) < count:
        pulled = brokers.pull(address, topic, qid, next_offset, min(1024, count - len(messages)))
        messages.extend(m.model_dump() for m in pulled.messages)
        if pulled.status == "OFFSET_TOO_SMALL" and pulled.nextBeginOffset > next_offset:
            next_offset = pulled.nextBeginOffset  # retention deleted it: on from the oldest kept, as a consumer does
            continue
        if pulled.status != "FOUND":
            break
        next_offset = pulled.nextBeginOffset
    return next_offset


def _queue_ids(brokers: BrokerClient, address: str, topic: str) -> list[int]:
    ids = brokers.topics(address).queue_ids(topic)
    if ids is None:
        raise UsageError(f"topic {topic} does not exist on {address}")
    return ids


class Remoting:
    """RocketMQ's requests to one broker, each answered before the command's timeout."""

    def __init__(self, address: str, timeout: float) -> None:
        self.address = address
        self.host, self.port = split_address(address, lenient=True)
        self.timeout = timeout
        self.remoting = BlockingRemoting()

    def call(self, request: RemotingCommand) -> RemotingCommand:
        return self.remoting.call(self.host, self.port, request, time.monotonic() + self.timeout)

    def close(self) -> None:
        self.remoting.close()


class GroupOffsets:
    """A consumer group's committed offsets on one broker, through RocketMQ's requests."""

    def __init__(self, remoting: Remoting, group: str, from_where: str) -> None:
        self.call = remoting.call
        self.group = group
        self.from_where = from_where

    def start(self, topic: str, queue_id: int, low: int | None = None) -> int:
        """Where the group goes on in the queue: its committed offset, else the queue's first or last
        offset (``low``, the queue's min offset, when the caller knows it)."""
        committed = remoting_admin.query_offset(self.call, self.group, topic, queue_id)
        if committed is not None:
            return committed
        if low is not None and self.from_where == "first":
            return low
        first, last = remoting_admin.queue_bounds(self.call, topic, queue_id)
        return first if self.from_where == "first" else last

    def commit(self, topic: str, queue_id: int, offset: int) -> None:
        remoting_admin.commit_offset(self.call, self.group, topic, queue_id, offset)


class Reading:
    """What to read, as mqadmin's options say it."""

    def __init__(self, topic: str, broker_name: str, queue_id: int | None, offset: int | None, count: int) -> None:
        self.topic, self.broker_name, self.queue_id, self.offset, self.count = (topic, broker_name, queue_id,
                                                                                 offset, count)


def _read_as_mqadmin(remoting: Remoting, read: Reading, offsets: GroupOffsets | None) -> ToolConsumer:
    """The topic (or one queue) read step by step as mqadmin reads it; a group's committed offsets, where
    it has them, take the place of the queues' min offsets, and what was read is committed."""
    consumer = ToolConsumer(RemotingSource(remoting.call, read.topic, offsets.group if offsets else TOOLS_GROUP))
    if read.queue_id is not None:
        given = read.offset if read.offset is not None else None
        start = given if given is not None else offsets.start(read.topic, read.queue_id) if offsets else 0
        consumer.read_queue(read.queue_id, start, read.count)
        starts = {read.queue_id: start}
    else:
        queues = message_queue_order(read.topic, read.broker_name, _readable_queues(remoting, read.topic))
        starts = {}

        def start_of(queue_id: int, low: int) -> int:
            start = max(low, read.offset) if read.offset is not None else \
                offsets.start(read.topic, queue_id, low) if offsets else low
            starts[queue_id] = start
            return start
        consumer.read_topic(queues, read.count, start_of)
    if offsets is not None:
        for queue_id, end in consumer.ends.items():
            if end > starts.get(queue_id, end):
                offsets.commit(read.topic, queue_id, end)
    return consumer


def _readable_queues(remoting: Remoting, topic: str) -> list[int]:
    """The topic's queue ids on the broker (21 GET_ALL_TOPIC_CONFIG), none if it may not be read."""
    answer = remoting.call(make_request(bh.GET_ALL_TOPIC_CONFIG, 0))
    if answer.code != ResponseCode.SUCCESS:
        raise RemoteError(answer.code, f"GET_ALL_TOPIC_CONFIG: {answer.remark or answer.code}")
    config = TopicConfigSerializeWrapper.decode(answer.body).topic_config_table.get(topic)
    if config is None:
        raise UsageError(f"topic {topic} does not exist on {remoting.address}")
    return list(range(config.read_queue_nums)) if config.perm & _PERM_READ else []


COMMANDS = [consume_message]
