"""Controller commands: startController and the mqadmin controller admin commands."""

from __future__ import annotations

import click

from mqctl import render
from mqctl.app import App, pass_app
from mqctl.options import controller_option, format_option, watch_options
from services.common.controller_client import parse_addresses
from services.common.errors import UnreachableError, UsageError
from services.controller.cli import start_controller


# ---------------------------------------------------------------------- getControllerMetaData
@click.command("getControllerMetaData")
@controller_option
@watch_options
@format_option
@pass_app
def get_controller_metadata(app: App, controller_address: str | None, interval: float | None, count: int | None,
                            fmt: str) -> None:
    """Show the controller group: its peers and which one leads (any node answers).

    \b
    Examples:
      mqctl getControllerMetaData -a 127.0.0.1:9878
      mqctl getControllerMetaData -a '127.0.0.1:9878;127.0.0.1:9868' --format json
      mqctl getControllerMetaData -i 1          # watch the leader change during a drill
    """
    with app.controller(controller_address) as client:
        def show() -> None:
            render.show_metadata(app, fmt, client.metadata().shown())
        app.watch(show, interval, count, in_place=fmt == "table")


# ---------------------------------------------------------------------- getSyncStateSet
@click.command("getSyncStateSet")
@controller_option
@click.option("-b", "--brokerName", "broker_names", multiple=True,
              help="Broker name (repeatable); takes precedence over -c.")
@click.option("-c", "--clusterName", "cluster_name", help="Every broker-set of this cluster.")
@click.option("-n", "--namesrvAddr", "namesrv", metavar="ADDR",
              help="With -c: the cluster's broker-sets come from this name server (as mqadmin does); "
                   "without it the controller is asked.")
@watch_options
@format_option
@pass_app
def get_sync_state_set(app: App, controller_address: str | None, broker_names: tuple[str, ...],
                       cluster_name: str | None, namesrv: str | None, interval: float | None, count: int | None,
                       fmt: str) -> None:
    """Show master, epochs and SyncStateSet of broker-sets, with the liveness the controller uses.

    \b
    Examples:
      mqctl getSyncStateSet -a 127.0.0.1:9878 -b broker-a
      mqctl getSyncStateSet -c DefaultCluster --format mqadmin
      mqctl getSyncStateSet -b broker-a -i 2 --count 5
      mqctl getSyncStateSet -a 10.0.0.5:9878 -n 10.0.0.5:9876 -c DefaultCluster   # a RocketMQ cluster
    """
    if not broker_names and not cluster_name:
        raise UsageError("give -b brokerName or -c clusterName")
    if namesrv and not broker_names:
        with app.namesrv(namesrv) as names:
            broker_names = tuple(bs["brokerName"] for bs in names.broker_sets(None, cluster_name))
    with app.controller(controller_address) as client:
        def show() -> None:
            brokers = [b.model_dump() for b in client.sync_state_data(broker_names, cluster_name).brokers]
            missing = [n for n in broker_names if n not in {b["brokerName"] for b in brokers}]
            render.show_sync_state(app, fmt, brokers)
            if fmt == "mqadmin":
                return  # mqadmin prints nothing for a broker-set the controller does not know, and succeeds
            if missing:
                raise UsageError(f"broker-set {', '.join(missing)} is not known to the controller")
            if not brokers:
                raise UsageError(f"cluster {cluster_name} has no broker-set registered in the controller")
        app.watch(show, interval, count, in_place=fmt == "table")


# ---------------------------------------------------------------------- electMaster
@click.command("electMaster")
@controller_option
@click.option("-c", "--clusterName", "cluster_name", required=True, help="Cluster name.")
@click.option("-bn", "--brokerName", "broker_name", required=True, help="Broker name.")
@click.option("-b", "--brokerId", "broker_id", type=click.IntRange(min=1), required=True,
              help="Controller broker id to make master.")
@format_option
@pass_app
def elect_master(app: App, controller_address: str | None, cluster_name: str, broker_name: str,
                 broker_id: int, fmt: str) -> None:
    """Make the given broker the master of its broker-set (admin election).

    The broker must be alive and in the SyncStateSet (or unclean election must be enabled on the
    controller). Electing the broker that is already master fails with CONTROLLER_MASTER_STILL_EXIST.

    \b
    Examples:
      mqctl electMaster -a 127.0.0.1:9878 -c DefaultCluster -bn broker-a -b 2
    """
    with app.controller(controller_address) as client:
        elected = client.elect_master(cluster_name, broker_name, broker_id)
    # mqadmin echoes the names it was given, whatever the answer says
    render.show_elect(app, fmt, {**elected.shown(), "clusterName": cluster_name, "brokerName": broker_name})


# ---------------------------------------------------------------------- cleanBrokerMetadata
@click.command("cleanBrokerMetadata")
@controller_option
@click.option("-bn", "--brokerName", "broker_name", required=True, help="Broker name.")
@click.option("-b", "--brokerControllerIdsToClean", "ids", help="Ids to clean, ';'-separated (e.g. '1;2').")
@click.option("-c", "--clusterName", "cluster_name", help="Cluster name (required unless -l).")
@click.option("-l", "--cleanLivingBroker", "clean_living", is_flag=True,
              help="Clean even if the brokers are alive.")
@format_option
@pass_app
def clean_broker_metadata(app: App, controller_address: str | None, broker_name: str, ids: str | None,
                          cluster_name: str | None, clean_living: bool, fmt: str) -> None:
    """Delete broker metadata from the controller (all of a broker-set, or some ids).

    \b
    Examples:
      mqctl cleanBrokerMetadata -a 127.0.0.1:9878 -c DefaultCluster -bn broker-a -b '3'
      mqctl cleanBrokerMetadata -bn broker-a -l
    """
    if not clean_living and not cluster_name:
        raise UsageError("cleanLivingBroker option is false, clusterName option can not be empty.")
    if ids:
        bad = [p for p in ids.split(";") if p.strip() and not p.strip().isdigit()]
        if bad:
            raise UsageError(f"bad broker id {bad[0]!r} in -b: expected ids like '1;2;3'")
    with app.controller(controller_address) as client:
        client.clean_broker_data(cluster_name, broker_name, ids, clean_living)
    render.show_cleaned(app, fmt, {"clusterName": cluster_name, "brokerName": broker_name,
                                   "brokerControllerIdsToClean": ids, "cleanLivingBroker": clean_living,
                                   "success": True})


# ---------------------------------------------------------------------- controller config
@click.command("getControllerConfig")
@controller_option
@format_option
@pass_app
def get_controller_config(app: App, controller_address: str | None, fmt: str) -> None:
    """Show the configuration of every listed controller node.

    \b
    Examples:
      mqctl getControllerConfig -a '127.0.0.1:9878;127.0.0.1:9868'
    """
    addresses = parse_addresses(controller_address)
    configs, failed = [], []
    with app.controller(controller_address) as client:
        for address in addresses:
            try:
                config = client.config_of(address)
            except UnreachableError:
                failed.append(address)
                continue
            configs.append((address, config))
    render.show_configs(app, fmt, configs)
    if failed:
        raise UnreachableError(f"controller {', '.join(failed)} did not answer", failed)


@click.command("updateControllerConfig")
@controller_option
@click.option("-k", "--key", required=True, help="Property name, e.g. enableElectUncleanMaster.")
@click.option("-v", "--value", required=True, help="New value.")
@format_option
@pass_app
def update_controller_config(app: App, controller_address: str | None, key: str, value: str, fmt: str) -> None:
    """Change a property on every listed controller node (persisted across restarts).

    \b
    Examples:
      mqctl updateControllerConfig -a '127.0.0.1:9878;127.0.0.1:9868;127.0.0.1:9858' \\
          -k enableElectUncleanMaster -v true
    """
    addresses = parse_addresses(controller_address)
    with app.controller(controller_address) as client:
        for address in addresses:
            client.update_config_of(address, key, value)
    render.show_config_updated(app, fmt, addresses, key, value)


COMMANDS = [start_controller, get_controller_metadata, get_sync_state_set, elect_master,
            clean_broker_metadata, get_controller_config, update_controller_config]
