"""mqadmin's status commands over the brokers: clusterList, brokerStatus, topicStatus, consumerProgress,
consumerConnection and producerConnection. Each finds the brokers through the name servers of -n (RocketMQ's,
or our controllers) and asks them with RocketMQ's request codes, so the same command works on RocketMQ's
brokers and ours; ``--format mqadmin`` prints what mqadmin prints for the same answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
from rich.table import Table

from mqctl.app import App, pass_app
from mqctl.commands.namesrv import _decode, _Servers, _servers, namesrv_option
from mqctl.options import format_option
from mqctl.terminal import terminal_safe
from services.broker.stats import java_double
from services.common.errors import MqctlError, UsageError
from services.remoting import admin_bodies as ab
from services.remoting import admin_headers as ah
from services.remoting import bodies
from services.remoting import headers as h
from services.remoting.bodies import KVTable
from services.remoting.broker_bodies import MessageQueue
from services.remoting.command import RequestCode, make_request, version_desc
from services.remoting.javaorder import hash_map_order

RC = RequestCode
RETRY_PREFIX = "%RETRY%"


# ---------------------------------------------------------------------------------------------- shared
def _cluster(servers: _Servers) -> bodies.ClusterInfo:
    info: bodies.ClusterInfo = _decode(bodies.ClusterInfo, servers.first(make_request(RC.GET_BROKER_CLUSTER_INFO, 0)),
                                       "cluster info")
    return info


def _route(servers: _Servers, topic: str) -> bodies.TopicRouteData:
    request = make_request(RC.GET_ROUTEINFO_BY_TOPIC, 0, h.GetRouteInfoRequestHeader(topic=topic).to_ext_fields())
    route: bodies.TopicRouteData = _decode(bodies.TopicRouteData, servers.first(request), f"route of {topic}")
    return route


def _select(data: bodies.BrokerData) -> str | None:
    """BrokerData.selectBrokerAddr: the master's address, else a slave's."""
    addrs = data.broker_addrs
    return addrs.get(0) or (addrs[min(addrs)] if addrs else None)


def _ask(servers: _Servers, address: str, code: int, fields: dict[str, str], body: type[bodies.Body],
         what: str) -> Any:
    return _decode(body, servers.ok(address, make_request(code, 0, fields)), what)


def _runtime(servers: _Servers, address: str) -> dict[str, str]:
    return dict(_ask(servers, address, ah.GET_BROKER_RUNTIME_INFO, {}, KVTable, "runtime info").table)


def _members(info: bodies.ClusterInfo, cluster: str | None) -> list[tuple[str, str, int, str]]:
    """(cluster, broker name, id, address) as clusterList walks them: clusters in the HashMap's order (or the
    one asked), broker names sorted, ids in the order of a HashMap of small Longs (ascending)."""
    rows = []
    clusters = [cluster] if cluster else hash_map_order(info.cluster_addr_table)
    for name in clusters:
        for broker in sorted(info.cluster_addr_table.get(name, ())):
            data = info.broker_addr_table.get(broker)
            rows += [(name, broker, bid, data.broker_addrs[bid]) for bid in sorted(data.broker_addrs)] if data else []
    return rows


def _long(table: dict[str, str], key: str) -> int:
    return int(table[key])


def _first_tps(text: str | None) -> float:
    try:
        return float(text.split(" ")[0]) if text and text.strip() else 0.0
    except ValueError:
        return 0.0


def _java_float(value: float) -> str:
    """A number as Java's %s of a double prints it (Double.toString)."""
    return java_double(value)


# ---------------------------------------------------------------------------------------------- clusterList
@click.command("clusterList")
@namesrv_option
@click.option("-c", "--clusterName", "cluster", help="Only this cluster.")
@click.option("-m", "--moreStats", "more", is_flag=True, help="Messages in and out yesterday and today instead.")
@format_option
@pass_app
def cluster_list(app: App, namesrv: str | None, cluster: str | None, more: bool, fmt: str) -> None:
    """List the clusters' brokers with their load: the name server's cluster info (GET_BROKER_CLUSTER_INFO, 106),
    then every broker's runtime info (GET_BROKER_RUNTIME_INFO, 28).

    \b
    Examples:
      mqctl clusterList -n 127.0.0.1:9878
      mqctl clusterList -n 10.0.0.5:9876 -m --format mqadmin
    """
    servers = _servers(app, namesrv)
    try:
        rows = [(member, _try_runtime(servers, member[3])) for member in _members(_cluster(servers), cluster)]
    finally:
        servers.remoting.close()
    _show_cluster(app, fmt, rows, more, time.time())


def _try_runtime(servers: _Servers, address: str) -> dict[str, str] | None:
    try:
        return _runtime(servers, address)
    except MqctlError:
        return None  # as mqadmin: the broker's row is printed with what is known


class _Fields(dict[str, str]):
    def __init__(self, table: dict[str, str] | None) -> None:
        super().__init__(table or {})
        self.answered = table is not None

    def get(self, key: str, default: Any = None) -> Any:
        if key in self:
            return self[key]
        return ("null" if default is None else default) if self.answered else ""


Row = tuple[tuple[str, str, int, str], dict[str, str] | None]


def _more(table: dict[str, str] | None) -> tuple[int, int, int, int]:
    if table is None:
        return 0, 0, 0, 0
    try:
        put_y, put_m, put_n = (_long(table, f"msgPutTotal{k}") for k in ("YesterdayMorning", "TodayMorning", "TodayNow"))
        get_y, get_m, get_n = (_long(table, f"msgGetTotal{k}") for k in ("YesterdayMorning", "TodayMorning", "TodayNow"))
    except (KeyError, ValueError):
        return 0, 0, 0, 0
    return put_m - put_y, get_m - get_y, put_n - put_m, get_n - get_m


def _base_line(member: tuple[str, str, int, str], known: dict[str, str] | None, now_s: float) -> str:
    """One broker's line; a key the broker did not send prints as Java prints null, and a broker that did not
    answer has every field empty (mqadmin's initial values)."""
    t = _Fields(known)
    put_in, out = _first_tps(t.get("putTps")), _first_tps(t.get("getTransferredTps"))
    earliest, ratio = t.get("earliestMessageTimeStamp"), t.get("commitLogDiskRatio")
    hour = (now_s * 1000 - int(earliest)) / 3_600_000 if earliest not in ("", "null") else 0.0
    space = float(ratio) if ratio not in ("", "null") else 0.0
    try:
        timer = [int(t[k]) for k in ("timerReadBehind", "timerOffsetBehind", "timerCongestNum")]
        tps = [float(t[k]) for k in ("timerEnqueueTps", "timerDequeueTps")]
    except (KeyError, ValueError):
        timer, tps = [0, 0, 0], [0.0, 0.0]
    inn = f"{put_in:9.2f}({t.get('sendThreadPoolQueueSize')},{t.get('sendThreadPoolQueueHeadWaitTimeMills')}ms)"
    outt = (f"{out:9.2f}({t.get('pullThreadPoolQueueSize')},{t.get('pullThreadPoolQueueHeadWaitTimeMills')}ms|"
            f"{t.get('ackThreadPoolQueueSize', 'N')},{t.get('ackThreadPoolQueueHeadWaitTimeMills', 'N')}ms)")
    timers = f"{timer[0]}-{timer[1]}({timer[2] / 10000:.1f}w, {tps[0]:.1f}, {tps[1]:.1f})"
    cluster, broker, bid, addr = member
    return (f"{cluster:<22}  {broker:<22}  {bid!s:<4}  {addr:<22} {t.get('brokerVersionDesc', ''):<16}  {inn:>16}  "
            f"{outt:>30}  {timers:<22}  {t.get('pageCacheLockTimeMills'):>11}  {hour:<12.2f}  "
            f"{space:<8.4f}  {str(t.get('brokerActive') == 'true').lower():>10}\n")


@terminal_safe
def _show_cluster(app: App, fmt: str, rows: list[Row], more: bool, now_s: float) -> None:
    if fmt == "json":
        app.print_json({"brokers": [{"cluster": c, "brokerName": b, "brokerId": i, "address": a, "runtime": t}
                                    for (c, b, i, a), t in rows]})
    elif fmt == "mqadmin" and more:
        text = (f"{'#Cluster Name':<16}  {'#Broker Name':<32} {'#InTotalYest':>14} {'#OutTotalYest':>14} "
                f"{'#InTotalToday':>14} {'#OutTotalToday':>14}\n")
        for (c, b, _, _), t in rows:
            text += f"{c:<16}  {b:<32} " + " ".join(f"{n:>14}" for n in _more(t)) + "\n"
        app.print_text(text)
    elif fmt == "mqadmin":
        text = (f"{'#Cluster Name':<22}  {'#Broker Name':<22}  {'#BID':<4}  {'#Addr':<22} {'#Version':<16}  "
                f"{'#InTPS(LOAD)':>16}  {'#OutTPS(LOAD)':>30}  {'#Timer(Progress)':<22}  {'#PCWait(ms)':<11}  "
                f"{'#Hour':<12}  {'#SPACE':<8}  {'#ACTIVATED':<10}\n")
        app.print_text(text + "".join(_base_line(m, t, now_s) for m, t in rows))
    else:
        table = Table(title="Brokers", title_justify="left")
        for column in ("Cluster", "Broker", "Id", "Address", "Version", "In TPS", "Out TPS", "Disk", "Active"):
            table.add_column(column)
        for (c, b, i, a), t in rows:
            t = t or {}
            table.add_row(c, b, str(i), a, t.get("brokerVersionDesc", "?"), f"{_first_tps(t.get('putTps')):.2f}",
                          f"{_first_tps(t.get('getTransferredTps')):.2f}", t.get("commitLogDiskRatio", "?"),
                          t.get("brokerActive", "unreachable"))
        app.print(table)


# ---------------------------------------------------------------------------------------------- brokerStatus
@click.command("brokerStatus")
@namesrv_option
@click.option("-b", "--brokerAddr", "broker", help="One broker's address.")
@click.option("-c", "--clusterName", "cluster", help="Every broker of this cluster (found on the name server).")
@format_option
@pass_app
def broker_status(app: App, namesrv: str | None, broker: str | None, cluster: str | None, fmt: str) -> None:
    """Show a broker's runtime info (GET_BROKER_RUNTIME_INFO, 28, to each broker), every key sorted.

    \b
    Examples:
      mqctl brokerStatus -b 127.0.0.1:10911
      mqctl brokerStatus -n 127.0.0.1:9878 -c DefaultCluster --format json
    """
    if not broker and not cluster:
        raise UsageError("give -b (a broker's address) or -c (a cluster)")
    servers = _servers(app, namesrv)
    try:
        addresses = [broker.strip()] if broker else \
            hash_map_order({m[3] for m in _members(_cluster(servers), cluster.strip() if cluster else None)})
        tables = [(address, _runtime(servers, address)) for address in addresses]
    finally:
        servers.remoting.close()
    _show_status(app, fmt, tables, prefix=not broker)


@terminal_safe
def _show_status(app: App, fmt: str, tables: list[tuple[str, dict[str, str]]], prefix: bool) -> None:
    if fmt == "json":
        app.print_json({"brokers": [{"address": a, "runtime": dict(sorted(t.items()))} for a, t in tables]})
    elif fmt == "mqadmin":
        app.print_text("".join((f"{a:<24} " if prefix else "") + f"{k:<32}: {t[k]}\n" for a, t in tables
                               for k in sorted(t)))
    else:
        for address, table in tables:
            view = Table(title=f"Broker {address}", title_justify="left")
            view.add_column("Key")
            view.add_column("Value")
            for key in sorted(table):
                view.add_row(key, table[key])
            app.print(view)


# ---------------------------------------------------------------------------------------------- topicStatus
@click.command("topicStatus")
@namesrv_option
@click.option("-t", "--topic", required=True, help="Topic.")
@format_option
@pass_app
def topic_status(app: App, namesrv: str | None, topic: str, fmt: str) -> None:
    """Show each queue of a topic: its min and max offset and when it was last written (the topic's route from
    the name server, then GET_TOPIC_STATS_INFO, 202, to each of its broker groups).

    \b
    Examples:
      mqctl topicStatus -n 127.0.0.1:9878 -t TopicTest
    """
    topic = topic.strip()
    servers = _servers(app, namesrv)
    table: dict[MessageQueue, ab.TopicOffset] = {}
    tps = 0.0
    try:
        for data in _route(servers, topic).broker_datas:
            address = _select(data)
            if address:
                stats = _ask(servers, address, ah.GET_TOPIC_STATS_INFO, {"topic": topic}, ab.TopicStatsTable,
                             "topic stats")
                table.update(stats.offset_table)
                tps = stats.topic_put_tps  # as mqadmin: the last broker's
    finally:
        servers.remoting.close()
    _show_topic_status(app, fmt, topic, table, tps)


def _local_time(ms: int, millis: bool) -> str:
    text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))
    return f"{text},{ms % 1000:03d}" if millis else text


@terminal_safe
def _show_topic_status(app: App, fmt: str, topic: str, table: dict[MessageQueue, ab.TopicOffset], tps: float) -> None:
    queues = sorted(table)
    if fmt == "json":
        app.print_json({"topic": topic, "topicPutTps": tps, "queues": [
            {"brokerName": q.broker_name, "queueId": q.queue_id, "minOffset": table[q].min_offset,
             "maxOffset": table[q].max_offset, "lastUpdateTimestamp": table[q].last_update_timestamp} for q in queues]})
    elif fmt == "mqadmin":
        text = f"{'#Broker Name':<32}  {'#QID':<4}  {'#Min Offset':<20}  {'#Max Offset':<20}    #Last Updated\n"
        for q in queues:
            o = table[q]
            stamp = _local_time(o.last_update_timestamp, True) if o.last_update_timestamp > 0 else ""
            text += f"{q.broker_name[:32]:<32}  {q.queue_id:<4}  {o.min_offset:<20}  {o.max_offset:<20}    {stamp}\n"
        app.print_text(text + f"\nTopic Put TPS: {_java_float(tps)}\n")
    else:
        view = Table(title=f"Topic {topic}", title_justify="left")
        for column in ("Broker", "Queue", "Min offset", "Max offset", "Last updated"):
            view.add_column(column)
        for q in queues:
            o = table[q]
            view.add_row(q.broker_name, str(q.queue_id), str(o.min_offset), str(o.max_offset),
                         _local_time(o.last_update_timestamp, True) if o.last_update_timestamp else "")
        app.print(view)


# ---------------------------------------------------------------------------------------------- consumerProgress
@dataclass
class _GroupRow:
    group: str
    count: int
    version: str
    consume_type: str
    model: str
    tps: int
    diff: int


def _consume_stats(servers: _Servers, group: str, topic: str | None) -> ab.ConsumeStats:
    """DefaultMQAdminExt.examineConsumeStats: the route of the group's retry topic (or of the topic), every
    broker group's answer merged; MqctlError if no queue is found."""
    route = None
    for name in [RETRY_PREFIX + group] + ([topic] if topic else []):
        try:
            route = _route(servers, name)
            break
        except MqctlError:
            continue
    if route is None:
        raise MqctlError(f"no route for the consumer group {group}")
    table: dict[MessageQueue, ab.OffsetWrapper] = {}
    tps = 0.0
    fields = {"consumerGroup": group, **({"topic": topic} if topic else {})}
    for data in route.broker_datas:
        address = _select(data)
        if address:
            stats = _ask(servers, address, ah.GET_CONSUME_STATS, fields, ab.ConsumeStats, "consume stats")
            table.update(stats.offset_table)
            tps += stats.consume_tps
    if not table:
        raise MqctlError("Not found the consumer group consume stats, because return offset table is empty, maybe "
                         "the consumer not consume any message")
    return ab.ConsumeStats(table, tps)


def _connection(servers: _Servers, group: str, broker: str | None = None) -> ab.ConsumerConnection:
    """DefaultMQAdminExt.examineConsumerConnectionInfo: the first broker of the group's retry topic."""
    addresses = [broker] if broker else [a for d in _route(servers, RETRY_PREFIX + group).broker_datas
                                         if (a := _select(d))][:1]
    for address in addresses:
        found = _ask(servers, address, ah.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group},
                     ab.ConsumerConnection, "consumer connection")
        if found.connection_set:
            return found  # type: ignore[no-any-return]
    raise MqctlError(f"Not found the consumer group connection: {group}")


@click.command("consumerProgress")
@namesrv_option
@click.option("-g", "--groupName", "group", help="One consumer group: its lag per queue.")
@click.option("-t", "--topicName", "topic", help="With -g: only this topic.")
@format_option
@pass_app
def consumer_progress(app: App, namesrv: str | None, group: str | None, topic: str | None, fmt: str) -> None:
    """Show how far consumer groups are behind. With -g, each queue of the group: the broker's max offset, the
    group's offset, the lag and when the last consumed message was stored (the route of %RETRY%<group>, then
    GET_CONSUME_STATS, 208, to each broker group). Without -g, every group with a retry topic on the name
    server (206), its clients (203) and total lag.

    \b
    Examples:
      mqctl consumerProgress -n 127.0.0.1:9878 -g orders-consumer
      mqctl consumerProgress -n 127.0.0.1:9878 --format mqadmin
    """
    servers = _servers(app, namesrv)
    try:
        if group:
            stats = _consume_stats(servers, group.strip(), topic.strip() if topic else None)
        else:
            rows = _group_rows(servers)
    finally:
        servers.remoting.close()
    if group:
        _show_progress(app, fmt, stats)
    else:
        _show_groups(app, fmt, rows)


def _group_rows(servers: _Servers) -> list[_GroupRow]:
    listed = _decode(bodies.TopicList, servers.first(make_request(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 0)),
                     "topic list")
    rows = []
    for name in hash_map_order(listed.topic_list):
        if not name.startswith(RETRY_PREFIX):
            continue
        group = name[len(RETRY_PREFIX):]
        stats = _quietly(lambda g=group: _consume_stats(servers, g, None))  # type: ignore[misc]
        conn = _quietly(lambda g=group: _connection(servers, g))  # type: ignore[misc]
        count = len(conn.connection_set) if conn else 0
        rows.append(_GroupRow(group, count, version_desc(conn.min_version()) if count else "OFFLINE",
                              _type_desc(conn.consume_type if conn else None),
                              _model_desc(conn.message_model if conn else None),
                              int(stats.consume_tps) if stats else 0, stats.total_diff() if stats else 0))
    return rows


def _quietly(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except MqctlError:
        return None


def _type_desc(consume_type: str | None) -> str:
    """GroupConsumeInfo.consumeTypeDesc."""
    return {"CONSUME_ACTIVELY": "PULL", "CONSUME_PASSIVELY": "PUSH", "CONSUME_POP": "POP"}.get(consume_type or "", "")


def _model_desc(model: str | None) -> str:
    return model or ""


@terminal_safe
def _show_progress(app: App, fmt: str, stats: ab.ConsumeStats) -> None:
    queues = sorted(stats.offset_table)
    if fmt == "json":
        app.print_json({"consumeTps": stats.consume_tps, "diffTotal": stats.total_diff(), "queues": [
            {"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id,
             "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset,
             "lag": w.broker_offset - w.consumer_offset, "lastTimestamp": w.last_timestamp}
            for q in queues for w in [stats.offset_table[q]]]})
        return
    if fmt == "mqadmin":
        text = (f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  "
                f"{'#Consumer Offset':<20}  {'#Diff':<20} {'#Inflight':<20}#LastTime\n")
        inflight = 0
        for q in queues:
            w = stats.offset_table[q]
            inflight += w.pull_offset - w.consumer_offset
            last = "N/A" if w.last_timestamp == 0 else _local_time(w.last_timestamp, False)
            text += (f"{q.topic[:64]:<64}  {q.broker_name[:32]:<32}  {q.queue_id:<4}  {w.broker_offset:<20}  "
                     f"{w.consumer_offset:<20}  {w.broker_offset - w.consumer_offset:<20} "
                     f"{w.pull_offset - w.consumer_offset:<20} {last}\n")
        text += (f"\nConsume TPS: {stats.consume_tps:.2f}\nConsume Diff Total: {stats.total_diff()}\n"
                 f"Consume Inflight Total: {inflight}\n")
        app.print_text(text)
        return
    view = Table(title=f"Consume TPS {stats.consume_tps:.2f}, lag {stats.total_diff()}", title_justify="left")
    for column in ("Topic", "Broker", "Queue", "Broker offset", "Consumer offset", "Lag", "Last consumed"):
        view.add_column(column)
    for q in queues:
        w = stats.offset_table[q]
        view.add_row(q.topic, q.broker_name, str(q.queue_id), str(w.broker_offset), str(w.consumer_offset),
                     str(w.broker_offset - w.consumer_offset),
                     _local_time(w.last_timestamp, False) if w.last_timestamp else "")
    app.print(view)


@terminal_safe
def _show_groups(app: App, fmt: str, rows: list[_GroupRow]) -> None:
    if fmt == "json":
        app.print_json({"groups": [r.__dict__ for r in rows]})
    elif fmt == "mqadmin":
        text = f"{'#Group':<64}  {'#Count':<6}  {'#Version':<24} {'#Type':<5}  {'#Model':<14}  {'#TPS':<7}  #Diff Total\n"
        text += "".join(f"{r.group[:64]:<64}  {r.count:<6}  {r.version:<24} {r.consume_type:<5}  {r.model:<14}  "
                        f"{r.tps:<7}  {r.diff}\n" for r in rows)
        app.print_text(text)
    else:
        view = Table(title="Consumer groups", title_justify="left")
        for column in ("Group", "Clients", "Version", "Type", "Model", "TPS", "Lag"):
            view.add_column(column)
        for r in sorted(rows, key=lambda r: r.group):
            view.add_row(r.group, str(r.count), r.version, r.consume_type, r.model, str(r.tps), str(r.diff))
        app.print(view)


# ---------------------------------------------------------------------------------------------- connections
@click.command("consumerConnection")
@namesrv_option
@click.option("-g", "--consumerGroup", "group", required=True, help="Consumer group.")
@click.option("-b", "--brokerAddr", "broker", help="Ask this broker (default: a broker of the group's retry topic).")
@format_option
@pass_app
def consumer_connection(app: App, namesrv: str | None, group: str, broker: str | None, fmt: str) -> None:
    """Show a consumer group's clients and subscriptions (GET_CONSUMER_CONNECTION_LIST, 203, to a broker of the
    group's retry topic, found on the name server, or to -b).

    \b
    Examples:
      mqctl consumerConnection -n 127.0.0.1:9878 -g orders-consumer
    """
    servers = _servers(app, namesrv)
    try:
        cc = _connection(servers, group.strip(), broker.strip() if broker else None)
    finally:
        servers.remoting.close()
    if fmt == "json":
        app.print_json({"connections": [c.to_json() for c in cc.connection_set],
                        "subscriptions": {t: s.sub_string for t, s in cc.subscription_table.items()},
                        "consumeType": cc.consume_type, "messageModel": cc.message_model,
                        "consumeFromWhere": cc.consume_from_where})
    elif fmt == "mqadmin":
        text = f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version\n"
        text += "".join(f"{c.client_id!s:<36} {c.client_addr!s:<22} {c.language!s:<10} {version_desc(c.version)}\n"
                        for c in cc.connection_set)
        text += f"\nBelow is subscription:\n{'#Topic':<20} #SubExpression\n"
        text += "".join(f"{s.topic!s:<20} {s.sub_string}\n" for s in cc.subscription_table.values())
        text += (f"\nConsumeType: {cc.consume_type}\nMessageModel: {cc.message_model}\n"
                 f"ConsumeFromWhere: {cc.consume_from_where}\n")
        app.print_text(text)
    else:
        view = Table(title=f"{group}: {cc.consume_type}, {cc.message_model}, {cc.consume_from_where}",
                     title_justify="left")
        for column in ("Client id", "Address", "Language", "Version"):
            view.add_column(column)
        for c in cc.connection_set:
            view.add_row(c.client_id or "", c.client_addr or "", c.language or "", version_desc(c.version))
        app.print(view)


@click.command("producerConnection")
@namesrv_option
@click.option("-g", "--producerGroup", "group", required=True, help="Producer group.")
@click.option("-t", "--topic", required=True, help="A topic the group sends to (its broker is asked).")
@format_option
@pass_app
def producer_connection(app: App, namesrv: str | None, group: str, topic: str, fmt: str) -> None:
    """Show a producer group's clients (GET_PRODUCER_CONNECTION_LIST, 204, to a broker of the topic's route).

    \b
    Examples:
      mqctl producerConnection -n 127.0.0.1:9878 -g orders-producer -t Orders
    """
    servers = _servers(app, namesrv)
    try:
        address = next((a for d in _route(servers, topic.strip()).broker_datas if (a := _select(d))), None)
        if address is None:
            raise MqctlError(f"topic {topic} has no broker")
        pc = _ask(servers, address, ah.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group.strip()},
                  ab.ProducerConnection, "producer connection")
    finally:
        servers.remoting.close()
    if fmt == "json":
        app.print_json({"connections": [c.to_json() for c in pc.connection_set]})
    elif fmt == "mqadmin":
        app.print_text("".join(f"{i:04d}  {c.client_id!s:<32} {c.client_addr!s:<22} {c.language!s:<8} "
                               f"{version_desc(c.version)}\n" for i, c in enumerate(pc.connection_set, 1)))
    else:
        view = Table(title=f"Producer group {group}", title_justify="left")
        for column in ("Client id", "Address", "Language", "Version"):
            view.add_column(column)
        for c in pc.connection_set:
            view.add_row(c.client_id or "", c.client_addr or "", c.language or "", version_desc(c.version))
        app.print(view)


COMMANDS = [cluster_list, broker_status, topic_status, consumer_progress, consumer_connection, producer_connection]
