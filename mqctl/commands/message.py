"""queryMsgById, queryMsgByUniqueKey and queryMsgByOffset, as mqadmin's: one stored message in full, found by its
offset message id, by its unique key (the id a producer gives each message) or by its queue and queue offset,
through the name servers of -n (RocketMQ's, or our controllers), and what each consumer group of its topic did
with it (its message track).

* By id (queryMsgById): an offset message id names the broker that stored the message and the commitlog
  offset; that broker is asked with VIEW_MESSAGE_BY_ID (33) when it is one of the topic's brokers (mqadmin asks
  any address an id decodes to; mqctl connects only to brokers the name server routes the topic to). An id
  that is not one, or that the broker does not answer, is looked up as a unique key.
* By unique key: QUERY_MESSAGE (12, ``_UNIQUE_KEY_QUERY``) to the master of each of the topic's broker groups
  (a slave where a group has none), which answer from their index.
* By offset: a pull (PULL_MESSAGE, 11) of one message from the broker group's master.

The track asks the topic's first broker group which groups consume the topic (QUERY_TOPIC_CONSUME_BY_WHO,
300), then per group its connections (203, on a broker of its retry topic) and, for a push consumer, its
consume stats (208): consumed when its offset of the message's queue is past the message on the master that
stored it.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable

import click
from rich.table import Table

from mqctl.app import App, pass_app
from mqctl.commands.brokeradmin import RETRY_PREFIX, _cluster, _consume_stats, _route, _select
from mqctl.commands.namesrv import _groups_answered, _Servers, _servers, namesrv_option
from mqctl.javajson import FASTJSON2_FROM_VERSION
from mqctl.options import format_option
from mqctl.render_message import (
    Track,
    client_msg_id,
    host_text,
    human_time,
    message_text,
    save_body,
    tracks_text,
)
from mqctl.terminal import printable, terminal_safe
from services.common.codes import ResponseCode, code_name
from services.common.errors import MqctlError, RemoteError, UnreachableError
from services.common.tool_consumer import RemotingSource
from services.remoting import admin_bodies as ab
from services.remoting import admin_headers as ah
from services.remoting import bodies
from services.remoting import broker_headers as bh
from services.remoting import headers as h
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.errors import RemotingError
from services.remoting.message import PulledMessage, SocketAddress, decode_pulled, offset_msg_id

__all__ = ["COMMANDS", "decode_offset_id", "message_tracks"]

#: What queryMsgById's look-up by unique key asks of a broker, and from how long ago (MQAdminImpl's
#: queryMessageByUniqKey: 32 messages of the last three days).
UNIQUE_MAX_NUM = 32
THREE_DAYS_MS = 3 * 24 * 3600 * 1000
LONG_MAX = 2**63 - 1
RC = RequestCode
#: MixAll.TOOLS_CONSUMER_GROUP: the group queryMsgByOffset pulls as.
TOOLS_GROUP = "TOOLS_CONSUMER"
#: The frame that throws, in mqadmin 5.3.3 and in 5.4+ (5.5.0), of the two exceptions its track records with
#: UtilAll.exceptionSimpleDesc (the exception's text, then its first stack frame): a group whose retry topic has
#: no route, and a group whose broker lists no connection.
_ROUTE_FRAME = ("org.apache.rocketmq.client.impl.MQClientAPIImpl.getTopicRouteInfoFromNameServer"
                 "(MQClientAPIImpl.java:{line})"), {False: 1998, True: 2115}
_CONNECTION_FRAME = ("org.apache.rocketmq.tools.admin.DefaultMQAdminExtImpl.examineConsumerConnectionInfo"
                      "(DefaultMQAdminExtImpl.java:{line})"), {False: 616, True: 619}
#: FAQUrl: what MQClientException adds to a message that has no "See ... for further details." of its own.
_MORE_INFORMATION = "\nFor more information, please visit the url, https://rocketmq.apache.org/docs/bestPractice/06FAQ"


def java_exception(code: int, message: str, frame: tuple[str, dict[bool, int]], newer: bool) -> str:
    """UtilAll.exceptionSimpleDesc of the MQClientException(code, message) thrown at ``frame``."""
    text = f"CODE: {code}  DESC: {message}"
    if "\nSee " not in message:
        text += _MORE_INFORMATION
    where = frame[0].format(line=frame[1][newer])
    return f"org.apache.rocketmq.client.exception.MQClientException: {text}, {where}"


def decode_offset_id(msg_id: str) -> tuple[str, int] | None:
    """MessageDecoder.decodeMessageId: the ``host:port`` and commitlog offset an offset message id names (32 hex
    digits: IPv4; 56: IPv6), or None for text that is not one."""
    if len(msg_id) not in (32, 56):
        return None
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        return None
    ip_len = 4 if len(raw) == 16 else 16
    port = int.from_bytes(raw[ip_len:ip_len + 4], "big", signed=True)
    if not 0 < port < 65536:
        return None
    host = SocketAddress(raw[:ip_len], port)
    text = ".".join(str(b) for b in host.ip) if ip_len == 4 else "[" + ":".join(
        f"{int.from_bytes(host.ip[i:i + 2], 'big'):x}" for i in range(0, 16, 2)) + "]"
    return f"{text}:{port}", int.from_bytes(raw[ip_len + 4:], "big", signed=True)


def _messages(answer: RemotingCommand, address: str) -> list[PulledMessage]:
    try:
        return decode_pulled(answer.body or b"")
    except RemotingError as exc:
        raise MqctlError(f"broker {address} answered malformed messages: {exc}") from None


def _addresses(route: bodies.TopicRouteData, cluster: str | None) -> list[str]:
    """BrokerData.selectBrokerAddr of each of the route's broker groups (of ``cluster`` only, if given)."""
    return [a for d in route.broker_datas if not cluster or d.cluster == cluster if (a := _select(d))]


def _view(servers: _Servers, route: bodies.TopicRouteData, topic: str, msg_id: str) -> PulledMessage | None:
    """The message an offset id names, from the broker it names if that is one of the topic's brokers."""
    decoded = decode_offset_id(msg_id)
    if decoded is None:
        return None
    address, offset = decoded
    if address not in {a for d in route.broker_datas for a in d.broker_addrs.values()}:
        return None
    header = bh.ViewMessageRequestHeader(offset=offset, topic=topic).to_ext_fields()
    try:
        answer = servers.call(address, make_request(bh.VIEW_MESSAGE_BY_ID, 0, header))
    except MqctlError:
        return None
    found = _messages(answer, address) if answer.code == ResponseCode.SUCCESS else []
    return found[0] if found else None


def _by_unique_key(servers: _Servers, route: bodies.TopicRouteData, topic: str, key: str, cluster: str | None,
                   begin: int) -> list[PulledMessage]:
    """MQAdminImpl.queryMessage by unique key: each group's answer, the messages whose id is the key."""
    header = bh.QueryMessageRequestHeader(topic=topic, key=key, max_num=UNIQUE_MAX_NUM, begin_timestamp=begin,
                                          end_timestamp=LONG_MAX).to_ext_fields()
    found: list[PulledMessage] = []
    unreachable: list[str] = []
    for address in _addresses(route, cluster):
        try:
            answer = servers.call(address, make_request(bh.QUERY_MESSAGE, 0, {**header, "_UNIQUE_KEY_QUERY": "true"}))
        except UnreachableError:  # as mqadmin: the other groups' answers still count
            unreachable.append(address)
            continue
        if answer.code == ResponseCode.SUCCESS:
            found += [m for m in _messages(answer, address) if client_msg_id(m) == key]
    if not found:
        if unreachable:
            raise UnreachableError(f"no message of topic {topic} has the id {key} on the brokers that answered; "
                                   f"unreachable: {', '.join(unreachable)}", unreachable)
        raise RemoteError(ResponseCode.QUERY_NOT_FOUND, f"no message of topic {topic} has the id {key}")
    return found


def _connection(servers: _Servers, group: str, newer: bool) -> ab.ConsumerConnection | Track:
    """examineConsumerConnectionInfo for the track: the group's connections, or the track of a group without."""
    route = _route_answer(servers, RETRY_PREFIX + group)
    if isinstance(route, tuple):
        return Track(group, "UNKNOWN", java_exception(*route, _ROUTE_FRAME, newer))
    for address in [a for d in route.broker_datas if (a := _select(d))][:1]:
        try:
            answer = servers.call(address, make_request(ah.GET_CONSUMER_CONNECTION_LIST, 0, {"consumerGroup": group}))
        except UnreachableError as exc:  # mqadmin describes the exception in the track and goes on
            return Track(group, "UNKNOWN", str(exc))
        if answer.code != ResponseCode.SUCCESS:
            kind = "NOT_ONLINE" if answer.code == ResponseCode.CONSUMER_NOT_ONLINE else "UNKNOWN"
            return Track(group, kind, f"CODE:{answer.code} DESC:{answer.remark}")
        try:
            found = ab.ConsumerConnection.decode(answer.body)
        except RemotingError as exc:
            raise MqctlError(f"broker {address} answered a malformed consumer connection: {exc}") from None
        if found.connection_set:
            return found
    return Track(group, "UNKNOWN", java_exception(ResponseCode.CONSUMER_NOT_ONLINE,
                                                  "Not found the consumer group connection", _CONNECTION_FRAME, newer))


def _route_answer(servers: _Servers, topic: str) -> bodies.TopicRouteData | tuple[int, str]:
    """The topic's route, or the name server's refusal (its code and remark)."""
    request = make_request(RC.GET_ROUTEINFO_BY_TOPIC, 0, h.GetRouteInfoRequestHeader(topic=topic).to_ext_fields())
    answer = servers.first(request, accept=(ResponseCode.TOPIC_NOT_EXIST,))
    if answer.code != ResponseCode.SUCCESS:
        return answer.code, answer.remark or ""
    try:
        return bodies.TopicRouteData.decode(answer.body)
    except RemotingError as exc:
        raise MqctlError(f"the name server answered a malformed route of {topic}: {exc}") from None


def _consumed(servers: _Servers, m: PulledMessage, group: str) -> bool | Track:
    """DefaultMQAdminExtImpl.consumed: the group's offset of the message's queue, on the master that stored it,
    is past the message."""
    try:
        stats = _consume_stats(servers, group, None)
    except MqctlError:
        return Track(group, "NOT_ONLINE", "CODE:206 DESC:Not found the consumer group consume stats, because return "
                                          "offset table is empty, maybe the consumer not online")
    masters = {d.broker_name: d.broker_addrs.get(0) for d in _cluster(servers).broker_addr_table.values()}
    stored_at = host_text(m.store_host)
    return any(queue.topic == m.topic and queue.queue_id == m.queue_id and masters.get(queue.broker_name) == stored_at
               and offsets.consumer_offset > m.queue_offset for queue, offsets in stats.offset_table.items())


def message_tracks(servers: _Servers, m: PulledMessage) -> list[Track] | None:
    """messageTrackDetail: a track per consumer group of the message's topic; None when the topic's groups
    cannot be asked (mqadmin then prints nothing after the message)."""
    try:
        route = _route(servers, m.topic)
    except MqctlError:
        return None
    tracks = []
    groups, version = _groups_answered(servers, route, m.topic)
    for group in groups:
        connection = _connection(servers, group, version >= FASTJSON2_FROM_VERSION)
        if isinstance(connection, Track):
            tracks.append(connection)
        elif connection.consume_type == "CONSUME_ACTIVELY":
            tracks.append(Track(group, "PULL"))
        elif connection.consume_type == "CONSUME_PASSIVELY":
            consumed = _consumed(servers, m, group)
            if isinstance(consumed, Track):
                tracks.append(consumed)
            elif not consumed:
                tracks.append(Track(group, "NOT_CONSUME_YET"))
            else:
                tags = m.properties.get("TAGS")
                filtered = any(sub.topic == m.topic and not (tags in sub.tags_set or "*" in sub.tags_set
                                                              or not sub.tags_set)
                               for sub in connection.subscription_table.values())
                tracks.append(Track(group, "CONSUMED_BUT_FILTERED" if filtered else "CONSUMED"))
        else:
            tracks.append(Track(group, "UNKNOWN"))
    return tracks


def _check_charset(charset: str | None) -> str | None:
    if charset is None:
        return None
    try:
        codecs.lookup(charset.strip())
    except LookupError:
        raise click.BadParameter(f"unknown charset {charset!r}", param_hint="-f") from None
    return charset.strip()


@terminal_safe
def _show(app: App, fmt: str, found: list[tuple[PulledMessage, str, list[Track] | None, dict[str, str] | None]],
          mqadmin_text: Callable[[], str]) -> None:
    if fmt == "mqadmin":
        app.print_text(mqadmin_text())
    elif fmt == "json":
        app.print_json([{"msgId": client_msg_id(m), "offsetMsgId": offset_msg_id(m.store_host, m.commit_log_offset),
                         "topic": m.topic, "tags": m.properties.get("TAGS"), "keys": m.properties.get("KEYS"),
                         "queueId": m.queue_id, "queueOffset": m.queue_offset, "commitLogOffset": m.commit_log_offset,
                         "reconsumeTimes": m.reconsume_times, "bornTimestamp": m.born_timestamp,
                         "storeTimestamp": m.store_timestamp, "sysFlag": m.sys_flag,
                         "properties": m.properties if props is None else props, "bodyPath": path,
                         "tracks": None if tracks is None else [{"consumerGroup": t.group, "trackType": t.track_type,
                                                                 "exceptionDesc": t.exception_desc} for t in tracks]}
                        for m, path, tracks, props in found])
    else:
        for m, path, tracks, _ in found:
            view = Table(title=f"Message {client_msg_id(m)}", title_justify="left", show_header=False)
            view.add_column("Field")
            view.add_column("Value")
            for label, value in (("Topic", m.topic), ("Tags", m.properties.get("TAGS", "")),
                                 ("Keys", m.properties.get("KEYS", "")), ("Queue", str(m.queue_id)),
                                 ("Queue offset", str(m.queue_offset)), ("Commitlog offset", str(m.commit_log_offset)),
                                 ("Offset id", offset_msg_id(m.store_host, m.commit_log_offset)),
                                 ("Stored", human_time(m.store_timestamp)), ("Body", path)):
                view.add_row(label, printable(value))
            for t in tracks or []:
                view.add_row(f"Group {t.group}", t.track_type + (f" ({t.exception_desc})" if t.exception_desc else ""))
            app.print(view)


@click.command("queryMsgById")
@namesrv_option
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-i", "--msgId", "msg_ids", required=True, help="Message id(s), comma-separated: offset message ids "
                                                             "or the ids producers give (unique keys).")
@click.option("-c", "--cluster", help="Only the broker groups of this cluster (for a look-up by unique key).")
@click.option("-f", "--bodyFormat", "charset", help="Also print the body, decoded with this charset (e.g. UTF-8).")
@format_option
@pass_app
def query_msg_by_id(app: App, namesrv: str | None, topic: str, msg_ids: str, cluster: str | None,
                    charset: str | None, fmt: str) -> None:
    """Show messages by id: each one's fields, properties and body (written to /tmp/rocketmq/msgbodys/, as
    mqadmin does) and its track per consumer group. An offset message id is asked of the broker it names with
    VIEW_MESSAGE_BY_ID (33) when that broker is one of the topic's; any other id is looked up as a unique key
    with QUERY_MESSAGE (12) on each of the topic's broker groups (messages of the last three days).

    \b
    Examples:
      mqctl queryMsgById -n 127.0.0.1:9878 -t TopicTest -i 7F00000100002A9F0000000000000000
      mqctl queryMsgById -n 127.0.0.1:9878 -t TopicTest -i 7F000001A0B418B4AAC2612D6AA80000 -f UTF-8 --format json
    """
    topic, charset = topic.strip(), _check_charset(charset)
    ids = [i.strip() for i in msg_ids.split(",") if i.strip()]
    servers = _servers(app, namesrv)
    found: list[tuple[PulledMessage, str, list[Track] | None, dict[str, str] | None]] = []
    try:
        route = _route(servers, topic)
        begin = int(time.time() * 1000) - THREE_DAYS_MS
        for msg_id in ids:
            m = _view(servers, route, topic, msg_id) or \
                _by_unique_key(servers, route, topic, msg_id, cluster and cluster.strip(), begin)[0]
            found.append((m, save_body(m), message_tracks(servers, m), None))
    finally:
        servers.remoting.close()
    _show(app, fmt, found, lambda: "".join(
        message_text(m, path, offset_id=True, charset=charset) + (tracks_text(t, True) if t is not None else "")
        for m, path, t, _ in found))


@click.command("queryMsgByUniqueKey")
@namesrv_option
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-i", "--msgId", "msg_id", required=True, help="The message's unique key (the id its producer gave).")
@click.option("-a", "--showAll", "show_all", is_flag=True, help="Every message with the key (at most 32), not only "
                                                                "the first stored.")
@click.option("-c", "--cluster", help="Only the broker groups of this cluster.")
@format_option
@pass_app
def query_msg_by_unique_key(app: App, namesrv: str | None, topic: str, msg_id: str, show_all: bool,
                            cluster: str | None, fmt: str) -> None:
    """Show the message a producer gave this id (its unique key): QUERY_MESSAGE (12) by unique key to each of
    the topic's broker groups, the first stored shown (every one with -a: a producer that retried a send stored
    it more than once), with its body written to /tmp/rocketmq/msgbodys/ and its track per consumer group.

    \b
    Examples:
      mqctl queryMsgByUniqueKey -n 127.0.0.1:9878 -t TopicTest -i 7F000001A0B418B4AAC2612D6AA80000
      mqctl queryMsgByUniqueKey -n 127.0.0.1:9878 -t TopicTest -i 7F000001A0B418B4AAC2612D6AA80000 -a --format json
    """
    topic, key = topic.strip(), msg_id.strip()
    servers = _servers(app, namesrv)
    found: list[tuple[PulledMessage, str, list[Track] | None, dict[str, str] | None]] = []
    try:
        messages = _by_unique_key(servers, _route(servers, topic), topic, key, cluster and cluster.strip(), 0)
        messages = sorted(messages, key=lambda m: m.store_timestamp)[:None if show_all else 1]
        for index, m in enumerate(messages):
            found.append((m, save_body(m, f"_{index}" if index else ""), message_tracks(servers, m), None))
    finally:
        servers.remoting.close()
    _show(app, fmt, found, lambda: "".join(
        message_text(m, path, offset_id=False) + (tracks_text(t, False) if t is not None else "")
        for m, path, t, _ in found))


@click.command("queryMsgByOffset")
@namesrv_option
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker group name.")
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(0, 2**31 - 1), required=True, help="Queue id.")
@click.option("-o", "--offset", type=click.IntRange(0, LONG_MAX), required=True, help="Queue offset.")
@click.option("-f", "--bodyFormat", "charset", help="Also print the body, decoded with this charset (e.g. UTF-8).")
@format_option
@pass_app
def query_msg_by_offset(app: App, namesrv: str | None, topic: str, broker_name: str, queue_id: int, offset: int,
                        charset: str | None, fmt: str) -> None:
    """Show the message at a queue offset: one message pulled (PULL_MESSAGE, 11) from the broker group's master
    (a slave where it has none), with its body written to /tmp/rocketmq/msgbodys/ and its track per consumer
    group. Nothing is printed when the queue holds no message there (as mqadmin), and the exit code is 4.

    \b
    Examples:
      mqctl queryMsgByOffset -n 127.0.0.1:9878 -t TopicTest -b broker-a -i 0 -o 0
      mqctl queryMsgByOffset -n 127.0.0.1:9878 -t TopicTest -b broker-a -i 3 -o 42 -f UTF-8 --format json
    """
    topic, broker_name, charset = topic.strip(), broker_name.strip(), _check_charset(charset)
    servers = _servers(app, namesrv)
    found: list[tuple[PulledMessage, str, list[Track] | None, dict[str, str] | None]] = []
    status = ""
    try:
        data = next((d for d in _route(servers, topic).broker_datas if d.broker_name == broker_name), None)
        address = _select(data) if data is not None else None
        if address is None:
            raise MqctlError(f"the route of topic {topic} has no broker group {broker_name}")
        pulled = RemotingSource(lambda request: servers.call(address, request), topic, TOOLS_GROUP).pull(
            queue_id, offset, 1)
        status = pulled.status
        for m in pulled.messages[:1]:
            props = {**m.properties, "MIN_OFFSET": str(pulled.min_offset), "MAX_OFFSET": str(pulled.max_offset)}
            found.append((m, save_body(m), message_tracks(servers, m), props))
    finally:
        servers.remoting.close()
    _show(app, fmt, found, lambda: "".join(
        message_text(m, path, offset_id=True, charset=charset, properties=props)
        + (tracks_text(t, True) if t is not None else "") for m, path, t, props in found))
    if not found:
        raise RemoteError(ResponseCode.QUERY_NOT_FOUND, f"no message at offset {offset} of {topic}/{broker_name}/"
                                                        f"{queue_id} ({status or code_name(0)})")


COMMANDS = [query_msg_by_id, query_msg_by_unique_key, query_msg_by_offset]
