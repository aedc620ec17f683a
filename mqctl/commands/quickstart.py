"""``mqctl quickstart``: start a local controller group, kill its leader, show that it recovers."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import click
from rich.text import Text

from mqctl import render
from mqctl.app import App, pass_app
from mqctl.localcluster import ControllerCluster, wait_until
from services.common.errors import MqctlError


@click.command("quickstart")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Where to keep configs, logs and stores (default: a temporary directory, removed after).")
@click.option("--keep", is_flag=True, help="Keep the data directory afterwards.")
@pass_app
def quickstart(app: App, data_dir: str | None, keep: bool) -> None:
    """Start 3 controllers on 127.0.0.1, SIGKILL the Raft leader, and show a new leader taking over.

    Every process is real (Raft between three OS processes). The command exits 0 only if every check
    held, and stops everything it started.

    \b
    Examples:
      mqctl quickstart
      mqctl quickstart --data-dir /tmp/mqctl-demo --keep
    """
    root = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="mqctl-quickstart-"))
    cluster = ControllerCluster(root)
    try:
        _run(app, cluster)
    finally:
        cluster.stop()
        if data_dir is None and not keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            app.info(f"configs and logs kept in {root}")


def _step(app: App, text: str) -> None:
    app.print(Text(f"\n==> {text}", style="bold cyan"))


def _run(app: App, cluster: ControllerCluster) -> None:
    _step(app, "Starting 3 controller processes (Raft) on 127.0.0.1")
    cluster.configure()
    cluster.start()
    leader = cluster.leader(timeout=60)
    with cluster.client() as client:
        render.show_metadata(app, "table", client.call_any("GET", "/v1/controller/metadata").data)
    _step(app, f"Killing the leader {leader.node_id} ({leader.address}) with SIGKILL")
    started = time.monotonic()
    leader.kill()
    new_leader = cluster.leader(timeout=30)
    elapsed = time.monotonic() - started
    if new_leader.node_id == leader.node_id:
        raise MqctlError("the killed controller is still reported as leader")
    app.print(Text(f"New leader {new_leader.node_id} serving after {elapsed:.2f}s", style="green"))
    _step(app, f"Restarting {leader.node_id}; it rejoins as a follower")
    leader.start()
    with cluster.client() as client:
        wait_until(lambda: client.request_node(leader.address, "GET", "/v1/controller/metadata")
                   .data.get("controllerLeaderId") == new_leader.node_id, 30, f"{leader.node_id} to rejoin")
        render.show_metadata(app, "table", client.call_any("GET", "/v1/controller/metadata").data)
    app.print(Text("\nAll checks passed.", style="bold green"))


COMMANDS = [quickstart]
