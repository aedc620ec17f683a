"""``mqctl cluster``: a local cluster of real controller and broker processes on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from mqctl import render
from mqctl.app import App, pass_app
from mqctl.cluster import LAYOUT_FILE, DevCluster
from services.common.errors import MqctlError, UsageError

DEFAULT_DATA_DIR = "~/mqctl/cluster"


def data_dir_option(f: Any) -> Any:
    return click.option("--data-dir", default=DEFAULT_DATA_DIR, show_default=True,
                        help="Directory holding the cluster's configs, logs, stores and cluster.json.")(f)


def _dir(path: str) -> Path:
    return Path(os.path.expanduser(path))


@click.group("cluster")
def cluster() -> None:
    """Run a local cluster (real processes on 127.0.0.1) for development, demos and drills.

    \b
    Examples:
      mqctl cluster up --controllers 3 --groups 1 --replicas 3
      mqctl cluster status
      mqctl cluster kill-master -b broker-a
      mqctl cluster restart broker-a-1
      mqctl cluster down
    """


@cluster.command("up")
@click.option("--controllers", type=click.IntRange(1, 9), default=3, show_default=True, help="Controller nodes.")
@click.option("--groups", type=click.IntRange(1, 26), default=1, show_default=True, help="Broker groups.")
@click.option("--replicas", type=click.IntRange(1, 9), default=3, show_default=True, help="Brokers per group.")
@click.option("--base-port", type=click.IntRange(1024, 60000), default=9870, show_default=True,
              help="First port; controllers use base, base+2, ... (Raft on +1), brokers follow.")
@data_dir_option
@pass_app
def up(app: App, controllers: int, groups: int, replicas: int, base_port: int, data_dir: str) -> None:
    """Start the cluster (or resume the one in --data-dir) and wait until every group is healthy.

    Healthy means: a controller leader, and every broker group with a master and all its replicas in
    the SyncStateSet. Configs (.conf) and logs are written under --data-dir.
    """
    root = _dir(data_dir)
    if (root / LAYOUT_FILE).exists():
        dev = DevCluster.load(root)
        app.info(f"resuming the cluster in {root}")
    else:
        if root.exists() and any(root.iterdir()):
            raise UsageError(f"{root} is not empty and holds no {LAYOUT_FILE}; choose another --data-dir or "
                             "empty it")
        dev = DevCluster.create(root, controllers, groups, replicas, base_port)
    dev.up()
    _show_status(app, dev)
    app.print(Text(f"\nCluster is up. Controllers: {dev.controller_addresses}", style="green"))
    app.print(f"Try: MQCTL_CONTROLLER_ADDR='{dev.controller_addresses}' mqctl getSyncStateSet -b "
              f"{dev.groups()[0]}")
    app.print(f"Console: http://{dev.controllers()[0].address}/console")


@cluster.command("status")
@data_dir_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@pass_app
def status(app: App, data_dir: str, fmt: str) -> None:
    """Show every node (running or not, role) and each group's master and SyncStateSet."""
    dev = DevCluster.load(_dir(data_dir))
    if fmt == "json":
        groups = []
        for group in dev.groups():
            try:
                groups.append(dev.sync_state(group))
            except MqctlError as exc:
                groups.append({"brokerName": group, "error": str(exc)})
        app.print_json({"dataDir": str(dev.data_dir), "nodes": dev.status(), "groups": groups})
        return
    _show_status(app, dev)


def _show_status(app: App, dev: DevCluster) -> None:
    table = Table(title=f"Local cluster in {dev.data_dir}", title_justify="left")
    for col in ("Node", "Kind", "Address", "PID", "Role"):
        table.add_column(col)
    for row in dev.status():
        role = row["role"] or ("stopped" if not row["running"] else "?")
        style = "green" if role in ("leader", "master") else "red" if role == "stopped" else ""
        table.add_row(row["name"], row["kind"], row["address"], str(row["pid"] or "-"), Text(role, style=style))
    app.print(table)
    try:
        render.show_sync_state(app, "table", [dev.sync_state(g) for g in dev.groups() if dev.sync_state(g)])
    except MqctlError as exc:
        app.warn(f"cannot read broker groups from the controllers: {exc}")


@cluster.command("down")
@data_dir_option
@click.option("--grace", type=click.FloatRange(0, 120), default=10.0, show_default=True,
              help="Seconds to wait after SIGTERM before SIGKILL.")
@pass_app
def down(app: App, data_dir: str, grace: float) -> None:
    """Stop every process of the cluster (SIGTERM, then SIGKILL after --grace). Data is kept."""
    dev = DevCluster.load(_dir(data_dir))
    forced = dev.down(grace)
    if forced:
        app.warn(f"had to SIGKILL: {', '.join(forced)}")
    app.print(Text(f"Cluster in {dev.data_dir} stopped (data kept; 'mqctl cluster up --data-dir {data_dir}' "
                   "resumes it).", style="green"))


@cluster.command("kill-master")
@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker group whose master to kill.")
@data_dir_option
@pass_app
def kill_master(app: App, broker_name: str, data_dir: str) -> None:
    """SIGKILL the current master of a broker group (for demos and failover drills)."""
    dev = DevCluster.load(_dir(data_dir))
    if broker_name not in dev.groups():
        raise UsageError(f"no broker group {broker_name!r}; groups: {', '.join(dev.groups())}")
    master = dev.master_of(broker_name)
    if master is None:
        raise MqctlError(f"{broker_name} has no master right now")
    pid = dev.kill_node(master)
    app.print(Text(f"Killed {master.name} ({master.address}, pid {pid}), master of {broker_name}, with SIGKILL.",
                   style="yellow"))


@cluster.command("restart")
@click.argument("node")
@data_dir_option
@pass_app
def restart(app: App, node: str, data_dir: str) -> None:
    """Restart one node (n0, broker-a-2, ...): stop it if running, then start it."""
    dev = DevCluster.load(_dir(data_dir))
    spec = dev.node(node)
    dev.stop_node(spec)
    dev.start_node(spec)
    app.print(Text(f"Restarted {spec.name} ({spec.address}).", style="green"))


COMMANDS = [cluster]
