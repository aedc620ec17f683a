"""``mqctl report``: the epoch-history report on Spark (embedded ``local[*]`` or a real cluster).

The command only wires things together: collect a dataset (``mqctl.collect``) unless
``--input`` names one, start Spark (``spark_reports.session``), run the job and write the files
(``spark_reports.pipeline``), show the result (``mqctl.render_report``). Spark is imported inside the
command body so the rest of the CLI starts fast, and is an extra (``mqctl[report]``): without it the command
says what to install (exit 2). docs/report.md has the dataset schema and every metric.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from mqctl import render_report
from mqctl.app import App, pass_app
from mqctl.options import controller_option
from services.common.controller_client import parse_addresses
from services.common.errors import MqctlError, UnreachableError, UsageError

if TYPE_CHECKING:
    from spark_reports.session import SessionOptions


@click.command("report")
@click.option("--spark-master", "spark_master", default="local[*]", show_default=True, metavar="URL",
              help="Any master URL Spark accepts, e.g. spark://host:7077 for a standalone cluster.")
@controller_option
@click.option("-c", "--clusterName", "cluster_name", help="Only this cluster's broker groups.")
@click.option("-n", "--namesrvAddr", "namesrv", metavar="ADDR",
              help="Find the brokers through this name server (106 GET_BROKER_CLUSTER_INFO) instead of the "
                   "controller, e.g. for a RocketMQ cluster whose controller is not its name server.")
@click.option("--input", "input_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Report on an existing dataset (events/ and epochs/) instead of collecting one.")
@click.option("--output", "output_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Where to write the report (and the collected dataset). Default: ./mqctl-report/<UTC time>.")
@click.option("--as-of", "as_of", type=click.IntRange(min=0), metavar="MS",
              help="Report as of this epoch time in ms. Default: now, or the newest event if later.")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True,
              help="table: rich tables; json: summary.json on stdout.")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting (repeatable), e.g. --conf spark.driver.memory=4g.")
@click.option("-v", "--verbose", is_flag=True, help="Show Spark's own logging and the Spark version.")
@pass_app
def report(app: App, spark_master: str, controller_address: str | None, cluster_name: str | None,
           namesrv: str | None, input_dir: str | None, output_dir: str | None, as_of: int | None, fmt: str, confs: tuple[str, ...],
           verbose: bool) -> None:
    """Summarise epoch histories: failovers and why, master tenures, under-replicated time, and
    replicas that disagree on their epochs, per broker group and cluster-wide.

    Without --input it first collects a dataset live: the controller's events (paged) and every
    broker's epoch file. It writes summary.json, groups.csv, groups.parquet, report.html (tables and
    an epoch timeline per group) and timeline.png under --output.

    \b
    Examples:
      mqctl report -a 127.0.0.1:9878 -c DefaultCluster
      mqctl report --input ./history --output ./out --format json
      mqctl report --input ./history --spark-master spark://127.0.0.1:7077 --conf spark.executor.memory=2g
    """
    require_report_extras()
    output = Path(output_dir) if output_dir else default_output()
    with translated():
        from spark_reports.paths import check_input, prepare_output, remove_created
        from spark_reports.session import SessionOptions, check_java, check_master_reachable, parse_conf

        options = SessionOptions(master=spark_master, conf=parse_conf(confs), verbose=verbose,
                                 log_file=output.resolve() / "spark-driver.log")
        # The user's paths and addresses first: each is a usage error before anything slow starts.
        if input_dir:
            check_input(Path(input_dir))
        else:
            parse_addresses(controller_address)
        created = prepare_output(output)
        try:
            check_master_reachable(spark_master)
            check_java()
            dataset = Path(input_dir) if input_dir else _collect(app, controller_address, cluster_name, namesrv,
                                                                 output)
        except BaseException:
            remove_created(created)  # nothing of this run is left behind when it stops before Spark
            raise
        if input_dir and controller_address:
            app.warn("-a is not used with --input")
        summary = _run(app, options, dataset, output, as_of, cluster_name if input_dir else None)
    render_report.show_report(app, fmt, summary)
    app.info(f"report written to {output}/ (summary.json, groups.csv, groups.parquet, report.html, timeline.png)")


#: What ``mqctl report`` needs beyond the base install (the ``report`` extra), by import name.
REPORT_MODULES = {"pyspark": "PySpark", "matplotlib": "matplotlib"}
INSTALL_HINT = "pip install 'mqctl[report]'"


def missing_report_extras() -> list[str]:
    """The report's libraries that are not installed (by name), found without importing them."""
    return [name for module, name in REPORT_MODULES.items() if importlib.util.find_spec(module) is None]


def require_report_extras() -> None:
    missing = missing_report_extras()
    if missing:
        raise UsageError(f"mqctl report needs {' and '.join(missing)}, which this install lacks: {INSTALL_HINT} "
                         "(Java 17 or 21 too)")


def default_output() -> Path:
    return Path("mqctl-report") / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _collect(app: App, controller_address: str | None, cluster: str | None, namesrv: str | None,
             output: Path) -> Path:
    from mqctl.collect import collect
    from spark_reports.paths import remove_tree_if_new

    directory = output / "dataset"
    existed = os.path.lexists(directory)
    try:
        with app.controller(controller_address) as client, app.brokers() as brokers:
            if namesrv:
                with app.namesrv(namesrv) as names:
                    result = collect(client, brokers, cluster, directory, app.err, namesrv=names)
            else:
                result = collect(client, brokers, cluster, directory, app.err)
    except BaseException:
        remove_tree_if_new(directory, existed)  # a partial dataset is no dataset
        raise
    for problem in result.unreachable:
        app.warn(f"no epochs from {problem}")
    app.info(f"collected {result.events} events and {result.epoch_entries} epoch entries from "
             f"{result.brokers} broker(s) into {directory}")
    return directory


def _run(app: App, options: SessionOptions, dataset: Path, output: Path, as_of: int | None,
         cluster: str | None) -> dict[str, Any]:
    from spark_reports.charts import preload
    from spark_reports.paths import dataset_bytes
    from spark_reports.pipeline import SMALL_INPUT_BYTES, run_report
    from spark_reports.session import build_session

    app.info(f"starting Spark ({options.master})")
    preload()  # the PNG's library loads while the JVM starts
    spark = build_session(dataclasses.replace(options, small_input=dataset_bytes(dataset) < SMALL_INPUT_BYTES))
    try:
        if options.verbose:
            app.info(f"Spark {spark.version}, master {spark.sparkContext.master}")
        result = run_report(spark, dataset, output, as_of, cluster,
                            meta={"sparkMaster": options.master, "clusterName": cluster})
    finally:
        spark.stop()
    if options.verbose:
        app.info("timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in result.timings.items()))
    return result.summary


@contextmanager
def translated() -> Iterator[None]:
    """spark_reports' errors → mqctl's, keeping their exit codes (2 input, 3 unreachable, 1 other)."""
    from spark_reports.errors import ReportError

    try:
        yield
    except ReportError as exc:
        kind: type[MqctlError] = {2: UsageError, 3: UnreachableError}.get(exc.exit_code, MqctlError)
        raise kind(exc.remark) from exc


COMMANDS = [report]
