"""resetMasterFlushOffset: set what a slave takes as its master's flushed offset (RocketMQ's 908
RESET_MASTER_FLUSH_OFFSET, over remoting), on our brokers and on a RocketMQ broker alike."""

from __future__ import annotations

import time

import click

from mqctl.app import App, pass_app
from mqctl.options import format_option
from services.common.addresses import check_address, split_address
from services.common.codes import ResponseCode, code_name
from services.common.errors import RemoteError, UnreachableError
from services.common.remoting_blocking import BlockingRemoting, signer
from services.remoting import broker_headers as bh
from services.remoting.command import make_request


@click.command("resetMasterFlushOffset")
@click.option("-b", "--brokerAddr", "broker_addr", required=True, metavar="HOST:PORT", help="The broker to reset.")
@click.option("-o", "--offset", type=click.IntRange(min=0), required=True, help="The offset to reset at.")
@format_option
@pass_app
def reset_master_flush_offset(app: App, broker_addr: str, offset: int, fmt: str) -> None:
    """Set the master flush offset a slave records (shown by haStatus as #MasterFlushOffset), as mqadmin's
    command of the same name. A broker that is master ignores it and still answers success, as RocketMQ's
    does. With an auth token the request is signed with it.

    \b
    Examples:
      mqctl resetMasterFlushOffset -b 127.0.0.1:10921 -o 0
      mqctl resetMasterFlushOffset -b 127.0.0.1:10921 -o 48176 --format mqadmin
    """
    address = check_address(broker_addr, "broker")
    host, port = split_address(address, lenient=True)
    header = bh.ResetMasterFlushOffsetHeader(master_flush_offset=offset)
    remoting = BlockingRemoting(signer=signer(app.token))
    try:
        answer = remoting.call(host, port, make_request(bh.RESET_MASTER_FLUSH_OFFSET, 0, header.to_ext_fields()),
                               time.monotonic() + app.timeout)
    except UnreachableError as exc:
        raise UnreachableError(f"broker {address}: {exc}", [address]) from None
    finally:
        remoting.close()
    if answer.code != ResponseCode.SUCCESS:
        raise RemoteError(answer.code, f"broker {address}: {answer.remark or code_name(answer.code)}")
    if fmt == "json":
        app.print_json({"brokerAddr": address, "masterFlushOffset": offset})
    else:
        click.echo(f"reset master flush offset to {offset} success")


COMMANDS = [reset_master_flush_offset]
