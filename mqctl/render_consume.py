"""consumeMessage in mqadmin's text: each step of the reading (services/common/tool_consumer.py) as
mqadmin prints it, and each message as the Java client's ``MessageExt.toString`` writes it (its
properties in the order of the client's ``HashMap(128)``, its body as a Java byte array)."""

from __future__ import annotations

import ipaddress

from mqctl.app import App
from mqctl.terminal import printable, terminal_safe
from services.common.tool_consumer import Event, Found, Older, PastEnd, QueueEnd
from services.remoting.javaorder import hash_map_order
from services.remoting.message import PulledMessage, SocketAddress, body_crc, offset_msg_id

__all__ = ["consumed_text", "message_ext_text", "message_queue_text", "show_consumed_mqadmin"]

#: What the Java client adds to every message it pulls: the queue's offsets at the time of the pull.
_MIN_OFFSET, _MAX_OFFSET = "MIN_OFFSET", "MAX_OFFSET"
#: ``string2messageProperties`` makes a HashMap with this capacity.
_PROPERTIES_CAPACITY = 128


@terminal_safe
def show_consumed_mqadmin(app: App, fmt: str, events: list[Event], topic: str, broker_name: str) -> None:
    """The names are cleaned on the way in; what the messages hold is cleaned where it is written."""
    app.print_text(consumed_text(events, topic, broker_name))


def message_queue_text(topic: str, broker_name: str, queue_id: int) -> str:
    return f"MessageQueue [topic={topic}, brokerName={broker_name}, queueId={queue_id}]"


def consumed_text(events: list[Event], topic: str, broker_name: str) -> str:
    return "".join(_event_text(event, topic, broker_name) for event in events)


def _event_text(event: Event, topic: str, broker_name: str) -> str:
    if isinstance(event, Older):
        if event.queue_id is None:
            return f"The oldler {event.count} message will be provided\n"  # sic, as mqadmin prints it
        return f"The older {event.count} message of the {event.queue_id} queue will be provided\n"
    if isinstance(event, Found):
        pulled = event.pulled
        return "Consume ok\n" + "".join(
            _message_line(m, broker_name, event.queue_id, pulled.min_offset, pulled.max_offset)
            for m in pulled.messages)
    queue = message_queue_text(topic, broker_name, event.queue_id)
    if isinstance(event, PastEnd):
        return f"{queue} no matched msg, offset={event.offset}\n"
    assert isinstance(event, QueueEnd)
    what = "print msg finished" if event.finished else "no matched msg"
    return f"{queue} {what}. status={event.status}, offset={event.offset}\n"


def _message_line(m: PulledMessage, broker_name: str, queue_id: int, low: int, high: int) -> str:
    properties = {**m.properties, _MIN_OFFSET: str(low), _MAX_OFFSET: str(high)}
    msg_id = properties.get("UNIQ_KEY") or offset_msg_id(m.store_host, m.commit_log_offset)
    body = printable(m.body.decode("utf-8", errors="replace"))
    return f"MSGID: {printable(msg_id)} {message_ext_text(m, broker_name, queue_id, properties)} BODY: {body}\n"


def message_ext_text(m: PulledMessage, broker_name: str, queue_id: int, properties: dict[str, str]) -> str:
    """``MessageExt.toString()`` of a pulled message (queue id and broker name as the client sets them)."""
    ordered = ", ".join(f"{printable(key)}={printable(properties[key])}"
                        for key in hash_map_order(properties, _PROPERTIES_CAPACITY))
    message = (f"Message{{topic='{printable(m.topic)}', flag={m.flag}, properties={{{ordered}}}, "
               f"body={_java_bytes(m.body)}, transactionId='null'}}")
    return (f"MessageExt [brokerName={broker_name}, queueId={queue_id}, storeSize={m.store_size}, "
            f"queueOffset={m.queue_offset}, sysFlag={m.sys_flag}, bornTimestamp={m.born_timestamp}, "
            f"bornHost={_socket_text(m.born_host)}, storeTimestamp={m.store_timestamp}, "
            f"storeHost={_socket_text(m.store_host)}, msgId={offset_msg_id(m.store_host, m.commit_log_offset)}, "
            f"commitLogOffset={m.commit_log_offset}, bodyCRC={body_crc(m.body)}, "
            f"reconsumeTimes={m.reconsume_times}, preparedTransactionOffset={m.prepared_transaction_offset}, "
            f"toString()={message}]")


def _java_bytes(data: bytes) -> str:
    """``Arrays.toString(byte[])``: signed bytes."""
    return "[" + ", ".join(str(b - 256 if b > 127 else b) for b in data) + "]"


def _socket_text(host: SocketAddress) -> str:
    """``InetSocketAddress.toString()`` of an address with no host name: ``/ip:port``, an IPv6 one in
    brackets in Java's uncompressed form."""
    if not host.v6:
        return f"/{ipaddress.IPv4Address(host.ip)}:{host.port}"
    groups = ":".join(f"{int.from_bytes(host.ip[i:i + 2], 'big'):x}" for i in range(0, 16, 2))
    return f"/[{groups}]:{host.port}"
