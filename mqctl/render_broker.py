"""Output formats of the broker commands (table, mqadmin, json)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from mqctl.app import App
from mqctl.terminal import terminal_safe

#: The broker's put status as the Java producer names it (SendStatus); the others have the same names.
SEND_STATUS = {"PUT_OK": "SEND_OK"}


@terminal_safe
def show_sent(app: App, fmt: str, results: list[dict[str, Any]]) -> None:
    docs = [{"brokerName": r.get("brokerName"), "brokerAddr": r.get("brokerAddr"), "status": r.get("status"),
             "msgId": r.get("msgId"), "uniqKey": r.get("uniqKey"), "queueId": r.get("queueId"),
             "queueOffset": r.get("queueOffset"), "commitLogOffset": r.get("commitLogOffset")} for r in results]
    if fmt == "json":
        app.print_json(docs[0] if len(docs) == 1 else {"results": docs})
        return
    if fmt == "mqadmin":  # as the Java producer's SendResult: its SendStatus, and the message's own id
        text = "%-32s  %-4s  %-20s    %s\n" % ("#Broker Name", "#QID", "#Send Result", "#MsgId")
        for d in docs:
            status = SEND_STATUS.get(str(d["status"]), d["status"])
            text += "%-32s  %-4s  %-20s    %s\n" % (d["brokerName"] or d["brokerAddr"], d["queueId"], status,
                                                   d["uniqKey"] or d["msgId"])
        app.print_text(text)
        return
    table = Table(title=f"Sent to {docs[0]['brokerAddr']}", title_justify="left")
    for col in ("Status", "Msg id", "Queue", "Queue offset", "Commitlog offset"):
        table.add_column(col)
    for d in docs[-20:]:
        table.add_row(Text(str(d["status"]), style="green" if d["status"] == "PUT_OK" else "red"), d["msgId"],
                      str(d["queueId"]), str(d["queueOffset"]), str(d["commitLogOffset"]))
    if len(docs) > 20:
        table.caption = f"last 20 of {len(docs)} messages"
    app.print(table)


@terminal_safe
def show_consumed(app: App, fmt: str, address: str, messages: list[dict[str, Any]]) -> None:
    if fmt == "json":
        app.print_json({"brokerAddr": address, "messages": messages})
        return
    if fmt == "mqadmin":
        text = ""
        for m in messages:
            body = m["body"] if m["body"] is not None else f"<binary, base64 {m['bodyBase64']}>"
            text += (f"#Topic\t{m['topic']}\n#QueueId\t{m['queueId']}\n#QueueOffset\t{m['queueOffset']}\n"
                     f"#MsgId\t{m['msgId']}\n#Keys\t{m['keys']}\n#Tags\t{m['tags']}\n"
                     f"#StoreTimestamp\t{m['storeTimestamp']}\n#Body\t{body}\n\n")
        app.print_text(text)
        return
    table = Table(title=f"{len(messages)} message(s) from {address}", title_justify="left")
    for col in ("Queue", "Offset", "Keys", "Tags", "Body"):
        table.add_column(col)
    for m in messages:
        body = m["body"] if m["body"] is not None else "<binary>"
        table.add_row(str(m["queueId"]), str(m["queueOffset"]), m["keys"], m["tags"], body[:80])
    app.print(table)


def _entry_text(e: dict[str, Any]) -> str:
    return f"EpochEntry{{epoch={e['epoch']}, startOffset={e['startOffset']}, endOffset={e['endOffset']}}}"


@terminal_safe
def show_epochs(app: App, fmt: str, rows: list[dict[str, Any]]) -> None:
    if fmt == "json":
        app.print_json({"brokers": rows})
        return
    if fmt == "mqadmin":
        text = ""
        for r in rows:
            if not r.get("reachable", True):
                continue  # mqadmin prints nothing for a broker that does not answer (the error goes to stderr)
            shown_id = 0 if r.get("role") == "MASTER" else r["brokerId"]
            text += (f"\n#clusterName\t{r['clusterName']}\n#brokerName\t{r['brokerName']}\n"
                     f"#brokerAddr\t{r['brokerAddr']}\n#brokerId\t{shown_id}")
            text += "".join(f"\n#Epoch: {_entry_text(e)}" for e in r["epochEntries"]) + "\n"
        app.print_text(text)
        return
    for r in rows:
        title = f"{r['clusterName']}/{r['brokerName']} broker {r['brokerId']} ({r['brokerAddr']})"
        if not r.get("reachable", True):
            app.print(Text(f"{title}: unreachable — {r.get('error')}", style="red"))
            continue
        table = Table(title=f"{title}  {r['role']}  maxOffset={r['maxOffset']}  confirmOffset={r['confirmOffset']}",
                      title_justify="left")
        for col in ("Epoch", "Start offset", "End offset"):
            table.add_column(col, justify="right")
        for e in r["epochEntries"]:
            table.add_row(str(e["epoch"]), str(e["startOffset"]), str(e["endOffset"]))
        app.print(table)


def _ms_text(ms: object) -> str:
    """As RocketMQ's UtilAll.timeMillisToHumanString2: local time, ``yyyy-MM-dd HH:mm:ss,SSS`` (0 is the epoch)."""
    import datetime
    millis = ms if isinstance(ms, int) and not isinstance(ms, bool) else 0
    try:
        at = datetime.datetime.fromtimestamp(millis / 1000).astimezone()
    except (OverflowError, OSError, ValueError):
        return str(millis)
    return at.strftime("%Y-%m-%d %H:%M:%S") + f",{millis % 1000:03d}"


@terminal_safe
def show_ha_status(app: App, fmt: str, rows: list[dict[str, Any]]) -> None:
    if fmt == "json":
        app.print_json({"brokers": rows})
        return
    if fmt == "mqadmin":
        app.print_text("".join(_ha_mqadmin(r) for r in rows))
        return
    for r in rows:
        if not r.get("reachable", True):
            app.print(Text(f"{r['brokerAddr']}: unreachable — {r.get('error')}", style="red"))
            continue
        head = (f"{r['clusterName']}/{r['brokerName']} broker {r['brokerId']} ({r['brokerAddr']})  {r['role']}  "
                f"masterEpoch={r['masterEpoch']}  maxOffset={r['maxOffset']}  confirmOffset={r['confirmOffset']}")
        if r["role"] != "MASTER":
            state = r.get("state", "-")
            err = f"  ERROR: {r['error']}" if r.get("error") else ""
            app.print(Text(f"{head}\n  replicating from {r.get('masterAddress')} ({state}){err}",
                           style="red" if err else ""))
            continue
        table = Table(title=head + f"  syncStateSet={r.get('syncStateSet')}", title_justify="left")
        for col in ("Slave", "Address", "Ack offset", "Lag (bytes)", "In sync", "Last caught up"):
            table.add_column(col)
        for s in r.get("slaves", []):
            ago = s.get("lastCaughtUpAgoMs")
            table.add_row(str(s["slaveId"]), s["slaveAddress"], str(s["ackOffset"]), str(s["lag"]),
                          Text("yes", style="green") if s["inSync"] else Text("no", style="red"),
                          "never" if ago is None else f"{ago / 1000:.1f}s ago")
        app.print(table)


def _ha_mqadmin(r: dict[str, Any]) -> str:
    if not r.get("reachable", True):
        return ""  # as mqadmin: nothing on stdout for a broker that does not answer; the error goes to stderr
    if r["role"] == "MASTER":
        slaves = r.get("slaves", [])
        text = (f"\n#MasterAddr\t{r['brokerAddr']}\n#MasterCommitLogMaxOffset\t{r['maxOffset']}\n"
                f"#SlaveNum\t{len(slaves)}\n#InSyncSlaveNum\t{r.get('inSyncSlaveNums', 0)}\n")
        text += "%-32s  %-16s %16s %16s %16s %16s\n" % ("#SlaveAddr", "#SlaveAckOffset", "#Diff",
                                                         "#TransferSpeed(KB/s)", "#Status", "#TransferFromWhere")
        for s in slaves:
            text += "%-32s  %-16d %16d %16.2f %16s %16d\n" % (
                s["slaveAddress"], s["ackOffset"], s["lag"], s["transferSpeedKBps"],
                "OK" if s["inSync"] else "Fall Behind", s["transferFromWhere"])
        return text
    master = r.get("masterHaAddress") or r.get("masterAddress")  # RocketMQ shows the master's HA address
    return (f"\n#MasterAddr\t{master or 'null'}\n#CommitLogMaxOffset\t{r['maxOffset']}\n"
            f"#TransferSpeed(KB/s)\t{float(r.get('transferSpeedKBps') or 0):.2f}\n"
            f"#LastReadTime\t{_ms_text(r.get('lastReadTimestamp'))}\n"
            f"#LastWriteTime\t{_ms_text(r.get('lastWriteTimestamp'))}\n"
            f"#MasterFlushOffset\t{int(r.get('masterFlushOffset') or 0)}\n")
