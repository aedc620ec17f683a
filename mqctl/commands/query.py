"""queryMsgByKey, as mqadmin's: the messages of a topic that carry a key. It finds the topic's broker groups
through the name servers of -n (RocketMQ's, or our controllers) and asks each group's master with
QUERY_MESSAGE (12), which RocketMQ's brokers and ours answer from their index of keys; as mqadmin does, it
keeps the messages whose topic is the one asked and whose keys hold the key.

``--format mqadmin`` prints what the mqadmin of the broker's version prints: from RocketMQ 5.4 on, a fourth
column, ``#IndexKey`` (the store time's hour, topic, ``K``, key, message id and commitlog offset).
"""

from __future__ import annotations

from dataclasses import dataclass

import click
from rich.table import Table

from mqctl.app import App, pass_app
from mqctl.commands.brokeradmin import _route, _select
from mqctl.commands.namesrv import _Servers, _servers, namesrv_option
from mqctl.javajson import FASTJSON2_FROM_VERSION
from mqctl.options import format_option
from mqctl.terminal import terminal_safe
from services.common.codes import ResponseCode, code_name
from services.common.errors import MqctlError, RemoteError
from services.remoting import broker_headers as bh
from services.remoting.command import make_request
from services.remoting.errors import BodyError
from services.remoting.message import PulledMessage, decode_pulled

__all__ = ["COMMANDS", "Found", "index_key"]

HOUR_MS = 3_600_000
#: mqadmin's default -m.
DEFAULT_MAX_NUM = 64


@dataclass(frozen=True)
class Found:
    """One message a broker answered, and that broker's version (which decides mqadmin's columns)."""

    message: PulledMessage
    version: int

    @property
    def msg_id(self) -> str:
        """MessageClientExt.getMsgId: the unique key the producer set, else the offset message id."""
        return self.message.properties.get("UNIQ_KEY") or self.message.msg_id


def index_key(found: Found, topic: str, key: str) -> str:
    """mqadmin 5.4+'s #IndexKey: the store time's hour, topic, K, key, message id, commitlog offset."""
    hour = found.message.store_timestamp - found.message.store_timestamp % HOUR_MS
    return f"{hour}@{topic}@K@{key}@{found.msg_id}@{found.message.commit_log_offset}"


def _ask(servers: _Servers, address: str, topic: str, key: str, max_num: int, begin: int, end: int) -> list[Found]:
    header = bh.QueryMessageRequestHeader(topic=topic, key=key, max_num=max_num, begin_timestamp=begin,
                                          end_timestamp=end)
    answer = servers.call(address, make_request(bh.QUERY_MESSAGE, 0, header.to_ext_fields()))
    if answer.code == ResponseCode.QUERY_NOT_FOUND:
        return []
    if answer.code != ResponseCode.SUCCESS:
        raise RemoteError(answer.code, f"broker {address}: {answer.remark or code_name(answer.code)}")
    try:
        return [Found(m, answer.version) for m in decode_pulled(answer.body or b"")]
    except BodyError as exc:
        raise MqctlError(f"broker {address} answered malformed messages: {exc}") from None


@click.command("queryMsgByKey")
@namesrv_option
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-k", "--msgKey", "key", required=True, help="One of the messages' keys.")
@click.option("-b", "--beginTimestamp", "begin", type=int, default=0, show_default=True,
              help="Stored at or after this time (epoch ms).")
@click.option("-e", "--endTimestamp", "end", type=int, default=2**63 - 1, show_default="no end",
              help="Stored at or before this time (epoch ms).")
@click.option("-m", "--maxNum", "max_num", type=click.IntRange(1, 2**31 - 1), default=DEFAULT_MAX_NUM,
              show_default=True, help="At most this many messages from each broker group (ours and RocketMQ's "
                                      "answer 64 at most).")
@click.option("-c", "--cluster", help="Only the broker groups of this cluster.")
@format_option
@pass_app
def query_msg_by_key(app: App, namesrv: str | None, topic: str, key: str, begin: int, end: int, max_num: int,
                     cluster: str | None, fmt: str) -> None:
    """Find the messages of a topic that carry a key: the topic's route from the name server, then
    QUERY_MESSAGE (12) to the master of each of its broker groups (a slave where a group has none), which
    answers from its index of keys, about a second behind the messages it confirmed. Prints each message's
    id, queue and queue offset.

    \b
    Examples:
      mqctl queryMsgByKey -n 127.0.0.1:9878 -t TopicTest -k order-42
      mqctl queryMsgByKey -n 127.0.0.1:9878 -t TopicTest -k order-42 -b 1795800000000 --format json
    """
    topic, key = topic.strip(), key.strip()
    servers = _servers(app, namesrv)
    try:
        addresses = [a for a in (_select(d) for d in _route(servers, topic).broker_datas
                                 if not cluster or d.cluster == cluster) if a]
        answers = [_ask(servers, address, topic, key, max_num, begin, end) for address in addresses]
    finally:
        servers.remoting.close()
    found = [f for answer in answers for f in answer
             if f.message.topic == topic and key in f.message.properties.get("KEYS", "").split(" ")]
    if not found:
        raise RemoteError(ResponseCode.QUERY_NOT_FOUND, f"no message of topic {topic} has the key {key}")
    _show(app, fmt, topic, key, found)


@terminal_safe
def _show(app: App, fmt: str, topic: str, key: str, found: list[Found]) -> None:
    if fmt == "json":
        app.print_json([{"msgId": f.msg_id, "queueId": f.message.queue_id,
                         "queueOffset": f.message.queue_offset, "commitLogOffset": f.message.commit_log_offset,
                         "storeTimestamp": f.message.store_timestamp, "keys": f.message.properties.get("KEYS", ""),
                         "tags": f.message.properties.get("TAGS", "")} for f in found])
    elif fmt == "mqadmin":
        wide = found[0].version >= FASTJSON2_FROM_VERSION
        if wide:
            text = f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40} {'#IndexKey':<200}\n"
            text += "".join(f"{f.msg_id:<50} {f.message.queue_id:>4} {f.message.queue_offset:>40} "
                            f"{index_key(f, topic, key):<200}\n" for f in found)
        else:
            text = f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40}\n"
            text += "".join(f"{f.msg_id:<50} {f.message.queue_id:>4} {f.message.queue_offset:>40}\n" for f in found)
        app.print_text(text)
    else:
        view = Table(title=f"Messages of {topic} with key {key}", title_justify="left")
        for column in ("Message id", "Queue", "Queue offset", "Stored"):
            view.add_column(column)
        for f in found:
            view.add_row(f.msg_id, str(f.message.queue_id), str(f.message.queue_offset), str(f.message.store_timestamp))
        app.print(view)


COMMANDS = [query_msg_by_key]
