"""resetOffsetByTime, as mqadmin's: move a consumer group's offsets of a topic to a time while its consumers
run. It finds the topic's broker groups through the name servers of -n (RocketMQ's, or our controllers) and
asks each group's master with INVOKE_BROKER_TO_RESET_OFFSET (222), which RocketMQ 5's brokers and ours serve
alike: the broker moves the offsets and tells each consumer at its next pull. With -b and -q it moves one
queue: to -o, or to the offset the broker finds for the time (SEARCH_OFFSET_BY_TIMESTAMP, 29).

``--format mqadmin`` prints what mqadmin prints: the queues in the order of mqadmin's HashMap.
"""

from __future__ import annotations

import re
import time
from datetime import datetime

import click
from rich.table import Table

from mqctl.app import App, pass_app
from mqctl.commands.brokeradmin import _route, _select
from mqctl.commands.namesrv import _Servers, _servers, namesrv_option
from mqctl.options import format_option
from mqctl.terminal import terminal_safe
from services.common.codes import ResponseCode, code_name
from services.common.errors import MqctlError, RemoteError, UsageError
from services.remoting import admin_headers as ah
from services.remoting import broker_headers as bh
from services.remoting.admin_bodies import ResetOffsetBody
from services.remoting.broker_bodies import MessageQueue
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.errors import BodyError
from services.remoting.javaorder import hash_set_order, message_queue_hash

__all__ = ["COMMANDS", "parse_timestamp", "reset_order"]

_NUMBER = re.compile(r"[+-]?[0-9]{1,19}")


def parse_timestamp(text: str, now_ms: int) -> int:
    """-s as mqadmin reads it: ``now``, epoch milliseconds, or ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time.
    UsageError for anything else."""
    if text == "now":
        return now_ms
    if _NUMBER.fullmatch(text) and -(2**63) <= int(text) < 2**63:
        return int(text)
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2}#\d{2}:\d{2}:\d{2}):(\d{3})", text)
    try:
        if match is None:
            raise ValueError
        moment = datetime.strptime(match[1], "%Y-%m-%d#%H:%M:%S")
    except ValueError:
        raise UsageError(f"-s {text[:80]!r} is no time: give now, epoch milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS "
                         "(local time)") from None
    return int(moment.timestamp()) * 1000 + int(match[2])


def reset_order(answers: list[dict[MessageQueue, int]]) -> list[MessageQueue]:
    """The queues of the brokers' answers, in the order mqadmin prints them: it puts each answer (a HashMap
    as fastjson reads it) into one HashMap, and prints that."""
    def order(queues: list[MessageQueue]) -> list[MessageQueue]:
        return hash_set_order(queues, lambda q: message_queue_hash(q.topic, q.broker_name, q.queue_id))
    return order([q for answer in answers for q in order(list(answer))])


def _broker_call(servers: _Servers, address: str, request: RemotingCommand) -> RemotingCommand:
    answer = servers.call(address, request)
    if answer.code != ResponseCode.SUCCESS:
        raise RemoteError(answer.code, f"broker {address}: {answer.remark or code_name(answer.code)}")
    return answer


def _reset(servers: _Servers, address: str, header: ah.ResetOffsetRequestHeader) -> dict[MessageQueue, int]:
    answer = _broker_call(servers, address, make_request(ah.INVOKE_BROKER_TO_RESET_OFFSET, 0, header.to_ext_fields()))
    try:
        return dict(ResetOffsetBody.decode(answer.body or b"").offset_table)
    except BodyError as exc:
        raise MqctlError(f"broker {address} answered a malformed reset: {exc}") from None


@click.command("resetOffsetByTime")
@namesrv_option
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-s", "--timestamp", "when", required=True,
              help="now, epoch milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS (local time); a negative number: the end "
                   "of each queue.")
@click.option("-f", "--force", default="true", show_default=True,
              help="mqadmin's (true or false); brokers that reset on their side ignore it.")
@click.option("-c", "--cluster", help="mqadmin's: a cluster, used for the route of an LMQ topic only.")
@click.option("-b", "--broker", help="With -q: one queue, of the broker at this address.")
@click.option("-q", "--queue", "queue_id", type=click.IntRange(min=0), help="With -b: the queue id.")
@click.option("-o", "--offset", type=click.IntRange(min=0), help="With -b and -q: this offset instead of a time.")
@format_option
@pass_app
def reset_offset_by_time(app: App, namesrv: str | None, group: str, topic: str, when: str, force: str,
                         cluster: str | None, broker: str | None, queue_id: int | None, offset: int | None,
                         fmt: str) -> None:
    """Move a consumer group's offsets of a topic to a time, while its consumers run: the topic's route from
    the name server, then INVOKE_BROKER_TO_RESET_OFFSET (222) to the master of each of its broker groups,
    which moves every queue to the first message stored at or after the time and tells the group's
    consumers at their next pull. With -b and -q, one queue: to -o, or to the offset the broker finds for the
    time (SEARCH_OFFSET_BY_TIMESTAMP, 29), committed (UPDATE_CONSUMER_OFFSET, 15) and reset (222).

    \b
    Examples:
      mqctl resetOffsetByTime -n 127.0.0.1:9878 -g orders -t TopicTest -s 2026-11-27#09:30:00:000
      mqctl resetOffsetByTime -n 127.0.0.1:9878 -g orders -t TopicTest -s now
      mqctl resetOffsetByTime -n 127.0.0.1:9878 -g orders -t TopicTest -s 0 -b 127.0.0.1:10911 -q 1 -o 42
    """
    group, topic, when = group.strip(), topic.strip(), when.strip()
    timestamp = parse_timestamp(when, int(time.time() * 1000))
    is_force = force.strip().lower() == "true"  # Boolean.parseBoolean
    if (broker is None) != (queue_id is None):
        raise UsageError("-b and -q go together: one queue of one broker")
    if offset is not None and queue_id is None:
        raise UsageError("-o needs -b and -q: the offset of one queue")
    servers = _servers(app, namesrv)
    try:
        if broker is not None and queue_id is not None:
            _one_queue(app, fmt, servers, group, topic, when, timestamp, broker.strip(), queue_id, offset)
            return
        answers = []
        for data in _route(servers, topic).broker_datas:
            address = _select(data)
            if address:
                answers.append(_reset(servers, address, ah.ResetOffsetRequestHeader(
                    topic=topic, group=group, timestamp=timestamp, is_force=is_force, offset=-1)))
    finally:
        servers.remoting.close()
    _show(app, fmt, group, topic, when, timestamp, is_force, answers)


def _one_queue(app: App, fmt: str, servers: _Servers, group: str, topic: str, when: str, timestamp: int, broker: str,
               queue_id: int, offset: int | None) -> None:
    lines = [(f"start reset consumer offset by specified, group[{group}], topic[{topic}], queueId[{queue_id}], "
              f"broker[{broker}], timestamp(string)[{when}], timestamp(long)[{timestamp}]")]
    if offset is None:
        search = bh.SearchOffsetRequestHeader(topic=topic, queue_id=queue_id, timestamp=timestamp)
        answer = _broker_call(servers, broker, make_request(bh.SEARCH_OFFSET_BY_TIMESTAMP, 0,
                                                            search.to_ext_fields()))
        offset = bh.SearchOffsetResponseHeader.from_ext_fields(answer.ext_fields).offset
    lines.append(f"reset consumer offset to {offset}")
    commit = bh.UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id,
                                                  commit_offset=offset)
    _broker_call(servers, broker, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, 0, commit.to_ext_fields()))
    _reset(servers, broker, ah.ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, is_force=True,
                                                        queue_id=queue_id, offset=offset))
    _show_lines(app, fmt, lines, {"group": group, "topic": topic, "broker": broker, "queueId": queue_id,
                                  "timestamp": timestamp, "offset": offset})


@terminal_safe
def _show_lines(app: App, fmt: str, lines: list[str], data: dict[str, object]) -> None:
    if fmt == "json":
        app.print_json(data)
    else:
        app.print_text("".join(line + "\n" for line in lines))


@terminal_safe
def _show(app: App, fmt: str, group: str, topic: str, when: str, timestamp: int, is_force: bool,
          answers: list[dict[MessageQueue, int]]) -> None:
    table = {q: o for answer in answers for q, o in answer.items()}
    queues = reset_order(answers)
    if fmt == "json":
        app.print_json({"group": group, "topic": topic, "timestamp": timestamp, "queues": [
            {"brokerName": q.broker_name, "queueId": q.queue_id, "offset": table[q]} for q in sorted(queues)]})
    elif fmt == "mqadmin":
        text = (f"start reset consumer offset by specified, group[{group}], topic[{topic}], "
                f"force[{'true' if is_force else 'false'}], timestamp(string)[{when}], timestamp(long)[{timestamp}]\n")
        text += f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}\n"
        for q in queues:
            text += f"{q.broker_name[:32]:<40}  {q.queue_id:<40}  {table[q]:<40}\n"
        app.print_text(text)
    else:
        view = Table(title=f"Group {group}, topic {topic}: offsets reset to {timestamp}", title_justify="left")
        for column in ("Broker", "Queue", "New offset"):
            view.add_column(column)
        for q in sorted(queues):
            view.add_row(q.broker_name, str(q.queue_id), str(table[q]))
        app.print(view)


COMMANDS = [reset_offset_by_time]
