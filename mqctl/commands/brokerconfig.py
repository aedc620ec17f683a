"""mqadmin's getBrokerConfig: a broker's properties (GET_BROKER_CONFIG, 26), of one broker (-b) or of every
master and slave of a cluster (-c, found through the name servers of -n), from RocketMQ's brokers or ours;
``--format mqadmin`` prints what mqadmin prints.
"""

from __future__ import annotations

import click
from rich.table import Table

from mqctl.app import App, pass_app
from mqctl.commands.brokeradmin import _cluster
from mqctl.commands.namesrv import _Servers, _servers, namesrv_option
from mqctl.options import format_option
from mqctl.terminal import terminal_safe
from services.common.errors import ConfigError, MqctlError
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


COMMANDS = [get_broker_config]
