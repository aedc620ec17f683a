"""Root of the ``mqctl`` command line: mqadmin-style command names, one place mapping errors to exits.

Exit codes: 0 success · 1 anything else · 2 usage · 3 controller/broker unreachable · 4 the server
refused (its code name is printed). ``MQCTL_DEBUG=1`` prints the traceback of an error.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import click

from mqctl.app import App
from mqctl.commands import MODULE_OF
from mqctl.terminal import printable
from services.common import tls
from services.common.errors import MqctlError, RemoteError, UsageError


def kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


class AliasedGroup(click.Group):
    """Commands are registered under their mqadmin name (``getSyncStateSet``) and answer to the
    kebab-case alias (``get-sync-state-set``) and to any capitalisation. A command's module is imported
    when the command is first asked for (``MODULE_OF``): a command line loads only what it runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(MODULE_OF))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self._loaded(cmd_name)
        if command is not None:
            return command
        wanted = cmd_name.replace("-", "").replace("_", "").lower()
        for name in self.list_commands(ctx):
            if name.replace("-", "").lower() == wanted:
                return self._loaded(name)
        return None

    def _loaded(self, name: str) -> click.Command | None:
        if name not in self.commands and name in MODULE_OF:
            module = importlib.import_module(f"mqctl.commands.{MODULE_OF[name]}")
            for command in module.COMMANDS:
                self.add_command(command)
        return self.commands.get(name)

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        return (command.name if command else name), command, rest

    def invoke(self, ctx: click.Context) -> Any:
        """Map every error to one line on stderr and a stable exit code (here, so tests see it too)."""
        try:
            return super().invoke(ctx)
        except MqctlError as exc:
            _report(exc)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(130)
        except click.ClickException as exc:
            raise _terminal_safe(exc) from None
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, no traceback unless asked
            _report(exc)
            ctx.exit(1)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """The root's own options are parsed here, outside :meth:`invoke`."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:
            raise _terminal_safe(exc) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            rows.append((f"{name} ({kebab(name)})" if kebab(name) != name else name,
                         command.get_short_help_str(limit=70)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


#: services.common.wire.PROTOCOLS, spelled here so that starting the CLI does not load the wire's clients
#: (tests/unit/cli/test_lazy_commands.py keeps the two equal).
PROTOCOLS = ("auto", "http", "remoting")
TOKEN_CHARS = re.compile(r"[\x21-\x7e]+")
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


@click.group(cls=AliasedGroup, context_settings=CONTEXT)
@click.version_option(package_name="mqctl", prog_name="mqctl")
@click.option("--timeout", type=click.FloatRange(0.1, 600), default=5.0, show_default=True,
              help="Seconds to wait for a controller or broker answer (including leader lookup).")
@click.option("--token", envvar="MQCTL_TOKEN", default=None, metavar="TOKEN",
              help="Auth token for mutating calls when the cluster has one (or $MQCTL_TOKEN).")
@click.option("--protocol", type=click.Choice(PROTOCOLS), envvar="MQCTL_PROTOCOL", default="auto", show_default=True,
              help="auto: HTTP to mqctl servers, RocketMQ remoting to servers that speak only that (found on "
                   "first contact); http or remoting: only that one (or $MQCTL_PROTOCOL).")
@click.option("--tls", "use_tls", is_flag=True, envvar="MQCTL_TLS",
              help="Speak TLS to the servers (on when --tls-ca is given; or $MQCTL_TLS=1).")
@click.option("--tls-ca", envvar="MQCTL_TLS_CA", default=None, metavar="FILE",
              help="CA certificate(s), PEM, that the servers' certificates must chain to (or $MQCTL_TLS_CA); "
                   "without it, the system's CAs.")
@click.option("--tls-cert", envvar="MQCTL_TLS_CERT", default=None, metavar="FILE",
              help="Client certificate, PEM, for servers that require one (or $MQCTL_TLS_CERT).")
@click.option("--tls-key", envvar="MQCTL_TLS_KEY", default=None, metavar="FILE",
              help="The client certificate's private key, PEM, if not in --tls-cert's file (or $MQCTL_TLS_KEY).")
@click.pass_context
def cli(ctx: click.Context, timeout: float, token: str | None, protocol: str, use_tls: bool,
        tls_ca: str | None, tls_cert: str | None, tls_key: str | None) -> None:
    """mqctl: RocketMQ 5 controller mode — Raft controllers, replicated brokers, mqadmin-style admin.

    \b
    Examples:
      mqctl quickstart                         # start a local cluster and show a failover
      mqctl getControllerMetaData -a 127.0.0.1:9878
      mqctl getSyncStateSet -a 127.0.0.1:9878 -b broker-a
      mqctl help electMaster
    """
    app = ctx.ensure_object(App)
    app.timeout = timeout
    app.token = _checked_token(token)
    app.protocol = protocol
    if tls_key and not tls_cert:
        raise UsageError("--tls-key needs --tls-cert")
    on = use_tls or bool(tls_ca or tls_cert)
    try:
        context = tls.client_context(tls_ca or "", tls_cert or "", tls_key or "") if on else None
    except UsageError as exc:  # named by property: name the flags instead
        message = exc.remark
        for prop, flag in (("tls.client.trustCertPath", "--tls-ca"), ("tls.client.certPath", "--tls-cert"),
                           ("tls.client.keyPath", "--tls-key"),
                           (" or with tls.client.keyPassword", "")):
            message = message.replace(prop, flag)
        raise UsageError(message) from None
    tls.use_client(context, with_cert=bool(tls_cert))


def _checked_token(token: str | None) -> str | None:
    """A bearer token is visible ASCII (RFC 6750); say so instead of failing inside the HTTP library.
    The token itself is never printed."""
    if token and not TOKEN_CHARS.fullmatch(token):
        raise UsageError("the auth token (--token or $MQCTL_TOKEN) may hold only visible ASCII characters: "
                         "no spaces, control characters or non-ASCII letters")
    return token or None


@cli.command("help")
@click.argument("command", required=False)
@click.pass_context
def help_command(ctx: click.Context, command: str | None) -> None:
    """Show help for a command.

    \b
    Examples:
      mqctl help
      mqctl help getSyncStateSet
    """
    root = ctx.parent
    assert root is not None
    if command is None:
        click.echo(root.get_help())
        return
    group = root.command
    assert isinstance(group, click.Group)
    target = group.get_command(root, command)
    if target is None:
        raise click.UsageError(f"The sub command {command} not exist.", ctx)
    with click.Context(target, info_name=target.name, parent=root) as sub:
        click.echo(target.get_help(sub))


@cli.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    \b
    Examples:
      eval "$(mqctl completion bash)"              # in ~/.bashrc
      mqctl completion zsh > ~/.zfunc/_mqctl
      mqctl completion fish > ~/.config/fish/completions/mqctl.fish
    """
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    assert cls is not None
    click.echo(cls(cli, {}, "mqctl", "_MQCTL_COMPLETE").source())


def main(argv: Sequence[str] | None = None) -> Any:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return cli.main(args=args, prog_name="mqctl")
    except KeyboardInterrupt:
        sys.exit(130)


def _terminal_safe(exc: click.ClickException) -> click.ClickException:
    """click quotes some user input raw ("Got unexpected extra argument (...)"): escape control characters."""
    vars(exc)["message"] = printable(exc.message)  # click types it Final; it is read only when shown
    return exc


def _report(exc: BaseException) -> None:
    if os.environ.get("MQCTL_DEBUG"):
        traceback.print_exc()
    message = str(exc) if isinstance(exc, RemoteError) else getattr(exc, "remark", None) or str(exc)
    if not isinstance(exc, MqctlError):
        message = f"unexpected {type(exc).__name__}: {message} (set MQCTL_DEBUG=1 for a traceback)"
    App().error(message)


if __name__ == "__main__":
    main()
