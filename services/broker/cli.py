"""``startBroker``: one broker in the foreground. The same command is ``mqctl startBroker`` and
``python -m services.broker`` (which process supervisors and local clusters run)."""

from __future__ import annotations

import click

from services.common.entry import overrides, print_properties, warn

__all__ = ["start_broker"]


@click.command("startBroker")
@click.option("-c", "--configFile", "config_file", type=click.Path(dir_okay=False),
              help="RocketMQ-style properties file (brokerClusterName, brokerName, listenPort, controllerAddr...).")
@click.option("--cluster", "cluster", help="Override brokerClusterName.")
@click.option("--broker-name", "broker_name", help="Override brokerName.")
@click.option("--listen-port", "listen_port", type=int, help="Override listenPort (client API).")
@click.option("--ha-port", "ha_port", type=int, help="Override haListenPort (replication).")
@click.option("--store-path", "store_path", help="Override storePathRootDir.")
@click.option("--controller-addr", "controller_addr", help="Override controllerAddr ('a:p;b:p').")
@click.option("-o", "--option", "options", multiple=True, metavar="KEY=VALUE",
              help="Override any property (repeatable), e.g. -o flushDiskType=SYNC_FLUSH.")
@click.option("-p", "--printConfigItem", "print_config", is_flag=True,
              help="Print the effective configuration and exit.")
def start_broker(config_file: str | None, cluster: str | None, broker_name: str | None,
                 listen_port: int | None, ha_port: int | None, store_path: str | None,
                 controller_addr: str | None, options: tuple[str, ...], print_config: bool) -> None:
    """Start a broker in controller mode (runs in the foreground until SIGTERM/Ctrl-C).

    It registers with the controller (keeping a persistent broker id in <store>/brokerIdentity), takes
    the role the controller gives it, and refuses writes until it knows that role.

    \b
    Examples:
      mqctl startBroker -c conf/broker-a-n1.conf
      mqctl start-broker --broker-name broker-a --listen-port 10911 --ha-port 10912 \\
          --store-path /var/lib/mqctl/broker-a-1 --controller-addr '127.0.0.1:9878;127.0.0.1:9868'
    """
    from services.broker.server import build_config, run  # the server's imports only when it runs

    settings = overrides(options)
    for key, value in (("brokerClusterName", cluster), ("brokerName", broker_name),
                       ("listenPort", listen_port), ("haListenPort", ha_port), ("storePathRootDir", store_path),
                       ("controllerAddr", controller_addr)):
        if value is not None:
            settings[key] = str(value)
    warnings: list[str] = []
    config = build_config(config_file, settings, warnings)
    for warning in warnings:
        warn(warning)
    if print_config:
        print_properties(config.address, config.as_properties())
        return
    run(config, warnings)
