"""Broker commands: startBroker, sendMessage, getBrokerEpoch, haStatus."""

from __future__ import annotations

from typing import Any

import click

from mqctl import render_broker
from mqctl.app import App, pass_app
from mqctl.options import CONTROLLER_ADDR_HELP, format_option, watch_options
from services.broker import contract as bc
from services.broker.cli import start_broker
from services.common.broker_client import BrokerClient, broker_sets, master_of, replica_addresses
from services.common.codes import ResponseCode
from services.common.controller_client import check_address
from services.common.errors import MqctlError, RemoteError, UnreachableError
from services.remoting.javaorder import hash_map_order
from services.remoting.message import UNIQ_KEY, new_uniq_id

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
@click.option("-q", "-i", "--queueId", "queue_id", type=click.IntRange(min=0), default=None,
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
    if broker_addr is not None:
        name, address = broker_name, check_address(broker_addr, "broker")
    else:
        name, address = _find_master(app, controller_address, broker_name, cluster_name)
    results = []
    with app.brokers(broker_addr) as brokers:
        for i in range(count):
            text = body if count == 1 else f"{body} #{i}"
            uniq_key = new_uniq_id()  # the message's own id, as a RocketMQ producer gives every message one
            payload = {"topic": topic, "body": text, "keys": keys, "tags": tags, "queueId": queue_id,
                       "properties": {UNIQ_KEY: uniq_key}}
            env, address = _send(brokers, address, payload, follow=broker_addr is None)
            results.append({"brokerName": name, "brokerAddr": address, **env.data, "uniqKey": uniq_key})
    render_broker.show_sent(app, fmt, results)


def _given(broker_addr: str | None) -> str | None:
    """The operator's --brokerAddr, checked before anything is sent (a malformed one is a usage error)."""
    return check_address(broker_addr, "broker") if broker_addr is not None else None


def _find_master(app: App, controller_address: str | None, broker_name: str | None,
                 cluster: str | None) -> tuple[str, str]:
    with app.controller(controller_address) as client:
        return master_of(client, broker_name, cluster)


def _send(brokers: BrokerClient, address: str, payload: dict[str, Any], follow: bool) -> tuple[Any, str]:
    env = brokers.request(address, "POST", bc.SEND_MESSAGE, json=payload,
                          accept=(ResponseCode.SERVICE_NOT_AVAILABLE,))
    if env.code == ResponseCode.SERVICE_NOT_AVAILABLE:
        master = (env.data or {}).get("masterAddress")
        if follow and master and master != address:
            return _send(brokers, str(master), payload, follow=False)
        raise RemoteError(env.code, env.remark)
    return env, address


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


COMMANDS = [start_broker, send_message, get_broker_epoch, ha_status]
