"""``mqctl quickstart``: a local cluster, messages, a master killed with SIGKILL, and the proof that
every acknowledged message survived."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from mqctl import render, render_broker
from mqctl.app import App
from mqctl.cluster import LocalCluster, wait_until
from services.broker import contract as bc
from services.common.answers import checked
from services.common.broker_client import BrokerClient, replica_addresses
from services.common.errors import MqctlError

GROUP = "broker-a"
TOPIC = "QuickstartTopic"


@click.command("quickstart")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Where to keep configs, logs and stores (default: a temporary directory, removed after).")
@click.option("--keep", is_flag=True, help="Keep the data directory afterwards.")
@click.option("--messages", type=click.IntRange(10, 1_000_000), default=2000, show_default=True,
              help="How many messages to send before the failover.")
@click.option("--report/--no-report", "with_report", default=True, show_default=True,
              help="Finish with 'mqctl report' on Spark local[*] (needs Java 17).")
@click.option("--report-dir", type=click.Path(file_okay=False), default=None,
              help="Where to write the report (default: ./mqctl-report/<UTC time>).")
@click.pass_context
def quickstart(ctx: click.Context, data_dir: str | None, keep: bool, messages: int, with_report: bool,
               report_dir: str | None) -> None:
    """Start 3 controllers and a 3-replica broker group, send messages, SIGKILL the master, and check
    that a new master took over with every acknowledged message.

    Every process is real: Raft between three controller processes, replication over TCP between three
    broker processes, all on 127.0.0.1. Exits 0 only if every check held; stops everything it started.

    \b
    Examples:
      mqctl quickstart
      mqctl quickstart --data-dir /tmp/mqctl-demo --keep --messages 10000
    """
    app = ctx.ensure_object(App)
    root = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="mqctl-quickstart-"))
    cluster = LocalCluster(root)
    try:
        _run(app, cluster, messages)
        if with_report:
            _report(ctx, app, cluster, report_dir)
        app.print(Text("\nAll checks passed.", style="bold green"))
    finally:
        app.info("stopping the cluster")
        cluster.stop()
        if data_dir is None and not keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            app.info(f"configs, logs and stores kept in {root}")


def _step(app: App, text: str) -> None:
    app.print(Text(f"\n==> {text}", style="bold cyan"))


def _run(app: App, cluster: LocalCluster, count: int) -> None:
    _step(app, "Starting 3 controllers (Raft) and broker group broker-a with 3 replicas on 127.0.0.1")
    cluster.configure()
    started = time.monotonic()
    cluster.start()
    app.print(f"cluster up in {time.monotonic() - started:.1f}s; controllers at {cluster.controller_addresses}")
    with cluster.controller_cluster.client() as client:  # type: ignore[union-attr]
        render.show_metadata(app, "table", client.metadata().shown())
    master = cluster.master_of(GROUP)
    assert master is not None
    _step(app, f"Sending {count} messages to the master {master.address} (allAckInSyncStateSet=true)")
    acked = _send(app, master.address, count)
    render.show_sync_state(app, "table", [cluster.sync_state(GROUP)])
    before = cluster.sync_state(GROUP)

    _step(app, f"Killing the master {master.address} with SIGKILL")
    killed_at = time.monotonic()
    master.kill()
    state = wait_until(lambda: (s := cluster.sync_state(GROUP)).get("masterBrokerId") not in (None, before["masterBrokerId"])
                       and s, 60, "a new master")
    new_master = cluster.master_of(GROUP)
    assert new_master is not None
    with BrokerClient(3.0) as client:
        wait_until(lambda: client.runtime_info(new_master.address).role == "MASTER",
                   30, "the new master to take its role")
        wait_until(lambda: _put_ok(client, new_master.address), 30, "the new master to accept writes")
    app.print(Text(f"new master: broker {state['masterBrokerId']} ({state['masterAddress']}), masterEpoch "
                   f"{before['masterEpoch']} → {state['masterEpoch']}, writable {time.monotonic() - killed_at:.1f}s "
                   "after the kill", style="green"))
    if state["masterEpoch"] != before["masterEpoch"] + 1:
        raise MqctlError(f"expected masterEpoch {before['masterEpoch'] + 1}, got {state['masterEpoch']}")
    render.show_sync_state(app, "table", [cluster.sync_state(GROUP)])
    _show_epochs(app, cluster)

    _step(app, "Checking that every acknowledged message is readable from the new master")
    readable = _read_all(new_master.address)
    missing = [b for b in acked if b not in readable]
    if missing:
        raise MqctlError(f"{len(missing)} acknowledged messages are missing, e.g. {missing[:3]}")
    app.print(Text(f"all {len(acked)} acknowledged messages are readable", style="green"))


def _report(ctx: click.Context, app: App, cluster: LocalCluster, report_dir: str | None) -> None:
    from mqctl.commands.report import INSTALL_HINT, default_output, missing_report_extras, report

    missing = missing_report_extras()
    if missing:
        app.warn(f"skipping the report: it needs {' and '.join(missing)} ({INSTALL_HINT})")
        return

    _step(app, "Summarising the epoch history with 'mqctl report' (Spark local[*])")
    output = Path(report_dir) if report_dir else default_output()
    ctx.invoke(report, spark_master="local[*]", controller_address=cluster.controller_addresses, cluster_name=None,
               input_dir=None, output_dir=str(output), as_of=None, fmt="table", confs=(), verbose=False)
    page = (output / "report.html").resolve()
    if not page.exists():
        raise MqctlError(f"the report did not produce {page}")
    app.print(Text(f"report: {page}", style="bold"))


def _send(app: App, address: str, count: int) -> list[str]:
    acked: list[str] = []
    columns = (TextColumn("sending"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with BrokerClient(10.0) as client, Progress(*columns, console=app.out, transient=False) as progress:
        task = progress.add_task("send", total=count)
        batch = 50
        for start in range(0, count, batch):
            bodies = [f"quickstart-{i}" for i in range(start, min(count, start + batch))]
            request = bc.SendMessagesRequest(messages=[bc.SendMessageRequest(topic=TOPIC, body=b, keys=b) for b in bodies])
            env = client.request(address, "POST", bc.SEND_MESSAGES, json=request.model_dump(exclude_none=True))
            sent = checked(bc.SendBatchResult, env.data, f"broker {address}")
            if sent.status != "PUT_OK":
                raise MqctlError(f"send failed: {sent.status} {env.remark}")
            acked.extend(bodies)
            progress.update(task, advance=len(bodies))
    return acked


def _put_ok(client: BrokerClient, address: str) -> bool:
    env = client.request(address, "POST", bc.SEND_MESSAGE, json={"topic": "QuickstartProbe", "body": "probe"},
                         accept=tuple(range(1, 3000)))
    return bool(env.data and env.data.get("status") == "PUT_OK")


def _read_all(address: str) -> set[str]:
    bodies: set[str] = set()
    with BrokerClient(10.0) as client:
        for qid in range(4):
            offset = 0
            while True:
                pulled = client.pull(address, TOPIC, qid, offset, 1024)
                bodies.update(m.body or "" for m in pulled.messages)
                if pulled.status != "FOUND":
                    break
                offset = pulled.nextBeginOffset
    return bodies


def _show_epochs(app: App, cluster: LocalCluster) -> None:
    rows = []
    state = cluster.sync_state(GROUP)
    with BrokerClient(2.0) as client:
        for broker_id, address in replica_addresses(state):
            base = {"clusterName": state["clusterName"], "brokerName": GROUP, "brokerAddr": address, "brokerId": broker_id}
            try:
                cache = client.epoch_cache(address)
                rows.append({**base, "role": cache.role, "epochEntries": [e.model_dump() for e in cache.epochEntries],
                             "maxOffset": cache.maxOffset, "confirmOffset": cache.confirmOffset, "reachable": True})
            except MqctlError as exc:
                rows.append({**base, "role": None, "epochEntries": [], "maxOffset": None, "confirmOffset": None,
                             "reachable": False, "error": str(exc)})
    render_broker.show_epochs(app, "table", rows)


COMMANDS = [quickstart]
