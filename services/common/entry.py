"""What the services' own command lines share (``python -m services.controller`` / ``services.broker``,
the same commands ``mqctl startController`` / ``startBroker`` run): ``KEY=VALUE`` overrides, warnings and
the printed configuration, and running a command on its own with mqctl's error rule (one ``Error:`` line,
the error's exit code, no traceback unless MQCTL_DEBUG is set)."""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

import click

from services.common.errors import MqctlError, UsageError
from services.common.text import java_text, printable, printable_layout

__all__ = ["overrides", "print_properties", "run_command", "warn"]


def overrides(options: tuple[str, ...]) -> dict[str, str]:
    """``-o KEY=VALUE`` options as a dict; a usage error names a malformed one."""
    result = {}
    for item in options:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"bad -o value {item!r}: expected KEY=VALUE")
        result[key.strip()] = value.strip()
    return result


def warn(message: str) -> None:
    click.echo(f"Warning: {printable(message)}", err=True)


def print_properties(address: str, properties: dict[str, Any]) -> None:
    """The configuration as mqadmin prints a server's (``-p``): a banner, then ``key<pad>=  value``."""
    text = f"============{address}============\n"
    text += "".join(f"{key:<50}=  {java_text(value)}\n" for key, value in properties.items())
    sys.stdout.write(printable_layout(text))
    sys.stdout.flush()


def run_command(command: click.Command, argv: list[str], prog: str) -> int:
    """Run ``command`` as a program; its exit code."""
    try:
        result = command.main(args=argv, prog_name=prog, standalone_mode=False)
    except MqctlError as exc:
        _report(exc)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return result if isinstance(result, int) else 0


def _report(exc: BaseException) -> None:
    if os.environ.get("MQCTL_DEBUG"):
        traceback.print_exc()
    click.echo(f"Error: {printable(str(exc))}", err=True)
