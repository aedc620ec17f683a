"""Name-server commands, as mqadmin's: topicList, the KV config, the name server's configuration and a broker
group's write permission. Each asks the name servers of -n (RocketMQ's, or our controllers, which are the
cluster's name servers) with RocketMQ's own request codes, so the same command works on both.

Like mqadmin, the writes go to every name server given (a RocketMQ name server keeps its own table); our
controllers keep the KV config replicated, so any one of them takes a KV write for all, and each keeps its
own route table and configuration (give all of them to wipeWritePerm, addWritePerm and updateNamesrvConfig).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from mqctl.app import App, pass_app
from mqctl.options import format_option
from mqctl.terminal import terminal_safe
from services.common.addresses import parse_addresses, split_address
from services.common.codes import ResponseCode, code_name
from services.common.errors import ConfigError, MqctlError, RemoteError, UnreachableError
from services.common.props import parse_properties
from services.common.remoting_blocking import BlockingRemoting, signer
from services.remoting import bodies, fastjson
from services.remoting import headers as h
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.errors import RemotingError
from services.remoting.javaorder import concurrent_hash_map_order, hash_map_order

RC = RequestCode
NAMESRV_HELP = ("Name server address(es), ';'-separated: RocketMQ's name servers or our controllers. "
                "Default: $MQCTL_CONTROLLER_ADDR, then 127.0.0.1:9878.")
#: MixAll.RETRY_GROUP_TOPIC_PREFIX and DLQ_GROUP_TOPIC_PREFIX: topicList -c leaves these topics out.
_HIDDEN_PREFIXES = ("%RETRY%", "%DLQ%")
#: RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: a broker's consumer groups of a topic (header: topic; body: GroupList).
QUERY_TOPIC_CONSUME_BY_WHO = 300


def namesrv_option(f: Any) -> Any:
    return click.option("-n", "--namesrvAddr", "namesrv", metavar="ADDR", help=NAMESRV_HELP)(f)


@dataclass
class _Servers:
    """The name servers of -n and one blocking connection per address."""

    addresses: list[str]
    timeout: float
    remoting: BlockingRemoting

    def call(self, address: str, request: RemotingCommand) -> RemotingCommand:
        host, port = split_address(address, lenient=True)
        try:
            return self.remoting.call(host, port, request, time.monotonic() + self.timeout)
        except UnreachableError as exc:
            raise UnreachableError(f"{self.what(address)} {address}: {exc}", [address]) from None

    def ok(self, address: str, request: RemotingCommand, accept: tuple[int, ...] = ()) -> RemotingCommand:
        answer = self.call(address, request)
        if answer.code != ResponseCode.SUCCESS and answer.code not in accept:
            raise RemoteError(answer.code, f"{self.what(address)} {address}: {answer.remark or code_name(answer.code)}")
        return answer

    def what(self, address: str) -> str:
        """What an address is, in errors: one of -n's name servers, else a broker found through them."""
        return "name server" if address in self.addresses else "broker"

    def first(self, request: RemotingCommand, accept: tuple[int, ...] = ()) -> RemotingCommand:
        """The answer of the first name server that answers (for reads, which any of them serves)."""
        unreachable: list[str] = []
        for address in self.addresses:
            try:
                return self.ok(address, request, accept)
            except UnreachableError:
                unreachable.append(address)
        raise UnreachableError(f"no name server reachable at {';'.join(self.addresses)}", unreachable)


def _servers(app: App, namesrv: str | None, *, write: bool = False) -> _Servers:
    return _Servers(parse_addresses(namesrv), app.timeout,
                    BlockingRemoting(signer=signer(app.token) if write else None))


def _decode(body_class: type[bodies.Body], answer: RemotingCommand, what: str) -> Any:
    try:
        return body_class.decode(answer.body)
    except RemotingError as exc:
        raise MqctlError(f"the name server answered a malformed {what}: {exc}") from None


# ---------------------------------------------------------------------------------------------- topicList
@click.command("topicList")
@namesrv_option
@click.option("-c", "--clusterModel", "cluster_model", is_flag=True,
              help="With each topic's cluster and consumer groups (asks each topic's route, and a broker "
                   "of it for its groups).")
@format_option
@pass_app
def topic_list(app: App, namesrv: str | None, cluster_model: bool, fmt: str) -> None:
    """List every topic the name server routes (GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 206, to the first name
    server that answers).

    \b
    Examples:
      mqctl topicList -n 127.0.0.1:9878
      mqctl topicList -n 10.0.0.5:9876 -c --format mqadmin   # a RocketMQ name server
    """
    servers = _servers(app, namesrv)
    try:
        listed = _decode(bodies.TopicList, servers.first(make_request(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 0)),
                         "topic list")
        topics = hash_map_order(listed.topic_list)  # as mqadmin's HashSet iterates them
        rows = _cluster_rows(servers, topics) if cluster_model else None
    finally:
        servers.remoting.close()
    _show_topics(app, fmt, topics, rows)


def _cluster_rows(servers: _Servers, topics: list[str]) -> list[tuple[str, str, str]]:
    info = _decode(bodies.ClusterInfo, servers.first(make_request(RC.GET_BROKER_CLUSTER_INFO, 0)), "cluster info")
    rows: list[tuple[str, str, str]] = []
    for topic in topics:
        if topic.startswith(_HIDDEN_PREFIXES):
            continue
        cluster, groups = "", [""]
        try:  # as mqadmin: a topic whose route or groups cannot be read is listed without them
            route = _decode(bodies.TopicRouteData, servers.first(make_request(
                RC.GET_ROUTEINFO_BY_TOPIC, 0, h.GetRouteInfoRequestHeader(topic=topic).to_ext_fields())), "route")
            cluster = _cluster_of(route, info)
            groups = _groups(servers, route, topic) or [""]
        except MqctlError:
            pass
        rows.extend((cluster, topic, group) for group in groups)
    return rows


def _cluster_of(route: bodies.TopicRouteData, info: bodies.ClusterInfo) -> str:
    if not route.broker_datas:
        return ""
    name = route.broker_datas[0].broker_name
    return next((c for c, names in info.cluster_addr_table.items() if name in names), "")


def _groups(servers: _Servers, route: bodies.TopicRouteData, topic: str) -> list[str]:
    """The consumer groups a broker of the topic knows (its master's, else any replica's)."""
    return _groups_answered(servers, route, topic)[0]


def _groups_answered(servers: _Servers, route: bodies.TopicRouteData, topic: str) -> tuple[list[str], int]:
    """``_groups``, and the version of the broker that answered (0 if none did)."""
    if not route.broker_datas:
        return [], 0
    addrs = route.broker_datas[0].broker_addrs
    address = addrs.get(0) or next(iter(addrs.values()), None)
    if address is None:
        return [], 0
    answer = servers.call(address, make_request(QUERY_TOPIC_CONSUME_BY_WHO, 0, {"topic": topic}))
    if answer.code != ResponseCode.SUCCESS:
        return [], answer.version
    try:
        value = fastjson.loads(answer.body)
    except RemotingError:
        return [], answer.version
    groups = value.get("groupList") if isinstance(value, dict) else None
    listed = hash_map_order(g for g in groups if isinstance(g, str)) if isinstance(groups, list) else []
    return listed, answer.version


def _front(text: str, width: int) -> str:
    """UtilAll.frontStringAtLeast: the first ``width`` characters."""
    return text[:width]


@terminal_safe
def _show_topics(app: App, fmt: str, topics: list[str], rows: list[tuple[str, str, str]] | None) -> None:
    if fmt == "json":
        app.print_json({"topics": topics} if rows is None else
                       {"topics": [{"cluster": c, "topic": t, "consumerGroup": g} for c, t, g in rows]})
    elif fmt == "mqadmin":
        if rows is None:
            app.print_text("".join(f"{t}\n" for t in topics))
        else:
            text = f"{'#Cluster Name':<20}  {'#Topic':<48}  {'#Consumer Group':<48}\n"
            text += "".join(f"{_front(c, 20):<20}  {_front(t, 64):<64}  {_front(g, 64):<64}\n" for c, t, g in rows)
            app.print_text(text)
    else:
        table = Table(title=f"{len(topics)} topics", title_justify="left")
        if rows is None:
            table.add_column("Topic")
            for topic in sorted(topics):
                table.add_row(topic)
        else:
            for column in ("Cluster", "Topic", "Consumer group"):
                table.add_column(column)
            for row in sorted(rows, key=lambda r: (r[1], r[2])):
                table.add_row(*row)
        app.print(table)


# ---------------------------------------------------------------------------------------------- KV config
@click.command("updateKvConfig")
@namesrv_option
@click.option("-s", "--namespace", required=True, help="Namespace (ORDER_TOPIC_CONFIG: a topic's orderTopicConf).")
@click.option("-k", "--key", required=True, help="Key.")
@click.option("-v", "--value", required=True, help="Value.")
@format_option
@pass_app
def update_kv_config(app: App, namesrv: str | None, namespace: str, key: str, value: str, fmt: str) -> None:
    """Set a key of the name servers' KV config (PUT_KV_CONFIG, 100, to every name server given, as mqadmin
    does; our controllers replicate it, so one of them is enough).

    \b
    Examples:
      mqctl updateKvConfig -n 127.0.0.1:9878 -s ORDER_TOPIC_CONFIG -k TopicOrder -v 'broker-a:4;broker-b:4'
    """
    header = h.PutKVConfigRequestHeader(namespace=namespace.strip(), key=key.strip(), value=value.strip())
    _write_all(app, namesrv, make_request(RC.PUT_KV_CONFIG, 0, header.to_ext_fields()))
    _show_done(app, fmt, ["create or update kv config to namespace success."],
               {"namespace": header.namespace, "key": header.key, "value": header.value},
               f"Set {header.namespace} / {header.key} = {header.value}.")


@click.command("deleteKvConfig")
@namesrv_option
@click.option("-s", "--namespace", required=True, help="Namespace.")
@click.option("-k", "--key", required=True, help="Key.")
@format_option
@pass_app
def delete_kv_config(app: App, namesrv: str | None, namespace: str, key: str, fmt: str) -> None:
    """Delete a key of the name servers' KV config (DELETE_KV_CONFIG, 102, to every name server given).

    \b
    Examples:
      mqctl deleteKvConfig -n 127.0.0.1:9878 -s ORDER_TOPIC_CONFIG -k TopicOrder
    """
    header = h.DeleteKVConfigRequestHeader(namespace=namespace.strip(), key=key.strip())
    _write_all(app, namesrv, make_request(RC.DELETE_KV_CONFIG, 0, header.to_ext_fields()))
    _show_done(app, fmt, ["delete kv config from namespace success."],
               {"namespace": header.namespace, "key": header.key, "deleted": True},
               f"Deleted {header.namespace} / {header.key}.")


@click.command("getKvConfig")
@namesrv_option
@click.option("-s", "--namespace", required=True, help="Namespace.")
@click.option("-k", "--key", help="One key (default: the whole namespace).")
@format_option
@pass_app
def get_kv_config(app: App, namesrv: str | None, namespace: str, key: str | None, fmt: str) -> None:
    """Show a namespace of the name server's KV config, or one key (GET_KVLIST_BY_NAMESPACE, 219, or
    GET_KV_CONFIG, 101, to the first name server that answers). mqadmin has no such command: its format
    prints key=value lines.

    \b
    Examples:
      mqctl getKvConfig -n 127.0.0.1:9878 -s ORDER_TOPIC_CONFIG
      mqctl getKvConfig -s ORDER_TOPIC_CONFIG -k TopicOrder --format json
    """
    servers = _servers(app, namesrv)
    try:
        if key is None:
            request = make_request(RC.GET_KVLIST_BY_NAMESPACE, 0,
                                   h.GetKVListByNamespaceRequestHeader(namespace=namespace).to_ext_fields())
            table = dict(_decode(bodies.KVTable, servers.first(request), "KV table").table)
        else:
            answer = servers.first(make_request(RC.GET_KV_CONFIG, 0, h.GetKVConfigRequestHeader(
                namespace=namespace, key=key).to_ext_fields()))
            table = {key: h.GetKVConfigResponseHeader.from_ext_fields(answer.ext_fields).value or ""}
    finally:
        servers.remoting.close()
    _show_kv(app, fmt, namespace, table)


@terminal_safe
def _show_kv(app: App, fmt: str, namespace: str, table: dict[str, str]) -> None:
    if fmt == "json":
        app.print_json({"namespace": namespace, "table": dict(sorted(table.items()))})
    elif fmt == "mqadmin":
        app.print_text("".join(f"{k}={table[k]}\n" for k in hash_map_order(table)))
    else:
        view = Table(title=f"KV config {namespace}", title_justify="left")
        view.add_column("Key")
        view.add_column("Value")
        for k, v in sorted(table.items()):
            view.add_row(k, v)
        app.print(view)


def _write_all(app: App, namesrv: str | None, request: RemotingCommand) -> list[str]:
    """Send a write to every name server given; the first refusal fails the command (as mqadmin's)."""
    servers = _servers(app, namesrv, write=True)
    try:
        for address in servers.addresses:
            servers.ok(address, request)
    finally:
        servers.remoting.close()
    return servers.addresses


@terminal_safe
def _show_done(app: App, fmt: str, mqadmin: list[str], doc: dict[str, Any], table: str) -> None:
    """``mqadmin``: mqadmin's lines (the values in them are cleaned; the layout's newlines are added here)."""
    if fmt == "json":
        app.print_json(doc)
    elif fmt == "mqadmin":
        app.print_text("".join(f"{line}\n" for line in mqadmin))
    else:
        app.print(Text(table, style="green"))


# ---------------------------------------------------------------------------------------------- configuration
@click.command("getNamesrvConfig")
@namesrv_option
@format_option
@pass_app
def get_namesrv_config(app: App, namesrv: str | None, fmt: str) -> None:
    """Show the configuration of every name server given (GET_NAMESRV_CONFIG, 319, to each): our controllers
    answer the name-server properties they act on.

    \b
    Examples:
      mqctl getNamesrvConfig -n '127.0.0.1:9878;127.0.0.1:9868;127.0.0.1:9858'
    """
    servers = _servers(app, namesrv)
    configs = []
    try:
        for address in servers.addresses:
            text = servers.ok(address, make_request(RC.GET_NAMESRV_CONFIG, 0)).body.decode("utf-8", "replace")
            try:
                configs.append((address, parse_properties(text, f"name server {address}'s config")))
            except ConfigError as exc:
                raise MqctlError(f"name server {address} answered a config that is not properties text: {exc}") \
                    from None
    finally:
        servers.remoting.close()
    _show_configs(app, fmt, configs)


@terminal_safe
def _show_configs(app: App, fmt: str, configs: list[tuple[str, dict[str, str]]]) -> None:
    if fmt == "json":
        app.print_json({"nameServers": [{"address": a, "config": c} for a, c in configs]})
    elif fmt == "mqadmin":  # a HashMap(4) of the servers, each a Properties loaded line by line
        by_address = dict(configs)
        text = ""
        for address in hash_map_order([a for a, _ in configs], 4):
            config = by_address[address]
            text += f"============{address}============\n"
            text += "".join(f"{k:<50}=  {config[k]}\n" for k in concurrent_hash_map_order(config))
        app.print_text(text)
    else:
        for address, config in configs:
            table = Table(title=f"Name server {address}", title_justify="left")
            table.add_column("Property")
            table.add_column("Value")
            for key, value in config.items():
                table.add_row(key, value)
            app.print(table)


@click.command("updateNamesrvConfig")
@namesrv_option
@click.option("-k", "--key", required=True, help="Property name (our controllers: orderMessageEnable, "
                                                   "enableAllTopicList).")
@click.option("-v", "--value", required=True, help="New value.")
@format_option
@pass_app
def update_namesrv_config(app: App, namesrv: str | None, key: str, value: str, fmt: str) -> None:
    """Change a property of every name server given (UPDATE_NAMESRV_CONFIG, 318, to each). Our controllers
    take orderMessageEnable and enableAllTopicList, persisted across restarts, and refuse any other key.

    \b
    Examples:
      mqctl updateNamesrvConfig -n '127.0.0.1:9878;127.0.0.1:9868;127.0.0.1:9858' -k orderMessageEnable -v true
    """
    key, value = key.strip(), value.strip()
    addresses = _write_all(app, namesrv, make_request(RC.UPDATE_NAMESRV_CONFIG, 0, None,
                                                      f"{key}={value}\n".encode()))
    listed = f"[{', '.join(addresses)}]" if namesrv else ""
    _show_done(app, fmt, [f"update name server config success!{listed}", f"{key} : {value}"],
               {"nameServers": addresses, "key": key, "value": value}, f"Set {key}={value} on {', '.join(addresses)}.")


# ---------------------------------------------------------------------------------------------- write permission
def _perm_command(name: str, code: int, verb: str, field: str) -> click.Command:
    @click.command(name)
    @namesrv_option
    @click.option("-b", "--brokerName", "broker_name", required=True, help="Broker group name.")
    @format_option
    @pass_app
    def command(app: App, namesrv: str | None, broker_name: str, fmt: str) -> None:
        broker_name = broker_name.strip()
        servers = _servers(app, namesrv, write=True)
        results: list[tuple[str, int | None, str | None]] = []
        header = {"brokerName": broker_name}  # Wipe/AddWritePermOfBrokerRequestHeader: the same one field
        try:
            for address in servers.addresses:
                try:
                    answer = servers.ok(address, make_request(code, 0, header))
                    results.append((address, int(answer.ext_fields.get(field, "0")), None))
                except (MqctlError, ValueError) as exc:
                    results.append((address, None, str(exc)))
        finally:
            servers.remoting.close()
        _show_perm(app, fmt, verb, broker_name, results)
        failed = [a for a, count, _ in results if count is None]
        if failed:
            raise MqctlError(f"{verb} write perm failed on {', '.join(failed)}")
    return command


@terminal_safe
def _show_perm(app: App, fmt: str, verb: str, broker: str, results: list[tuple[str, int | None, str | None]]) -> None:
    if fmt == "json":
        app.print_json({"brokerName": broker, "nameServers": [
            {"address": a, "topicCount": n, "error": e} for a, n, e in results]})
    elif fmt == "mqadmin":
        app.print_text("".join(
            f"{verb} write perm of broker[{broker}] in name server[{a}] OK, {n}\n" if n is not None else
            f"{verb} write perm of broker[{broker}] in name server[{a}] Failed\n" for a, n, _ in results))
    else:
        for address, count, error in results:
            if count is None:
                app.warn(f"name server {address}: {error}")
            else:
                app.print(Text(f"{verb.capitalize()} write permission of {broker} on {address}: {count} topics.",
                               style="green"))


wipe_write_perm = _perm_command("wipeWritePerm", RC.WIPE_WRITE_PERM_OF_BROKER, "wipe", "wipeTopicCount")
wipe_write_perm.help = """Make every topic of a broker group read-only in the routes of every name server given
(WIPE_WRITE_PERM_OF_BROKER, 205, to each): producers stop sending to it, consumers still read. It lasts
until the group's master registers a changed topic config, or addWritePerm. Each of our controllers keeps
its own routes: give all of them.

\b
Examples:
  mqctl wipeWritePerm -n '127.0.0.1:9878;127.0.0.1:9868;127.0.0.1:9858' -b broker-a
"""
add_write_perm = _perm_command("addWritePerm", RC.ADD_WRITE_PERM_OF_BROKER, "add", "addTopicCount")
add_write_perm.help = """Make every topic of a broker group readable and writable again in the routes of every
name server given (ADD_WRITE_PERM_OF_BROKER, 327, to each).

\b
Examples:
  mqctl addWritePerm -n '127.0.0.1:9878;127.0.0.1:9868;127.0.0.1:9858' -b broker-a
"""

COMMANDS = [topic_list, get_kv_config, update_kv_config, delete_kv_config, get_namesrv_config,
            update_namesrv_config, wipe_write_perm, add_write_perm]
