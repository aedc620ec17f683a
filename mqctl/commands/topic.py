"""updateTopic: create a topic on brokers, with RocketMQ's own request (17 UPDATE_AND_CREATE_TOPIC over
remoting), so the same command creates it on our brokers and on a RocketMQ cluster."""

from __future__ import annotations

import time
from typing import Any

import click
from rich.text import Text

from mqctl.app import App, pass_app
from mqctl.commands.broker import NAMESRV_HELP, _broker_sets
from mqctl.options import CONTROLLER_ADDR_HELP, format_option
from mqctl.terminal import terminal_safe
from services.common.addresses import check_address, split_address
from services.common.broker_client import replica_addresses
from services.common.codes import ResponseCode, code_name
from services.common.errors import RemoteError, UnreachableError
from services.common.remoting_blocking import BlockingRemoting, signer
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand, make_request
from services.remoting.errors import RemotingError
from services.remoting.namesrv_bodies import TopicConfigSerializeWrapper

#: What mqadmin asks when -r/-w are not given, if the broker does not say its own default.
MQADMIN_QUEUE_NUMS = 8
#: The auto-create topic: its queue count is the broker's default for new topics.
AUTO_CREATE_TOPIC = "TBW102"
PERMS = {2: "-W-", 4: "R--", 6: "RW-"}


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
@click.option("-o", "--order", type=click.BOOL, default=False, show_default=True, help="An ordered topic.")
@click.option("-a", "--controllerAddress", "controller_address", metavar="ADDR", help=CONTROLLER_ADDR_HELP)
@click.option("-n", "--namesrvAddr", "namesrv", metavar="ADDR", help=NAMESRV_HELP)
@format_option
@pass_app
def update_topic(app: App, topic: str, broker_addr: str | None, cluster_name: str | None, read_queues: int | None,
                 write_queues: int | None, perm: str, order: bool, controller_address: str | None,
                 namesrv: str | None, fmt: str) -> None:
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
    """
    if bool(broker_addr) == bool(cluster_name):
        raise click.UsageError("give exactly one of -b brokerAddr and -c clusterName")
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
    try:
        for address in addresses:
            config = _config(remoting, address, app.timeout, topic, read_queues, write_queues, int(perm), order)
            _create(remoting, address, app.timeout, config)
            created.append(address)
    finally:
        remoting.close()
        _show(app, fmt, config, created)


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
    header = bh.CreateTopicRequestHeader(
        topic=config["topicName"], default_topic=AUTO_CREATE_TOPIC, read_queue_nums=config["readQueueNums"],
        write_queue_nums=config["writeQueueNums"], perm=config["perm"], topic_filter_type="SINGLE_TAG",
        topic_sys_flag=0, order=config["order"], force=False)
    try:
        answer = _call(remoting, address, timeout, make_request(bh.UPDATE_AND_CREATE_TOPIC, 0, header.to_ext_fields()))
    except UnreachableError as exc:
        raise UnreachableError(f"broker {address}: {exc}", [address]) from None
    if answer.code != ResponseCode.SUCCESS:
        raise RemoteError(answer.code, f"broker {address}: {answer.remark or code_name(answer.code)}")


@terminal_safe
def _show(app: App, fmt: str, config: dict[str, Any], created: list[str]) -> None:
    if not created:
        return
    if fmt == "json":
        app.print_json({**config, "brokers": created})
    elif fmt == "mqadmin":
        text = "".join(f"create topic to {address} success.\n" for address in created)
        text += (f"TopicConfig [topicName={config['topicName']}, readQueueNums={config['readQueueNums']}, "
                 f"writeQueueNums={config['writeQueueNums']}, perm={PERMS[config['perm']]}, "
                 f"topicFilterType=SINGLE_TAG, topicSysFlag=0, order={str(config['order']).lower()}, "
                 f"attributes={{}}]\n")
        app.print_text(text)
    else:
        app.print(Text(f"Created topic {config['topicName']} ({config['readQueueNums']} read / "
                       f"{config['writeQueueNums']} write queues) on {', '.join(created)}.", style="green"))


COMMANDS = [update_topic]
