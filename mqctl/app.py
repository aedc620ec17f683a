"""The object every command receives: output consoles, the chosen format, and error helpers."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape

from services.common.controller_client import ControllerClient, parse_addresses

FORMATS = ("table", "mqadmin", "json")


class App:
    def __init__(self, out: Console | None = None, err: Console | None = None) -> None:
        self.out = out or Console(highlight=False, soft_wrap=True)
        self.err = err or Console(stderr=True, highlight=False, soft_wrap=True)
        self.timeout = 5.0

    # ------------------------------------------------------------------ output
    def print_text(self, text: str) -> None:
        """Exact text (mqadmin format): no markup, no wrapping, no added newline."""
        self.out.file.write(text)
        self.out.file.flush()

    def print_json(self, doc: Any) -> None:
        self.out.file.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")
        self.out.file.flush()

    def print(self, renderable: Any) -> None:
        self.out.print(renderable)

    def info(self, message: str) -> None:
        self.err.print(message, markup=False)

    def warn(self, message: str) -> None:
        self.err.print(f"[yellow]Warning:[/yellow] {escape(message)}")

    def abort(self, message: str, code: int = 1) -> NoReturn:
        self.err.print(f"[red]Error:[/red] {escape(message)}", soft_wrap=True)
        sys.exit(code)

    # ------------------------------------------------------------------ clients
    def controller(self, addresses: str | None) -> ControllerClient:
        return ControllerClient(parse_addresses(addresses), timeout=self.timeout)

    # ------------------------------------------------------------------ watch mode
    def watch(self, show: Callable[[], None], interval: float | None, count: int | None) -> None:
        """Run ``show`` once, or every ``interval`` seconds (``count`` times if given) until Ctrl-C."""
        if interval is None and count is None:
            show()
            return
        period = interval if interval is not None else 3.0
        done = 0
        try:
            while True:
                show()
                done += 1
                if count is not None and done >= count:
                    return
                time.sleep(period)
        except KeyboardInterrupt:
            return


pass_app = click.make_pass_decorator(App, ensure=True)
