"""updateTopic and deleteTopic: create a topic on brokers, with RocketMQ's own request (17 UPDATE_AND_CREATE_TOPIC
over remoting), or delete it from a cluster's masters and from the name servers (215 DELETE_TOPIC_IN_BROKER, 216
DELETE_TOPIC_IN_NAMESRV), so the same commands work on our brokers and on a RocketMQ cluster."""

from __future__ import annotations

import time
from typing import Any

import click
from rich.text import Text

from mqctl.app import App, pass_app
from mqctl.commands.broker import NAMESRV_HELP, _broker_sets
from mqctl.commands.brokeradmin import _cluster
from mqctl.commands.namesrv import _servers, namesrv_option
from mqctl.commands.subgroup import _targets, parse_attributes
from mqctl.options import CONTROLLER_ADDR_HELP, format_option
from mqctl.terminal import terminal_safe
from services.broker.record import valid_topic
from services.common.addresses import check_address, split_address
from services.common.broker_client import replica_addresses
from services.common.codes import ResponseCode, code_name
from services.common.errors import MqctlError, RemoteError, UnreachableError
from services.common.remoting_blocking import BlockingRemoting, signer
from services.remoting import admin_headers as ah
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.errors import RemotingError
from services.remoting.headers import (
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    PutKVConfigRequestHeader,
)
from services.remoting.javaorder import hash_map_order
from services.remoting.namesrv_bodies import TopicConfigSerializeWrapper

#: What mqadmin asks when -r/-w are not given, if the broker does not say its own default.
MQADMIN_QUEUE_NUMS = 8
#: The auto-create topic: its queue count is the broker's default for new topics.
AUTO_CREATE_TOPIC = "TBW102"
PERMS = {2: "-W-", 4: "R--", 6: "RW-"}
#: NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG.
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


@click.command("updateTopic")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-b", "--brokerAddr", "broker_addr", help="Create it on this broker (as mqadmin's -b).")
@click.option("-c", "--clusterName", "cluster_name", help="Create it on every broker of this cluster.")
@click.option("-r", "--readQueueNums", "read_queues", type=click.IntRange(1, 1024), default=None,
              help="Read queues (default: the broker's default for new topics).")
@click.option("-w", "--writeQueueNums", "write_queues", type=click.IntRange(1, 1024), default=None,
              help="Write queues (default: as -r).")
@click.option("-p", "--perm", type=click.Choice(["2", "4", "6"]), default="6", show_default=True,
              help="2: write, 4: read, 6: read and write.")
@click.option("-o", "--order", type=click.BOOL, default=False, show_default=True,
              help="An ordered topic: its broker groups and write queue counts are also kept in the name servers' "
                   "ORDER_TOPIC_CONFIG (PUT_KV_CONFIG, 100, to each), as mqadmin does.")
@click.option("--attributes", help="Attributes to add or alter (+key=value) or delete (-key), comma-separated "
                                   "(mqadmin's -a; a -a value starting with + or - is taken as this).")
@click.option("-u", "--unit", type=click.BOOL, default=False, show_default=True, help="A unit topic (topicSysFlag 1).")
@click.option("-s", "--hasUnitSub", "has_unit_sub", type=click.BOOL, default=False, show_default=True,
              help="A topic with unit subscriptions (topicSysFlag 2).")
@click.option("-a", "--controllerAddress", "controller_address", metavar="ADDR", help=CONTROLLER_ADDR_HELP)
@click.option("-n", "--namesrvAddr", "namesrv", metavar="ADDR", help=NAMESRV_HELP)
@format_option
@pass_app
def update_topic(app: App, topic: str, broker_addr: str | None, cluster_name: str | None, read_queues: int | None,
                 write_queues: int | None, perm: str, order: bool, attributes: str | None, unit: bool,
                 has_unit_sub: bool, controller_address: str | None, namesrv: str | None, fmt: str) -> None:
    """Create a topic on a broker, or on every broker of a cluster: every live replica when the brokers
    come from our controller (each keeps it), the masters when they come from a name server (-n), as
    mqadmin does.

    Our brokers keep each topic's queue counts and perm as asked; a topic is also created by its first
    message (unless the broker has autoCreateTopicEnable=false).

    \b
    Examples:
      mqctl updateTopic -t TopicTest -c DefaultCluster
      mqctl updateTopic -t TopicTest -b 127.0.0.1:10911 --format mqadmin
      mqctl updateTopic -t TopicTest -c DefaultCluster -n 10.0.0.5:9876 -r 8 -w 8   # a RocketMQ cluster
      mqctl updateTopic -t Fifo -c DefaultCluster -n 10.0.0.5:9876 -a +message.type=FIFO -o true
    """
    if bool(broker_addr) == bool(cluster_name):
        raise click.UsageError("give exactly one of -b brokerAddr and -c clusterName")
    if controller_address and controller_address.strip()[:1] in ("+", "-") and attributes is None:
        attributes, controller_address = controller_address.strip(), None  # mqadmin's -a
    changes = parse_attributes(attributes.strip()) if attributes else {}
    if broker_addr:
        addresses = [check_address(broker_addr, "broker")]
    elif namesrv:  # as mqadmin: the masters (a RocketMQ slave copies its master's topics)
        addresses = [str(bs["masterAddress"]) for bs in _broker_sets(app, None, namesrv, None, cluster_name)
                     if bs.get("masterAddress")]
    else:  # our brokers keep created topics themselves: every live replica
        addresses = _live_replicas(app, _broker_sets(app, controller_address, None, None, cluster_name))
    remoting = BlockingRemoting(signer=signer(app.token))
    created: list[str] = []
    config: dict[str, Any] = {}
    order_conf: str | None = None
    try:
        for address in addresses:
            config = _config(remoting, address, app.timeout, topic, read_queues, write_queues, int(perm), order)
            config.update(topicSysFlag=(1 if unit else 0) | (2 if has_unit_sub else 0), attributes=changes)
            _create(remoting, address, app.timeout, config)
            created.append(address)
        if order and created:
            order_conf = _set_order_conf(app, namesrv or controller_address, config, broker_addr, cluster_name)
    finally:
        remoting.close()
        _show(app, fmt, config, created, order_conf, bool(broker_addr))


def _set_order_conf(app: App, names: str | None, config: dict[str, Any], broker_addr: str | None,
                    cluster_name: str | None) -> str:
    """mqadmin's createOrUpdateOrderConf: ``brokerName:writeQueueNums`` of each broker group (-c), or of the
    broker's group merged into the topic's current value (-b), put in ORDER_TOPIC_CONFIG on every name server;
    what mqadmin prints of it."""
    servers = _servers(app, names, write=True)
    topic, writes = config["topicName"], config["writeQueueNums"]
    try:
        info = _cluster(servers)
        if cluster_name:
            shown = value = ";".join(f"{name}:{writes}" for name in hash_map_order(
                info.cluster_addr_table.get(cluster_name.strip(), frozenset())))
        else:
            name = next((n for n, d in info.broker_addr_table.items() if broker_addr in d.broker_addrs.values()), None)
            if name is None:
                raise MqctlError(f"broker {broker_addr} is in no broker group the name servers know")
            shown = f"{name}:{writes}"
            old = servers.first(make_request(RequestCode.GET_KV_CONFIG, 0, GetKVConfigRequestHeader(
                namespace=ORDER_TOPIC_CONFIG, key=topic).to_ext_fields()), accept=(ResponseCode.QUERY_NOT_FOUND,))
            merged = {conf.split(":")[0]: conf for conf in
                      (GetKVConfigResponseHeader.from_ext_fields(old.ext_fields).value or "").split(";") if conf.strip()}
            merged[name] = shown
            value = ";".join(merged[k] for k in hash_map_order(merged))
        header = PutKVConfigRequestHeader(namespace=ORDER_TOPIC_CONFIG, key=topic, value=value).to_ext_fields()
        for address in servers.addresses:
            servers.ok(address, make_request(RequestCode.PUT_KV_CONFIG, 0, header))
    finally:
        servers.remoting.close()
    return shown


def _live_replicas(app: App, sets: list[dict[str, Any]]) -> list[str]:
    """Every replica's address but those the controller says are down (they would only time out)."""
    addresses = []
    for bs in sets:
        down = {int(r["brokerId"]) for r in (bs.get("inSyncReplicas") or []) + (bs.get("notInSyncReplicas") or [])
                if r.get("alive") is False}
        for broker_id, address in replica_addresses(bs):
            if broker_id in down:
                app.warn(f"broker {address} ({bs.get('brokerName')} id {broker_id}) is down: topic not created there")
            else:
                addresses.append(address)
    return addresses


def _call(remoting: BlockingRemoting, address: str, timeout: float, request: RemotingCommand) -> RemotingCommand:
    host, port = split_address(address, lenient=True)
    return remoting.call(host, port, request, time.monotonic() + timeout)


def _config(remoting: BlockingRemoting, address: str, timeout: float, topic: str, read: int | None,
            write: int | None, perm: int, order: bool) -> dict[str, Any]:
    if read is None:
        read = _default_queue_nums(remoting, address, timeout)
    return {"topicName": topic, "readQueueNums": read, "writeQueueNums": write or read, "perm": perm,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": order}


def _default_queue_nums(remoting: BlockingRemoting, address: str, timeout: float) -> int:
    """The queue count of the broker's auto-create topic (its defaultTopicQueueNums), else mqadmin's 8."""
    answer = _call(remoting, address, timeout, make_request(bh.GET_ALL_TOPIC_CONFIG, 0))
    if answer.code != ResponseCode.SUCCESS:
        return MQADMIN_QUEUE_NUMS
    try:
        table = TopicConfigSerializeWrapper.decode(answer.body).topic_config_table
    except RemotingError:
        return MQADMIN_QUEUE_NUMS
    auto = table.get(AUTO_CREATE_TOPIC)
    return auto.write_queue_nums if auto is not None and 0 < auto.write_queue_nums <= 1024 else MQADMIN_QUEUE_NUMS


def _create(remoting: BlockingRemoting, address: str, timeout: float, config: dict[str, Any]) -> None:
    changes: dict[str, str] = config.get("attributes") or {}
    header = bh.CreateTopicRequestHeader(
        topic=config["topicName"], default_topic=AUTO_CREATE_TOPIC, read_queue_nums=config["readQueueNums"],
        write_queue_nums=config["writeQueueNums"], perm=config["perm"], topic_filter_type="SINGLE_TAG",
        topic_sys_flag=config.get("topicSysFlag", 0), order=config["order"], force=False,
        attributes=",".join(f"{k}={changes[k]}" if changes[k] else k for k in hash_map_order(changes)) or None)
    try:
        answer = _call(remoting, address, timeout, make_request(bh.UPDATE_AND_CREATE_TOPIC, 0, header.to_ext_fields()))
    except UnreachableError as exc:
        raise UnreachableError(f"broker {address}: {exc}", [address]) from None
    if answer.code != ResponseCode.SUCCESS:
        raise RemoteError(answer.code, f"broker {address}: {answer.remark or code_name(answer.code)}")


@terminal_safe
def _show(app: App, fmt: str, config: dict[str, Any], created: list[str], order_conf: str | None = None,
          one_broker: bool = False) -> None:
    if not created:
        return
    if fmt == "json":
        app.print_json({**config, "brokers": created, **({"orderConf": order_conf} if order_conf else {})})
    elif fmt == "mqadmin":
        made = "".join(f"create topic to {address} success.\n" for address in created)
        if order_conf is not None:  # -b prints it before the creation, -c after
            line = f"set {'broker' if one_broker else 'cluster'} orderConf. isOrder=true, orderConf=[{order_conf}]\n"
            made = line + made if one_broker else made + line
        changes: dict[str, str] = config.get("attributes") or {}
        shown = ", ".join(f"{k}={changes[k]}" for k in hash_map_order(changes))
        made += (f"TopicConfig [topicName={config['topicName']}, readQueueNums={config['readQueueNums']}, "
                 f"writeQueueNums={config['writeQueueNums']}, perm={PERMS[config['perm']]}, "
                 f"topicFilterType=SINGLE_TAG, topicSysFlag={config.get('topicSysFlag', 0)}, "
                 f"order={str(config['order']).lower()}, attributes={{{shown}}}]\n")
        app.print_text(made)
    else:
        app.print(Text(f"Created topic {config['topicName']} ({config['readQueueNums']} read / "
                       f"{config['writeQueueNums']} write queues) on {', '.join(created)}.", style="green"))


@click.command("deleteTopic")
@namesrv_option
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-c", "--clusterName", "cluster", required=True, help="Delete it from every master of this cluster.")
@format_option
@pass_app
def delete_topic(app: App, namesrv: str | None, topic: str, cluster: str, fmt: str) -> None:
    """Delete a topic: DELETE_TOPIC_IN_BROKER (215) to each master of -c's cluster (found on the name servers of
    -n), which drops the topic's messages, its config and every group's offsets of it, then
    DELETE_TOPIC_IN_NAMESRV (216, with the cluster) to every name server of -n, which drop its routes on that
    cluster's groups. Our brokers drop the messages on their slaves too, and keep them dropped across a restart
    and a failover; our controllers each keep their own routes: give all of them. Stops at the first refusal.

    \b
    Examples:
      mqctl deleteTopic -n '127.0.0.1:9878;127.0.0.1:9868;127.0.0.1:9858' -c DefaultCluster -t TopicTest
      mqctl deleteTopic -n 10.0.0.5:9876 -c DefaultCluster -t TopicTest --format mqadmin   # RocketMQ's
    """
    topic, cluster = topic.strip(), cluster.strip()
    if not valid_topic(topic):
        raise click.BadParameter(f"{topic[:80]!r} is no topic name (1-127 of letters, digits, '%', '|', '_' and "
                                 "'-')", param_hint="-t")
    servers = _servers(app, namesrv, write=True)
    brokers: list[str] = []
    try:
        masters = _targets(servers, None, cluster)
        for address in masters:
            servers.ok(address, make_request(ah.DELETE_TOPIC_IN_BROKER, 0, {"topic": topic}))
            brokers.append(address)
        header = DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster).to_ext_fields()
        for address in servers.addresses:
            servers.ok(address, make_request(RequestCode.DELETE_TOPIC_IN_NAMESRV, 0, header))
    finally:
        servers.remoting.close()
    if fmt == "json":
        app.print_json({"topic": topic, "cluster": cluster, "brokers": brokers, "nameServers": servers.addresses})
    elif fmt == "mqadmin":
        app.print_text(f"delete topic [{topic}] from cluster [{cluster}] success.\n"
                       f"delete topic [{topic}] from NameServer success.\n")
    else:
        app.print(Text(f"Deleted topic {topic} from {', '.join(brokers)} (cluster {cluster}) and from the name "
                       f"servers {', '.join(servers.addresses)}.", style="green"))


COMMANDS = [update_topic, delete_topic]
