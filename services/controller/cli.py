"""``startController``: one controller node in the foreground. The same command is ``mqctl startController``
and ``python -m services.controller`` (which process supervisors and local clusters run)."""

from __future__ import annotations

import click

from services.common.entry import overrides, print_properties, warn

__all__ = ["start_controller"]


@click.command("startController", context_settings={"ignore_unknown_options": False})
@click.option("-c", "--configFile", "config_file", type=click.Path(dir_okay=False),
              help="RocketMQ-style properties file (controllerDLegerPeers, controllerDLegerSelfId, ...).")
@click.option("--peers", help="Override controllerDLegerPeers, e.g. 'n0-127.0.0.1:9878;n1-127.0.0.1:9868'.")
@click.option("--self-id", "self_id", help="Override controllerDLegerSelfId, e.g. n0.")
@click.option("--store-path", "store_path", help="Override controllerStorePath.")
@click.option("-o", "--option", "options", multiple=True, metavar="KEY=VALUE",
              help="Override any property (repeatable), e.g. -o enableElectUncleanMaster=true.")
@click.option("-p", "--printConfigItem", "print_config", is_flag=True,
              help="Print the effective configuration and exit.")
def start_controller(config_file: str | None, peers: str | None, self_id: str | None,
                     store_path: str | None, options: tuple[str, ...], print_config: bool) -> None:
    """Start a controller node (runs in the foreground until SIGTERM/Ctrl-C).

    With no arguments it runs a single-node controller on 127.0.0.1:9878 storing its Raft log under
    ~/mqctl/controller. Clients talk to the peer address; Raft listens on that port + 1.

    \b
    Examples:
      mqctl startController
      mqctl startController -c conf/controller-n0.conf
      mqctl start-controller --peers 'n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858' \\
          --self-id n1 --store-path /var/lib/mqctl/n1
    """
    from services.controller.server import build_config, run  # the server's imports only when it runs

    settings = overrides(options)
    for key, value in (("controllerDLegerPeers", peers), ("controllerDLegerSelfId", self_id),
                       ("controllerStorePath", store_path)):
        if value:
            settings[key] = value
    warnings: list[str] = []
    config = build_config(config_file, settings, warnings)
    for warning in warnings:
        warn(warning)
    if print_config:
        print_properties(config.self_peer().address, config.as_properties())
        return
    run(config)

