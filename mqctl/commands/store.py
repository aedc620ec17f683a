"""``mqctl checkStore``: an offline check of a stopped broker's store (services/broker/store_check.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mqctl.app import App, pass_app
from services.common.errors import MqctlError, UsageError

if TYPE_CHECKING:
    from services.broker.store_check import StoreReport


class StoreDamaged(MqctlError):
    """The check found damage the broker will not repair by itself (exit 1)."""


def _printable(text: str) -> str:
    """File names under a store can hold anything: control characters are shown, never sent."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@click.command("checkStore")
@click.option("--store-dir", "store_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="The broker's storePathRootDir. Default: the one of -c.")
@click.option("-c", "--configFile", "config_file", type=click.Path(dir_okay=False),
              help="The broker's properties file: store paths and mappedFileSizeCommitLog come from it.")
@click.option("--segment-size", "segment_size", type=click.IntRange(min=4096), default=None,
              help="mappedFileSizeCommitLog. Default: from -c, else 67108864.")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True,
              help="table: one line per finding; json: one JSON document.")
@pass_app
def check_store(app: App, store_dir: str | None, config_file: str | None, segment_size: int | None,
                fmt: str) -> None:
    """Check a stopped broker's store without changing it: every commitlog record (CRC and fields, in
    every segment), the consume queues against the commitlog, the checkpoint, the epoch file and its
    .bak, and the identity files.

    Each finding says whether the broker repairs it by itself at its next start. Exit status: 0 if
    nothing needs the operator, 1 if something does (docs/operations.md says what to do), 2 for a
    usage error.

    \b
    Examples:
      mqctl checkStore --store-dir /var/lib/mqctl/broker-a-1
      mqctl checkStore -c broker-a-1.conf --format json
    """
    from services.broker.store_check import check_store as run_check

    root, size, epoch_file, identity_file, commitlog_dir = _paths(store_dir, config_file, segment_size)
    report = run_check(root, size, epoch_file, identity_file, commitlog_dir)
    if fmt == "json":
        app.print_json(report.as_json())
    else:
        _show(app, report)
    if report.damaged:
        raise StoreDamaged(f"{len(report.damaged)} damaged place(s) in {root} need the operator; see "
                           "docs/operations.md ('Damaged commitlog', 'Damaged epoch file')")


def _paths(store_dir: str | None, config_file: str | None,
           segment_size: int | None) -> tuple[Path, int, Path | None, Path | None, Path | None]:
    if config_file is None:
        if store_dir is None:
            raise UsageError("give --store-dir DIR or -c broker.conf")
        root = Path(os.path.expanduser(store_dir))
        if not root.is_dir():
            raise UsageError(f"store directory {root} does not exist")
        return root, segment_size or 64 * 2**20, None, None, None
    from services.broker.server import build_config

    config = build_config(config_file, {"storePathRootDir": store_dir} if store_dir else {})
    if not config.store_dir.is_dir():
        raise UsageError(f"store directory {config.store_dir} does not exist")
    return (config.store_dir, segment_size or config.mappedFileSizeCommitLog, config.epoch_file,
            config.identity_file, config.commitlog_dir)


def _show(app: App, report: StoreReport) -> None:
    lines = [f"store {report.store_dir}: commitlog [{report.min_offset}, {report.max_offset}) in "
             f"{report.segments} segment(s), {report.queues} consume queue(s), epochs "
             + (", ".join(f"{e}-{s}" for e, s in report.epochs) or "none")]
    for f in report.findings:
        where = f" offset {f.offset}" if f.offset is not None else ""
        kind = "repaired at start" if f.repaired_at_start else "DAMAGED"
        lines.append(f"{kind}: {f.path}{where}: {f.problem}")
    if not report.findings:
        lines.append("no damage found")
    app.print_text("".join(_printable(line) + "\n" for line in lines))


COMMANDS = [check_store]
