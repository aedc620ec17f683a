"""A topic's route, as mqadmin shows it: topicRoute and topicClusterList. Both ask the name servers of -n
(RocketMQ's, or our controllers) with RocketMQ's own request codes, so they work on both.

``topicRoute --format mqadmin`` prints the route as the mqadmin of the name server's version prints it:
fastjson's pretty layout up to RocketMQ 5.3, fastjson2's from 5.4 (mqctl/javajson.py); the version is the
one the name server's answer carries.
"""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from mqctl.app import App, pass_app
from mqctl.commands.brokeradmin import _cluster
from mqctl.commands.namesrv import _decode, _servers, namesrv_option
from mqctl.javajson import FASTJSON2_FROM_VERSION, Bean, pretty
from mqctl.options import format_option
from mqctl.terminal import terminal_safe
from services.common.codes import ResponseCode
from services.common.errors import RemoteError
from services.remoting import bodies
from services.remoting import headers as h
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.javaorder import hash_map_order, hash_set_order

__all__ = ["COMMANDS"]

RC = RequestCode


def _ask_route(app: App, namesrv: str | None, topic: str, with_clusters: bool
               ) -> tuple[RemotingCommand, bodies.TopicRouteData, bodies.ClusterInfo | None]:
    servers = _servers(app, namesrv)
    try:
        info = _cluster(servers) if with_clusters else None  # mqadmin asks the cluster info first, then the route
        request = make_request(RC.GET_ROUTEINFO_BY_TOPIC, 0, h.GetRouteInfoRequestHeader(topic=topic).to_ext_fields())
        answer = servers.first(request, accept=(ResponseCode.TOPIC_NOT_EXIST,))
        if answer.code == ResponseCode.TOPIC_NOT_EXIST:
            raise RemoteError(answer.code, f"no route for topic {topic}: the name servers do not know it")
        route: bodies.TopicRouteData = _decode(bodies.TopicRouteData, answer, f"route of {topic}")
    finally:
        servers.remoting.close()
    return answer, route, info


# ---------------------------------------------------------------------------------------------- topicRoute
@click.command("topicRoute")
@namesrv_option
@click.option("-t", "--topic", required=True, help="Topic.")
@format_option
@pass_app
def topic_route(app: App, namesrv: str | None, topic: str, fmt: str) -> None:
    """Show a topic's route: its broker groups with their replicas' addresses by broker id (0 is the master),
    and its queues on each group (GET_ROUTEINFO_BY_TOPIC, 105, to the first name server that answers).

    \b
    Examples:
      mqctl topicRoute -n 127.0.0.1:9878 -t TopicTest
      mqctl topicRoute -n 10.0.0.5:9876 -t TopicTest --format mqadmin   # a RocketMQ name server
    """
    topic = topic.strip()
    answer, route, _ = _ask_route(app, namesrv, topic, with_clusters=False)
    _show_route(app, fmt, topic, route, answer.version >= FASTJSON2_FROM_VERSION)


def route_bean(route: bodies.TopicRouteData) -> Bean:
    """TopicRouteData as mqadmin holds it: a bean, its broker addresses a HashMap<Long, String>."""
    def broker(data: bodies.BrokerData) -> Bean:
        ids = hash_set_order(data.broker_addrs, _long_hash)
        return Bean({"brokerAddrs": {i: data.broker_addrs[i] for i in ids}, "brokerName": data.broker_name,
                     "cluster": data.cluster, "enableActingMaster": data.enable_acting_master,
                     "zoneName": data.zone_name})

    def queues(data: bodies.QueueData) -> Bean:
        return Bean({"brokerName": data.broker_name, "perm": data.perm, "readQueueNums": data.read_queue_nums,
                     "topicSysFlag": data.topic_sys_flag, "writeQueueNums": data.write_queue_nums})

    filters = {name: list(route.filter_server_table[name]) for name in hash_map_order(route.filter_server_table)}
    return Bean({"brokerDatas": [broker(b) for b in route.broker_datas], "filterServerTable": filters,
                 "orderTopicConf": route.order_topic_conf, "queueDatas": [queues(q) for q in route.queue_datas],
                 "topicQueueMappingByBroker": route.topic_queue_mapping_by_broker})


def _long_hash(value: int) -> int:
    """Long.hashCode."""
    bits = value & 0xFFFFFFFFFFFFFFFF
    return (bits ^ (bits >> 32)) & 0xFFFFFFFF


@terminal_safe
def _show_route(app: App, fmt: str, topic: str, route: bodies.TopicRouteData, fastjson2: bool) -> None:
    if fmt == "mqadmin":
        app.print_text(pretty(route_bean(route), fastjson2) + "\n")
    elif fmt == "json":
        doc: dict[str, Any] = route.to_json()
        for data in doc["brokerDatas"]:
            data["brokerAddrs"] = {str(i): a for i, a in sorted(data["brokerAddrs"].items())}
        app.print_json({"topic": topic, **{k: v for k, v in doc.items() if v is not None}})
    else:
        brokers = Table(title=f"Topic {topic}: broker groups", title_justify="left")
        for column in ("Cluster", "Broker group", "Broker id", "Address", "Role"):
            brokers.add_column(column)
        for data in route.broker_datas:
            for broker_id, address in sorted(data.broker_addrs.items()):
                brokers.add_row(data.cluster or "", data.broker_name or "", str(broker_id), address,
                                "master" if broker_id == 0 else "slave")
        queues = Table(title=f"Topic {topic}: queues", title_justify="left")
        for column in ("Broker group", "Read queues", "Write queues", "Perm", "Sys flag"):
            queues.add_column(column)
        for q in route.queue_datas:
            queues.add_row(q.broker_name or "", str(q.read_queue_nums), str(q.write_queue_nums), _perm(q.perm),
                           str(q.topic_sys_flag))
        app.print(brokers)
        app.print(queues)
        if route.order_topic_conf:
            app.print(f"Order topic conf: {route.order_topic_conf}")


def _perm(perm: int) -> str:
    """PermName.perm2String: R, W and X (inherit) letters, - where a bit is not set."""
    return "".join(letter if perm & bit else "-" for letter, bit in (("R", 4), ("W", 2), ("X", 1)))


# ---------------------------------------------------------------------------------------------- topicClusterList
@click.command("topicClusterList")
@namesrv_option
@click.option("-t", "--topic", required=True, help="Topic.")
@format_option
@pass_app
def topic_cluster_list(app: App, namesrv: str | None, topic: str, fmt: str) -> None:
    """Show the cluster(s) of a topic: those holding its first broker group, as mqadmin decides it
    (GET_BROKER_CLUSTER_INFO, 106, then GET_ROUTEINFO_BY_TOPIC, 105, to the first name server that answers).

    \b
    Examples:
      mqctl topicClusterList -n 127.0.0.1:9878 -t TopicTest
    """
    topic = topic.strip()
    _, route, info = _ask_route(app, namesrv, topic, with_clusters=True)
    assert info is not None
    clusters: list[str] = []
    if route.broker_datas:
        name = route.broker_datas[0].broker_name
        clusters = hash_map_order(c for c, names in info.cluster_addr_table.items() if name in names)
    _show_clusters(app, fmt, topic, clusters)


@terminal_safe
def _show_clusters(app: App, fmt: str, topic: str, clusters: list[str]) -> None:
    if fmt == "json":
        app.print_json({"topic": topic, "clusters": clusters})
    elif fmt == "mqadmin":
        app.print_text("".join(f"{c}\n" for c in clusters))
    else:
        table = Table(title=f"Topic {topic}: clusters", title_justify="left")
        table.add_column("Cluster")
        for cluster in clusters:
            table.add_row(cluster)
        app.print(table)


COMMANDS = [topic_route, topic_cluster_list]
