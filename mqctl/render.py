"""Every output format of every command lives here: ``table`` (rich), ``mqadmin`` (RocketMQ's exact
text) and ``json`` (stable field names, documented in docs/cli.md)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from mqctl.app import App
from mqctl.terminal import terminal_safe
from services.common.text import java_text as _java
from services.remoting.javaorder import concurrent_hash_map_order, hash_map_order


# ---------------------------------------------------------------------- getControllerMetaData
def metadata_json(data: dict[str, Any]) -> dict[str, Any]:
    return {"group": data.get("group"), "leaderId": data.get("controllerLeaderId"),
            "leaderAddress": data.get("controllerLeaderAddress"), "peers": list(data.get("peers") or [])}


@terminal_safe
def show_metadata(app: App, fmt: str, data: dict[str, Any]) -> None:
    doc = metadata_json(data)
    if fmt == "json":
        app.print_json(doc)
        return
    if fmt == "mqadmin":
        text = (f"\n#ControllerGroup\t{_java(doc['group'])}\n#ControllerLeaderId\t{_java(doc['leaderId'])}"
                f"\n#ControllerLeaderAddress\t{_java(doc['leaderAddress'])}")
        text += "".join(f"\n#Peer:\t{p}" for p in doc["peers"]) + "\n"
        app.print_text(text)
        return
    table = Table(title=f"Controller group {doc['group']}", title_justify="left")
    for col in ("Peer", "Address", "Role"):
        table.add_column(col)
    for peer in doc["peers"]:
        peer_id, _, address = str(peer).partition(":")
        role = "leader" if peer_id == doc["leaderId"] else "follower"
        table.add_row(peer_id, address, Text(role, style="bold green" if role == "leader" else ""))
    app.print(table)
    if doc["leaderId"] is None:
        app.print(Text("No leader: the controller group has no majority right now.", style="red"))


# ---------------------------------------------------------------------- getSyncStateSet
def _replicas(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"brokerId": r["brokerId"], "brokerAddress": r["brokerAddress"], "alive": r["alive"]} for r in items]


def sync_state_json(brokers: list[dict[str, Any]]) -> dict[str, Any]:
    return {"brokers": [{
        "clusterName": b.get("clusterName"), "brokerName": b.get("brokerName"),
        "masterBrokerId": b.get("masterBrokerId"), "masterAddress": b.get("masterAddress"),
        "masterEpoch": b.get("masterEpoch"), "syncStateSetEpoch": b.get("syncStateSetEpoch"),
        "inSyncReplicas": _replicas(b.get("inSyncReplicas") or []),
        "notInSyncReplicas": _replicas(b.get("notInSyncReplicas") or []),
    } for b in brokers]}


def _replica_identity(name: str, r: dict[str, Any]) -> str:
    return (f"ReplicaIdentity{{brokerName='{name}', brokerId={r['brokerId']}, "
            f"brokerAddress='{r['brokerAddress']}', alive={_java(r['alive'])}}}")


@terminal_safe
def show_sync_state(app: App, fmt: str, brokers: list[dict[str, Any]]) -> None:
    doc = sync_state_json(brokers)
    if fmt == "json":
        app.print_json(doc)
        return
    if fmt == "mqadmin":
        app.print_text("".join(_sync_state_mqadmin(b) for b in doc["brokers"]))
        return
    for b in doc["brokers"]:
        app.print(_sync_state_table(b))


def _sync_state_mqadmin(b: dict[str, Any]) -> str:
    text = (f"\n#brokerName\t{b['brokerName']}\n#MasterBrokerId\t{_java(b['masterBrokerId'])}"
            f"\n#MasterAddr\t{_java(b['masterAddress'])}\n#MasterEpoch\t{b['masterEpoch']}"
            f"\n#SyncStateSetEpoch\t{b['syncStateSetEpoch']}\n#SyncStateSetNums\t{len(b['inSyncReplicas'])}\n")
    text += "".join(f"\nInSyncReplica:\t{_replica_identity(b['brokerName'], r)}\n" for r in b["inSyncReplicas"])
    text += "".join(f"\nNotInSyncReplica:\t{_replica_identity(b['brokerName'], r)}\n"
                    for r in b["notInSyncReplicas"])
    return text


def _sync_state_table(b: dict[str, Any]) -> Table:
    master = b["masterBrokerId"]
    title = (f"{b['clusterName']}/{b['brokerName']}  master={_java(master)} ({_java(b['masterAddress'])})  "
             f"masterEpoch={b['masterEpoch']}  syncStateSetEpoch={b['syncStateSetEpoch']}")
    table = Table(title=title, title_justify="left")
    for col in ("Broker id", "Address", "Role", "In SyncStateSet", "Alive"):
        table.add_column(col)
    rows = [(r, True) for r in b["inSyncReplicas"]] + [(r, False) for r in b["notInSyncReplicas"]]
    for r, in_sync in rows:
        role = "master" if r["brokerId"] == master else "slave"
        table.add_row(str(r["brokerId"]), r["brokerAddress"], role, "yes" if in_sync else "no",
                      Text("yes", style="green") if r["alive"] else Text("no", style="red"))
    return table


# ---------------------------------------------------------------------- electMaster
def elect_json(data: dict[str, Any]) -> dict[str, Any]:
    return {"clusterName": data.get("clusterName"), "brokerName": data.get("brokerName"),
            "masterBrokerId": data.get("masterBrokerId"), "masterAddress": data.get("masterAddress"),
            "masterEpoch": data.get("masterEpoch"), "syncStateSetEpoch": data.get("syncStateSetEpoch"),
            "brokers": [{"brokerId": b["brokerId"], "brokerAddress": b["brokerAddress"]}
                        for b in data.get("brokers") or []]}


@terminal_safe
def show_elect(app: App, fmt: str, data: dict[str, Any]) -> None:
    doc = elect_json(data)
    if fmt == "json":
        app.print_json(doc)
        return
    if fmt == "mqadmin":
        text = (f"\n#ClusterName\t{_java(doc['clusterName'])}\n#BrokerName\t{_java(doc['brokerName'])}"
                f"\n#BrokerMasterAddr\t{_java(doc['masterAddress'])}\n#MasterEpoch\t{_java(doc['masterEpoch'])}"
                f"\n#SyncStateSetEpoch\t{_java(doc['syncStateSetEpoch'])}\n")
        # no "#Broker" lines: mqadmin reads the answer's body as a BrokerMemberGroup, whose field names it
        # does not match, so its member list is always empty (docs/compatibility.md)
        app.print_text(text)
        return
    app.print(Text(f"Broker {doc['masterBrokerId']} ({doc['masterAddress']}) is master of "
                   f"{doc['clusterName']}/{doc['brokerName']}; masterEpoch {doc['masterEpoch']}, "
                   f"syncStateSetEpoch {doc['syncStateSetEpoch']}.", style="green"))


# ---------------------------------------------------------------------- config
@terminal_safe
def show_configs(app: App, fmt: str, configs: list[tuple[str, dict[str, Any]]]) -> None:
    if fmt == "json":
        app.print_json({"controllers": [{"address": a, "config": c} for a, c in configs]})
        return
    if fmt == "mqadmin":  # mqadmin: a HashMap(4) of the nodes, each a Properties loaded line by line
        by_address = dict(configs)
        text = ""
        for address in hash_map_order([a for a, _ in configs], 4):
            config = by_address[address]
            text += f"============{address}============\n"
            text += "".join(f"{k:<50}=  {_java(config[k])}\n" for k in concurrent_hash_map_order(config))
        app.print_text(text)
        return
    for address, config in configs:
        table = Table(title=f"Controller {address}", title_justify="left")
        table.add_column("Property")
        table.add_column("Value")
        for key, value in config.items():
            table.add_row(key, _java(value))
        app.print(table)


@terminal_safe
def show_config_updated(app: App, fmt: str, addresses: list[str], key: str, value: str) -> None:
    if fmt == "json":
        app.print_json({"controllers": addresses, "key": key, "value": value})
    elif fmt == "mqadmin":
        app.print_text(f"update controller config success![{', '.join(addresses)}]\n{key} : {value}\n")
    else:
        app.print(Text(f"Set {key}={value} on {', '.join(addresses)}.", style="green"))


@terminal_safe
def show_cleaned(app: App, fmt: str, doc: dict[str, Any]) -> None:
    if fmt == "json":
        app.print_json(doc)
    elif fmt == "mqadmin":
        app.print_text(f"clear broker {doc['brokerName']} metadata from controller success! \n")
    else:
        what = f"ids {doc['brokerControllerIdsToClean']}" if doc["brokerControllerIdsToClean"] else "all ids"
        app.print(Text(f"Cleaned {what} of broker {doc['brokerName']} from the controller.", style="green"))
