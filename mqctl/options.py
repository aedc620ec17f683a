"""Options several command modules share. Kept light (click and the app's format names only), so that a
command's module can take them without importing another command's dependencies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from mqctl.app import FORMATS

__all__ = ["CONTROLLER_ADDR_HELP", "controller_option", "format_option", "watch_options"]

F = TypeVar("F", bound=Callable[..., Any])

CONTROLLER_ADDR_HELP = ("Controller address(es), ';'-separated; any node works (the leader is found). "
                        "Default: $MQCTL_CONTROLLER_ADDR, then 127.0.0.1:9878.")


def controller_option(f: F) -> F:
    return click.option("-a", "--controllerAddress", "controller_address", metavar="ADDR",
                        help=CONTROLLER_ADDR_HELP)(f)


def format_option(f: F) -> F:
    return click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                        help="table: rich view; mqadmin: RocketMQ's exact text; json: one JSON document.")(f)


def watch_options(f: F) -> F:
    f = click.option("--count", type=click.IntRange(min=1), default=None,
                     help="With -i: stop after this many refreshes.")(f)
    return click.option("-i", "--interval", type=click.FloatRange(min=0.1), default=None,
                        help="Refresh every N seconds until Ctrl-C.")(f)
