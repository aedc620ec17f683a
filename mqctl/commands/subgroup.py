"""mqadmin's updateSubGroup and deleteSubGroup: a consumer group's settings on a broker (-b) or on every master of
a cluster (-c, found through the name servers of -n), with RocketMQ's own requests (200
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 207 DELETE_SUBSCRIPTIONGROUP), signed with the auth token when one is set,
so the same command works on RocketMQ's brokers and ours; ``--format mqadmin`` prints what mqadmin prints.
"""

from __future__ import annotations

import click

from mqctl.app import App, pass_app
from mqctl.commands.brokeradmin import _cluster, _members
from mqctl.commands.namesrv import _Servers, _servers, namesrv_option
from mqctl.options import format_option
from services.common.errors import MqctlError
from services.remoting import admin_headers as ah
from services.remoting import fastjson
from services.remoting.bodies import _Obj
from services.remoting.command import make_request
from services.remoting.errors import RemotingError
from services.remoting.javaorder import hash_map_order
from services.remoting.subscription_bodies import GROUP_PATTERN, GroupRetryPolicy, SubscriptionGroupConfig

__all__ = ["COMMANDS", "parse_attributes"]


def parse_attributes(text: str) -> dict[str, str]:
    """AttributeParser.parseToMap: ``+key=value`` to add or alter, ``-key`` to delete, comma-separated; the
    keys keep their sign, as RocketMQ sends them."""
    attributes: dict[str, str] = {}
    for item in (text.split(",") if text else []):
        key, equals, value = item.partition("=")
        if (equals and "+" not in key) or (not equals and "-" not in key):
            raise click.BadParameter(f"{item!r}: use +key=value to add or alter, -key to delete", param_hint="--attributes")
        if key in attributes:
            raise click.BadParameter(f"key duplication: {key}", param_hint="--attributes")
        attributes[key] = value.split("=")[0] if equals else ""
    return attributes


def _targets(servers: _Servers, broker: str | None, cluster: str | None) -> list[str]:
    """-b's broker, or the masters of -c's cluster in the order of mqadmin's HashSet of their addresses."""
    if broker:
        return [broker.strip()]
    if not cluster:
        raise click.UsageError("give -b brokerAddr or -c clusterName")
    masters = [address for _, _, broker_id, address in _members(_cluster(servers), cluster.strip()) if broker_id == 0]
    if not masters:
        raise MqctlError(f"cluster {cluster} has no master")
    return hash_map_order(masters)


def _policy(text: str | None) -> GroupRetryPolicy:
    if text is None:
        return GroupRetryPolicy()
    try:
        return GroupRetryPolicy.read(_Obj(fastjson.loads(text.strip()), "groupRetryPolicy"))
    except RemotingError as exc:
        raise click.BadParameter(str(exc), param_hint="-p") from None


@click.command("updateSubGroup")
@namesrv_option
@click.option("-b", "--brokerAddr", "broker", help="Create or update it on this broker.")
@click.option("-c", "--clusterName", "cluster", help="Create or update it on every master of this cluster.")
@click.option("-g", "--groupName", "group", required=True, help="Consumer group.")
@click.option("-s", "--consumeEnable", "consume_enable", type=click.BOOL, default=True,
              help="Whether the group may consume (false: its pulls are refused).")
@click.option("-m", "--consumeFromMinEnable", "from_min", type=click.BOOL, default=False, help="From the min offset.")
@click.option("-d", "--consumeBroadcastEnable", "broadcast", type=click.BOOL, default=False, help="Broadcast.")
@click.option("-o", "--consumeMessageOrderly", "orderly", type=click.BOOL, default=False, help="Orderly.")
@click.option("-q", "--retryQueueNums", "retry_queues", type=click.IntRange(0, 2**31 - 1), default=1,
              help="Retry queues.")
@click.option("-r", "--retryMaxTimes", "retry_max", type=click.IntRange(-1, 2**31 - 1), default=16,
              help="Retries before the dead-letter queue, when the consumer does not say.")
@click.option("-p", "--groupRetryPolicy", "policy", help="The retry policy as JSON, e.g. "
              '{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000,10000]}}.')
@click.option("-i", "--brokerId", "broker_id", type=click.IntRange(0, 2**63 - 1), default=0,
              help="Consume from this broker id.")
@click.option("-w", "--whichBrokerWhenConsumeSlowly", "slowly", type=click.IntRange(0, 2**63 - 1), default=1,
              help="The broker id when consuming slowly.")
@click.option("-a", "--notifyConsumerIdsChanged", "notify", type=click.BOOL, default=True,
              help="Notify the consumers when the group's members change.")
@click.option("--attributes", default="", help="Attributes: +a=b,+c=d,-e.")
@format_option
@pass_app
def update_sub_group(app: App, namesrv: str | None, broker: str | None, cluster: str | None, group: str,
                     consume_enable: bool, from_min: bool, broadcast: bool, orderly: bool, retry_queues: int,
                     retry_max: int, policy: str | None, broker_id: int, slowly: int, notify: bool, attributes: str,
                     fmt: str) -> None:
    """Create or update a consumer group's settings (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 200, to the broker of
    -b or to each master of -c's cluster, found on the name servers of -n). Our brokers act on retryMaxTimes
    (retries when the consumer does not say) and consumeEnable (false: pulls refused); they keep the rest.

    \b
    Examples:
      mqctl updateSubGroup -n 127.0.0.1:9878 -c DefaultCluster -g orders-consumer -r 3
      mqctl updateSubGroup -n 127.0.0.1:9878 -b 127.0.0.1:10911 -g orders-consumer -s false --format mqadmin
    """
    name = group.strip()
    if GROUP_PATTERN.fullmatch(name) is None:
        raise click.BadParameter("use 1-255 of letters, digits, '%', '|', '_' and '-'", param_hint="-g")
    config = SubscriptionGroupConfig(
        name, consume_enable, from_min, broadcast, orderly, retry_queues, retry_max, _policy(policy), broker_id,
        slowly, notify, attributes=parse_attributes(attributes.strip()))
    servers = _servers(app, namesrv, write=True)
    done: list[str] = []
    try:
        for address in _targets(servers, broker, cluster):
            servers.ok(address, make_request(ah.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 0, {}, config.encode()))
            done.append(address)
    finally:
        servers.remoting.close()
    if fmt == "json":
        app.print_json({"brokers": done, "config": config.to_json()})
    elif fmt == "mqadmin":
        app.print_text("".join(f"create subscription group to {a} success.\n" for a in done) + config.describe())
    else:
        app.print_text("".join(f"Subscription group {name} created or updated on {a}\n" for a in done))


@click.command("deleteSubGroup")
@namesrv_option
@click.option("-b", "--brokerAddr", "broker", help="Delete it from this broker.")
@click.option("-c", "--clusterName", "cluster", help="Delete it from every master of this cluster.")
@click.option("-g", "--groupName", "group", required=True, help="Consumer group.")
@click.option("-r", "--removeOffset", "remove_offset", type=click.BOOL, default=False,
              help="Remove the group's consumer offsets too.")
@format_option
@pass_app
def delete_sub_group(app: App, namesrv: str | None, broker: str | None, cluster: str | None, group: str,
                     remove_offset: bool, fmt: str) -> None:
    """Delete a consumer group's settings (DELETE_SUBSCRIPTIONGROUP, 207, to the broker of -b or to each master
    of -c's cluster, found on the name servers of -n); with -r true its consumer offsets too. Unlike mqadmin's
    -c, the group's retry and dead-letter topics are left in place.

    \b
    Examples:
      mqctl deleteSubGroup -n 127.0.0.1:9878 -c DefaultCluster -g orders-consumer
      mqctl deleteSubGroup -n 127.0.0.1:9878 -b 127.0.0.1:10911 -g orders-consumer -r true --format mqadmin
    """
    name = group.strip()
    fields = ah.DeleteSubscriptionGroupRequestHeader(group_name=name, clean_offset=remove_offset).to_ext_fields()
    servers = _servers(app, namesrv, write=True)
    done: list[str] = []
    try:
        for address in _targets(servers, broker, cluster):
            servers.ok(address, make_request(ah.DELETE_SUBSCRIPTIONGROUP, 0, fields))
            done.append(address)
    finally:
        servers.remoting.close()
    if fmt == "json":
        app.print_json({"brokers": done, "group": name, "removeOffset": remove_offset})
    elif fmt == "mqadmin" and cluster and not broker:
        app.print_text("".join(f"delete subscription group [{name}] from broker [{a}] in cluster [{cluster.strip()}] "
                               f"success.\n" for a in done))
    else:
        app.print_text("".join(f"delete subscription group [{name}] from broker [{a}] success.\n" for a in done))


COMMANDS = [update_sub_group, delete_sub_group]
