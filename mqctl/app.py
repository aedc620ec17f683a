"""The object every command receives: output consoles, the chosen format, and error helpers."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import click
from rich.console import Console, Group
from rich.text import Text

from mqctl.terminal import printable, printable_layout

if TYPE_CHECKING:  # the clients are imported by the commands that use them: a command line loads only its own
    import httpx

    from services.common.broker_client import BrokerClient
    from services.common.controller_client import ControllerClient
    from services.common.namesrv_client import NameServerClient

FORMATS = ("table", "mqadmin", "json")


class App:
    #: Tests replace this with an ``httpx.MockTransport`` so commands run without a network.
    transport: httpx.BaseTransport | None = None

    def __init__(self, out: Console | None = None, err: Console | None = None) -> None:
        # Markup and emoji codes are never interpreted: strings printed are data (names, addresses and
        # remarks from users and servers), and styles are given as Text styles instead.
        self.out = out or Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
        self.err = err or Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)
        self.timeout = 5.0
        self.token: str | None = None
        self.protocol = "auto"

    # ------------------------------------------------------------------ output
    def print_text(self, text: str) -> None:
        """Exact text (mqadmin format): no markup, no wrapping, no added newline; control characters other
        than the layout's newlines and tabs are escaped (the values in it are already clean)."""
        self.out.file.write(printable_layout(text))
        self.out.file.flush()

    def print_json(self, doc: Any) -> None:
        self.out.file.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")
        self.out.file.flush()

    def print(self, renderable: Any) -> None:
        self.out.print(printable_layout(renderable) if isinstance(renderable, str) else renderable)

    def info(self, message: str) -> None:
        self.err.print(Text(printable(message)))

    def warn(self, message: str) -> None:
        self.err.print(Text.assemble(("Warning:", "yellow"), " ", printable(message)))

    def error(self, message: str) -> None:
        """The one ``Error: <message>`` line of a failed command."""
        self.err.print(Text.assemble(("Error:", "red"), " ", printable(message)))

    def abort(self, message: str, code: int = 1) -> NoReturn:
        self.error(message)
        sys.exit(code)

    # ------------------------------------------------------------------ clients
    def controller(self, addresses: str | None) -> ControllerClient:
        from services.common.controller_client import ControllerClient, parse_addresses

        return ControllerClient(parse_addresses(addresses), timeout=self.timeout, transport=self.transport,
                                token=self.token, protocol=self.protocol)

    def brokers(self, given: str | None = None) -> BrokerClient:
        """A broker client; the auth token goes only to ``given``, the address the operator named."""
        from services.common.broker_client import BrokerClient

        return BrokerClient(self.timeout, transport=self.transport, token=self.token,
                            trusted=[given] if given else [], protocol=self.protocol)

    def namesrv(self, addresses: str) -> NameServerClient:
        """A name server client (mqadmin's ``-n``): RocketMQ's name servers, or our controllers."""
        from services.common.controller_client import parse_addresses
        from services.common.namesrv_client import NameServerClient

        return NameServerClient(parse_addresses(addresses), timeout=self.timeout)

    # ------------------------------------------------------------------ watch mode
    def watch(self, show: Callable[[], None], interval: float | None, count: int | None,
              in_place: bool = True) -> bool:
        """Run ``show`` once, or every ``interval`` seconds (``count`` times if given) until Ctrl-C.
        Returns False if Ctrl-C stopped it (a clean stop), True if it ran to the end.

        On a terminal, table output refreshes in place (rich Live); otherwise (pipes, mqadmin and json
        formats) each refresh is printed after the previous one, as mqadmin does."""
        if interval is None and count is None:
            show()
            return True
        period = interval if interval is not None else 3.0
        try:
            if in_place and self.out.is_terminal:
                self._watch_live(show, period, count)
            else:
                self._watch_append(show, period, count)
        except KeyboardInterrupt:
            return False
        return True

    def _watch_append(self, show: Callable[[], None], period: float, count: int | None) -> None:
        done = 0
        while True:
            show()
            done += 1
            if count is not None and done >= count:
                return
            time.sleep(period)

    def _watch_live(self, show: Callable[[], None], period: float, count: int | None) -> None:
        from rich.live import Live

        done = 0
        with Live(console=self.out, auto_refresh=False, transient=False) as live:
            while True:
                with self.out.capture() as captured:
                    show()
                stamp = time.strftime("%H:%M:%S")
                live.update(Group(Text.from_ansi(captured.get()),
                                  Text(f"refreshed {stamp}, every {period:g}s; Ctrl-C to stop", style="dim")),
                            refresh=True)
                done += 1
                if count is not None and done >= count:
                    return
                time.sleep(period)


pass_app = click.make_pass_decorator(App, ensure=True)
