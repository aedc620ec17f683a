"""Broker commands: startBroker, sendMessage, consumeMessage, getBrokerEpoch."""

from __future__ import annotations

import re
import time
from typing import Any

import click

from mqctl import render_broker
from mqctl.app import App, pass_app
from mqctl.commands.controller import CONTROLLER_ADDR_HELP, format_option, watch_options
from services.broker import contract as bc
from services.broker.cli import start_broker
from services.common import remoting_admin
from services.common.addresses import split_address
from services.common.broker_client import BrokerClient, broker_sets, master_address, replica_addresses
from services.common.codes import ResponseCode
from services.common.controller_client import check_address
from services.common.errors import MqctlError, RemoteError, UnreachableError, UsageError
from services.common.remoting_blocking import BlockingRemoting
from services.remoting.command import RemotingCommand
from services.remoting.javaorder import hash_map_order

#: A consumer group name as brokers accept it (RocketMQ's topic/group character rule).
GROUP_NAME = re.compile(r"[%|a-zA-Z0-9_-]{1,255}")
NAMESRV_HELP = ("Name server address(es), ';'-separated: find the brokers through GET_BROKER_CLUSTER_INFO as mqadmin "
                "does (a RocketMQ name server, or our controllers). Without it, the controller (-a) is asked.")


def _broker_sets(app: App, controller_address: str | None, namesrv: str | None, broker_name: str | None,
                 cluster_name: str | None) -> list[dict[str, Any]]:
    """The broker-sets to show: from the name server if one is given (-n), else from the controller."""
    cluster = None if broker_name else cluster_name
    if namesrv:
        with app.namesrv(namesrv) as names:
            return names.broker_sets(broker_name, cluster)
    with app.controller(controller_address) as client:
        return broker_sets(client, broker_name, cluster)


# ---------------------------------------------------------------------- sendMessage
@click.command("sendMessage")
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-p", "--body", required=True, help="Message body (UTF-8 text).")
@click.option("-k", "--keys", default="", help="Message keys.")
@click.option("--tags", default="", help="Message tags.")
@click.option("-q", "--queueId", "queue_id", type=click.IntRange(min=0), default=None,
              help="Queue id (default: round robin).")
@click.option("-c", "--clusterName", "cluster_name", help="Cluster (with -b, or alone: its first master).")
@click.option("-b", "--brokerName", "broker_name", help="Broker name; its master is found through the controller.")
@click.option("--brokerAddr", "broker_addr", help="Send to this broker address directly.")
@click.option("-a", "--controllerAddress", "controller_address", metavar="ADDR", help=CONTROLLER_ADDR_HELP)
@click.option("--count", type=click.IntRange(min=1, max=1_000_000), default=1, show_default=True,
              help="Send this many messages (the body gets a ' #<n>' suffix when more than one).")
@format_option
@pass_app
def send_message(app: App, topic: str, body: str, keys: str, tags: str, queue_id: int | None,
                 cluster_name: str | None, broker_name: str | None, broker_addr: str | None,
                 controller_address: str | None, count: int, fmt: str) -> None:
    """Send a message to the master of a broker-set.

    \b
    Examples:
      mqctl sendMessage -t TopicTest -p 'hello' -b broker-a
      mqctl sendMessage -t TopicTest -p 'hello' -k order-42 --brokerAddr 127.0.0.1:10911 --format json
    """
    address = _given(broker_addr) or _find_master(app, controller_address, broker_name, cluster_name)
    results = []
    with app.brokers(broker_addr) as brokers:
        for i in range(count):
            text = body if count == 1 else f"{body} #{i}"
            payload = {"topic": topic, "body": text, "keys": keys, "tags": tags, "queueId": queue_id}
            env, address = _send(brokers, address, payload, follow=broker_addr is None)
            results.append({"brokerName": broker_name, "brokerAddr": address, **env.data})
    render_broker.show_sent(app, fmt, results)


def _given(broker_addr: str | None) -> str | None:
    """The operator's --brokerAddr, checked before anything is sent (a malformed one is a usage error)."""
    return check_address(broker_addr, "broker") if broker_addr is not None else None


def _find_master(app: App, controller_address: str | None, broker_name: str | None, cluster: str | None) -> str:
    with app.controller(controller_address) as client:
        return master_address(client, broker_name, cluster)


def _send(brokers: BrokerClient, address: str, payload: dict[str, Any], follow: bool) -> tuple[Any, str]:
    env = brokers.request(address, "POST", bc.SEND_MESSAGE, json=payload,
                          accept=(ResponseCode.SERVICE_NOT_AVAILABLE,))
    if env.code == ResponseCode.SERVICE_NOT_AVAILABLE:
        master = (env.data or {}).get("masterAddress")
        if follow and master and master != address:
            return _send(brokers, str(master), payload, follow=False)
        raise RemoteError(env.code, env.remark)
    return env, address


# ---------------------------------------------------------------------- consumeMessage
@click.command("consumeMessage")
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-q", "--queueId", "queue_id", type=click.IntRange(min=0), default=None,
              help="Queue id (default: every queue).")
@click.option("-o", "--offset", type=click.IntRange(min=0), default=None,
              help="Queue offset to start from (default 0; with -g, where the group stopped).")
@click.option("-n", "--count", type=click.IntRange(min=1), default=32, show_default=True,
              help="Maximum number of messages.")
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
def consume_message(app: App, topic: str, queue_id: int | None, offset: int | None, count: int, group: str | None,
                    from_where: str, cluster_name: str | None, broker_name: str | None, broker_addr: str | None,
                    controller_address: str | None, fmt: str) -> None:
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
    address = _given(broker_addr) or _find_master(app, controller_address, broker_name, cluster_name)
    messages: list[dict[str, Any]] = []
    offsets = GroupOffsets(address, app.timeout, group, from_where) if group else None
    try:
        with app.brokers(broker_addr) as brokers:
            queues = [queue_id] if queue_id is not None else _queue_ids(brokers, address, topic)
            for qid in queues:
                start = offset if offset is not None else offsets.start(topic, qid) if offsets else 0
                end = _read_queue(brokers, address, topic, qid, start, count, messages)
                if offsets is not None and end > start:
                    offsets.commit(topic, qid, end)
    finally:
        if offsets is not None:
            offsets.close()
    render_broker.show_consumed(app, fmt, address, messages)


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


class GroupOffsets:
    """A consumer group's committed offsets on one broker, through RocketMQ's requests."""

    def __init__(self, address: str, timeout: float, group: str, from_where: str) -> None:
        self.host, self.port = split_address(address, lenient=True)
        self.timeout = timeout
        self.group = group
        self.from_where = from_where
        self.remoting = BlockingRemoting()

    def _call(self, request: RemotingCommand) -> RemotingCommand:
        return self.remoting.call(self.host, self.port, request, time.monotonic() + self.timeout)

    def start(self, topic: str, queue_id: int) -> int:
        committed = remoting_admin.query_offset(self._call, self.group, topic, queue_id)
        if committed is not None:
            return committed
        low, high = remoting_admin.queue_bounds(self._call, topic, queue_id)
        return low if self.from_where == "first" else high

    def commit(self, topic: str, queue_id: int, offset: int) -> None:
        remoting_admin.commit_offset(self._call, self.group, topic, queue_id, offset)

    def close(self) -> None:
        self.remoting.close()


def _queue_ids(brokers: BrokerClient, address: str, topic: str) -> list[int]:
    ids = brokers.topics(address).queue_ids(topic)
    if ids is None:
        raise UsageError(f"topic {topic} does not exist on {address}")
    return ids


# ---------------------------------------------------------------------- getBrokerEpoch
@click.command("getBrokerEpoch")
@click.option("-b", "--brokerName", "broker_name", help="Broker name (takes precedence over -c).")
@click.option("-c", "--clusterName", "cluster_name", help="Every broker-set of this cluster.")
@click.option("-a", "--controllerAddress", "controller_address", metavar="ADDR", help=CONTROLLER_ADDR_HELP)
@click.option("-n", "--namesrvAddr", "namesrv", metavar="ADDR", help=NAMESRV_HELP)
@watch_options
@format_option
@pass_app
def get_broker_epoch(app: App, broker_name: str | None, cluster_name: str | None, controller_address: str | None,
                     namesrv: str | None, interval: float | None, count: int | None, fmt: str) -> None:
    """Show every replica's epoch entries (which master epoch wrote which commitlog range).

    Brokers are found through the controller, or through a name server with -n; an unreachable broker
    is shown as such.

    \b
    Examples:
      mqctl getBrokerEpoch -b broker-a
      mqctl getBrokerEpoch -c DefaultCluster --format mqadmin
      mqctl getBrokerEpoch -n 127.0.0.1:9876 -b broker-a     # a RocketMQ cluster, as mqadmin
    """
    unreachable: list[dict[str, Any]] = []
    with app.brokers() as brokers:
        def show() -> None:
            sets = _broker_sets(app, controller_address, namesrv, broker_name, cluster_name)
            rows = [_epoch_row(brokers, bs, broker_id, address) for bs in sets
                    for broker_id, address in replica_addresses(bs)]
            if fmt == "mqadmin":
                order = mqadmin_address_order(sets)
                rows.sort(key=lambda r: order.index(r["brokerAddr"]))
            unreachable[:] = [r for r in rows if not r["reachable"]]
            render_broker.show_epochs(app, fmt, rows)
        finished = app.watch(show, interval, count, in_place=fmt == "table")
    _fail_if_unanswered(finished, unreachable, "epoch entries")


def mqadmin_address_order(sets: list[dict[str, Any]], masters_only: bool = False) -> list[str]:
    """The order mqadmin visits these groups' brokers in (CommandUtil): a ``HashSet`` of their addresses,
    filled group by group (the groups in the order of a HashSet of their names; within a group by id, the
    master first), or of the masters' addresses only."""
    by_name = {str(bs.get("brokerName")): bs for bs in sets}
    filled: list[str] = []
    for name in hash_map_order(sorted(by_name)):
        bs = by_name[name]
        master = bs.get("masterAddress") if bs.get("masterBrokerId") is not None else None
        addresses = [str(master)] if master else []
        if not masters_only:
            addresses += [a for _, a in replica_addresses(bs) if a != master]
        filled += addresses
    return hash_map_order(filled)


def _fail_if_unanswered(finished: bool, unreachable: list[dict[str, Any]], what: str) -> None:
    """Every row is printed; then, as getControllerConfig does, a broker that gave no answer (in the last
    refresh of a watch that was not stopped with Ctrl-C) makes the command fail with exit 3, saying why
    (the mqadmin format prints nothing for it on stdout)."""
    if finished and unreachable:
        reasons = [f"{r['brokerAddr']} ({_reason(r['brokerAddr'], str(r.get('error')))})" for r in unreachable]
        raise UnreachableError(f"no {what} from broker {'; '.join(reasons)}", [r["brokerAddr"] for r in unreachable])


def _reason(address: str, error: str) -> str:
    return error.removeprefix(f"broker {address} is ").removeprefix(f"broker {address}: ")


def _epoch_row(brokers: BrokerClient, bs: dict[str, Any], broker_id: int, address: str) -> dict[str, Any]:
    base = {"clusterName": bs.get("clusterName"), "brokerName": bs.get("brokerName"), "brokerAddr": address,
            "brokerId": broker_id}
    try:
        cache = brokers.epoch_cache(address)
    except (UnreachableError, MqctlError) as exc:
        return {**base, "role": None, "epochEntries": [], "maxOffset": None, "confirmOffset": None,
                "reachable": False, "error": str(exc)}
    return {**base, "role": cache.role, "epochEntries": [e.model_dump() for e in cache.epochEntries],
            "maxOffset": cache.maxOffset, "confirmOffset": cache.confirmOffset, "reachable": True}


# ---------------------------------------------------------------------- haStatus
@click.command("haStatus")
@click.option("-b", "--brokerName", "broker_name",
              help="Every replica of this broker-set; a host:port is one broker's address, as mqadmin's -b.")
@click.option("-c", "--clusterName", "cluster_name", help="Every replica of every broker-set of this cluster.")
@click.option("--brokerAddr", "broker_addr", help="Just this broker.")
@click.option("-a", "--controllerAddress", "controller_address", metavar="ADDR", help=CONTROLLER_ADDR_HELP)
@click.option("-n", "--namesrvAddr", "namesrv", metavar="ADDR", help=NAMESRV_HELP)
@watch_options
@format_option
@pass_app
def ha_status(app: App, broker_name: str | None, cluster_name: str | None, broker_addr: str | None,
              controller_address: str | None, namesrv: str | None, interval: float | None, count: int | None,
              fmt: str) -> None:
    """Show replication status: per slave the ack offset, lag, in-sync flag and last caught-up time.

    \b
    Examples:
      mqctl haStatus -b broker-a
      mqctl haStatus --brokerAddr 127.0.0.1:10911 --format mqadmin
      mqctl haStatus -c DefaultCluster -i 1
    """
    if broker_name and ":" in broker_name and not broker_addr:  # mqadmin's haStatus -b is an address
        broker_addr, broker_name = broker_name, None
    given = _given(broker_addr)
    unreachable: list[dict[str, Any]] = []
    with app.brokers(given) as brokers:
        def show() -> None:
            addresses = [given] if given else _ha_addresses(app, controller_address, namesrv, broker_name,
                                                            cluster_name, fmt)
            rows = []
            for address in addresses:
                try:
                    row = {"reachable": True, **brokers.ha_status(address).shown()}
                    row.setdefault("brokerAddr", address)  # a RocketMQ broker's status does not name it
                    rows.append(row)
                except MqctlError as exc:
                    rows.append({"brokerAddr": address, "reachable": False, "error": str(exc)})
            unreachable[:] = [r for r in rows if not r["reachable"]]
            render_broker.show_ha_status(app, fmt, rows)
        finished = app.watch(show, interval, count, in_place=fmt == "table")
    _fail_if_unanswered(finished, unreachable, "status")


def _ha_addresses(app: App, controller_address: str | None, namesrv: str | None, broker_name: str | None,
                  cluster_name: str | None, fmt: str) -> list[str]:
    """Every replica of the groups asked for; for a cluster in mqadmin's format, its masters only, in the
    order mqadmin shows them (its haStatus -c)."""
    sets = _broker_sets(app, controller_address, namesrv, broker_name, cluster_name)
    if fmt == "mqadmin" and not broker_name:
        return mqadmin_address_order(sets, masters_only=True)
    return [address for bs in sets for _, address in replica_addresses(bs)]


COMMANDS = [start_broker, send_message, consume_message, get_broker_epoch, ha_status]
