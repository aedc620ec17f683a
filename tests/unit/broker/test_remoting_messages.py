"""What a send over the remoting protocol becomes in the store (services/broker/remoting_messages.py)."""

from __future__ import annotations

from services.broker.remoting_messages import WIRE, Stamp, to_store_messages
from services.remoting.broker_headers import SendMessageRequestHeader
from services.remoting.message import SocketAddress, encode_properties


def send(properties: dict[str, str]) -> SendMessageRequestHeader:
    return SendMessageRequestHeader(producer_group="pg", topic="T", default_topic="TBW102", default_topic_queue_nums=4,
                                    queue_id=1, sys_flag=0, born_timestamp=1700000000000, flag=0,
                                    properties=encode_properties(properties))


def test_the_broker_stamps_region_trace_and_cluster_in_rocketmqs_order() -> None:
    """As RocketMQ's broker adds them: a consumer's HashMap then lists them in the same order as from
    RocketMQ's (mqadmin's consumeMessage prints that order)."""
    [message] = to_store_messages(send({"KEYS": "k", "TAGS": "t", "UNIQ_KEY": "AB", "WAIT": "true"}), b"x",
                                  SocketAddress.parse("127.0.0.1", 5), Stamp("DefaultCluster"))
    assert (message.keys, message.tags) == ("k", "t")
    assert list(message.properties) == ["UNIQ_KEY", "WAIT", "MSG_REGION", "TRACE_ON", "CLUSTER", WIRE]
    assert (message.properties["MSG_REGION"], message.properties["TRACE_ON"]) == ("DefaultRegion", "true")


def test_a_message_without_an_id_gets_one_and_the_broker_settings_are_written() -> None:
    [message] = to_store_messages(send({}), b"x", SocketAddress.parse("127.0.0.1", 5),
                                  Stamp("C1", region="Hangzhou", trace_on=False))
    assert len(message.properties["UNIQ_KEY"]) == 32
    assert (message.properties["MSG_REGION"], message.properties["TRACE_ON"], message.properties["CLUSTER"]) == (
        "Hangzhou", "false", "C1")
