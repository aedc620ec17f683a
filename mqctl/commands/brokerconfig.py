"""mqadmin's getBrokerConfig: a broker's properties (GET_BROKER_CONFIG, 26), of one broker (-b) or of every
master and slave of a cluster (-c, found through the name servers of -n), from RocketMQ's brokers or ours;
and updateBrokerConfig (UPDATE_BROKER_CONFIG, 25), which RocketMQ's brokers serve and ours refuse (a broker of
ours changes its configuration only by a restart). ``--format mqadmin`` prints what mqadmin prints.
"""

from __future__ import annotations

import click
from rich.table import Table

from mqctl.app import App, pass_app
from mqctl.commands.brokeradmin import _cluster
from mqctl.commands.namesrv import _Servers, _servers, namesrv_option
from mqctl.options import format_option
from mqctl.terminal import terminal_safe
from services.common.codes import ResponseCode, code_name
from services.common.errors import ConfigError, MqctlError, RemoteError
from services.common.props import parse_properties
from services.remoting import admin_headers as ah
from services.remoting.command import make_request
from services.remoting.javaorder import concurrent_hash_map_order, hash_map_order

__all__ = ["COMMANDS"]

#: CommandUtil.NO_MASTER_PLACEHOLDER: the group of slaves whose master is not known.
NO_MASTER = "NO_MASTER"


def _config(servers: _Servers, address: str) -> dict[str, str]:
    text = servers.ok(address, make_request(ah.GET_BROKER_CONFIG, 0)).body.decode("utf-8", "replace")
    try:
        return parse_properties(text, f"broker {address}'s config")
    except ConfigError as exc:
        raise MqctlError(f"broker {address} answered a config that is not properties text: {exc}") from None


def _cluster_brokers(servers: _Servers, cluster: str) -> list[tuple[str, str]]:
    """(mqadmin's heading, address) for each master then its slaves, as CommandUtil's HashMap(4) of masters
    iterates (a group without a master under NO_MASTER, printed without a config)."""
    info = _cluster(servers)
    groups: dict[str, list[str]] = {}
    for name in info.cluster_addr_table.get(cluster, ()):
        data = info.broker_addr_table.get(name)
        if data is None:
            continue
        master = data.broker_addrs.get(0) or NO_MASTER
        groups.setdefault(master, []).extend(data.broker_addrs[i] for i in sorted(data.broker_addrs) if i != 0)
    rows: list[tuple[str, str]] = []
    for master in hash_map_order(list(groups), 4):
        rows.append((f"============Master: {master}============", master))
        rows += [(f"============My Master: {master}=====Slave: {s}============", s) for s in groups[master]]
    return rows


@click.command("getBrokerConfig")
@namesrv_option
@click.option("-b", "--brokerAddr", "broker", help="One broker's address.")
@click.option("-c", "--clusterName", "cluster", help="Every master and slave of this cluster.")
@format_option
@pass_app
def get_broker_config(app: App, namesrv: str | None, broker: str | None, cluster: str | None, fmt: str) -> None:
    """Show a broker's properties (GET_BROKER_CONFIG, 26, to the broker of -b, or to every master and slave of
    -c's cluster, found on the name servers of -n). Our brokers mask the auth token and TLS secrets.

    \b
    Examples:
      mqctl getBrokerConfig -n 127.0.0.1:9878 -b 127.0.0.1:10911
      mqctl getBrokerConfig -n 127.0.0.1:9878 -c DefaultCluster --format mqadmin
    """
    if bool(broker) == bool(cluster):
        raise click.UsageError("give exactly one of -b brokerAddr and -c clusterName")
    servers = _servers(app, namesrv)
    try:
        rows = [(f"============{broker.strip()}============", broker.strip())] if broker else \
            _cluster_brokers(servers, str(cluster).strip())
        configs = [(heading, address, None if address == NO_MASTER else _config(servers, address))
                   for heading, address in rows]
    finally:
        servers.remoting.close()
    _show(app, fmt, configs)


@terminal_safe
def _show(app: App, fmt: str, configs: list[tuple[str, str, dict[str, str] | None]]) -> None:
    if fmt == "json":
        app.print_json({"brokers": [{"address": a, "config": c} for _, a, c in configs if c is not None]})
    elif fmt == "mqadmin":  # each a Properties loaded line by line, then an empty line
        text = ""
        for heading, _, config in configs:
            text += heading + "\n"
            if config is not None:
                text += "".join(f"{k:<50}=  {config[k]}\n" for k in concurrent_hash_map_order(config)) + "\n"
        app.print_text(text)
    else:
        for _, address, config in configs:
            table = Table(title=f"Broker {address}", title_justify="left")
            table.add_column("Property")
            table.add_column("Value")
            for key, value in sorted((config or {}).items()):
                table.add_row(key, value)
            app.print(table)


# ------------------------------------------------------------------------------------- updateBrokerConfig
def _masters(servers: _Servers, cluster: str, slaves: bool) -> list[str]:
    """CommandUtil.fetchMasterAddrByClusterName (or, with slaves, fetchMasterAndSlaveAddrByClusterName): the
    addresses of the cluster's masters (and slaves), in the order of Java's HashSet."""
    info = _cluster(servers)
    names = info.cluster_addr_table.get(cluster)
    if names is None:
        raise MqctlError(f"cluster {cluster} is unknown to the name servers: make sure it exists and -n names "
                         f"its name servers")
    addresses: list[str] = []
    for name in names:
        data = info.broker_addr_table.get(name)
        if data is not None:
            addresses += list(data.broker_addrs.values()) if slaves else \
                [data.broker_addrs[0]] if 0 in data.broker_addrs else []
    return hash_map_order(addresses)


def _update(servers: _Servers, address: str, key: str, value: str) -> None:
    request = make_request(ah.UPDATE_BROKER_CONFIG, 0, body=f"{key}={value}\n".encode())
    answer = servers.call(address, request)
    if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        raise RemoteError(answer.code, f"broker {address} does not change its configuration at run time: "
                                       f"mqctl's brokers take a change by a restart")
    if answer.code != ResponseCode.SUCCESS:
        raise RemoteError(answer.code, f"broker {address}: {answer.remark or code_name(answer.code)}")


@click.command("updateBrokerConfig")
@namesrv_option
@click.option("-b", "--brokerAddr", "broker", help="One broker's address.")
@click.option("-c", "--clusterName", "cluster", help="Every master of this cluster (with -a, every slave too).")
@click.option("-a", "--updateAllBroker", "all_brokers", default=None,
              help="With -c: the slaves too (mqadmin's option takes a value, which it ignores).")
@click.option("-k", "--key", required=True, help="The property's name.")
@click.option("-v", "--value", required=True, help="Its new value.")
@format_option
@pass_app
def update_broker_config(app: App, namesrv: str | None, broker: str | None, cluster: str | None,
                         all_brokers: str | None, key: str, value: str, fmt: str) -> None:
    """Change one property of a running RocketMQ broker (UPDATE_BROKER_CONFIG, 25, to the broker of -b, or
    to every master of -c's cluster, found on the name servers of -n; -a adds the slaves). RocketMQ's broker
    keeps the change in its configuration file and refuses the properties of its black list (NO_PERMISSION).
    mqctl's brokers refuse every change (REQUEST_CODE_NOT_SUPPORTED): they take one by a restart. With -c,
    a broker that refuses is named on stderr and the others are still asked; the exit code is then 4.

    \b
    Examples:
      mqctl updateBrokerConfig -n 127.0.0.1:9876 -b 127.0.0.1:10911 -k traceOn -v false
      mqctl updateBrokerConfig -n 127.0.0.1:9876 -c DefaultCluster -a true -k traceOn -v false --format mqadmin
    """
    if bool(broker) == bool(cluster):
        raise click.UsageError("give exactly one of -b brokerAddr and -c clusterName")
    key, value = key.strip(), value.strip()
    if not key or any(c in key for c in "=:\n\r \t") or any(c in value for c in "\n\r"):
        raise click.UsageError(f"-k must be a property name and -v one line: got {key!r}={value!r}")
    servers = _servers(app, namesrv, write=True)
    done: list[str] = []
    failed: list[RemoteError | MqctlError] = []
    try:
        targets = [broker.strip()] if broker else _masters(servers, str(cluster).strip(), all_brokers is not None)
        for address in targets:
            try:
                _update(servers, address, key, value)
                done.append(address)
            except MqctlError as exc:
                if broker:
                    raise
                failed.append(exc)
    finally:
        servers.remoting.close()
    _show_updates(app, fmt, key, value, done)
    for refusal in failed:
        app.error(str(refusal))
    if failed:
        raise click.exceptions.Exit(RemoteError.exit_code)


@terminal_safe
def _show_updates(app: App, fmt: str, key: str, value: str, done: list[str]) -> None:
    if fmt == "json":
        app.print_json({"key": key, "value": value, "updated": done})
    elif fmt == "mqadmin":
        app.print_text("".join(f"update broker config success, {address}\n" for address in done))
    else:
        for address in done:
            app.print(f"Broker {address}: {key}={value}")


COMMANDS = [get_broker_config, update_broker_config]
