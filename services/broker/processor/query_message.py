"""QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33): finding stored messages, as RocketMQ's QueryMessageProcessor
does, for mqadmin's queryMsgByKey, queryMsgByUniqueKey and queryMsgById and the Dashboard's message search.

12 looks the key up in the key index (key_index.py) and answers the newest messages found, in log order, in
RocketMQ's stored-message encoding (as a pull answers them), at most ``maxNum`` (capped at 64, RocketMQ's
``maxMsgsNumBatch``; a unique-key query takes 32, its ``defaultQueryMaxNum``), with the index's last store
time and offset in the header; none is QUERY_NOT_FOUND with RocketMQ's remark. 33 answers the message at a
commitlog offset (the second half of an offset message id), or SYSTEM_ERROR naming the offset. Only confirmed
messages are found, as only they are consumed.
"""

from __future__ import annotations

import asyncio

from services.broker.processor.common import answer
from services.broker.record import valid_topic
from services.broker.remoting_messages import to_pulled
from services.broker.store import MessageStore
from services.common.codes import ResponseCode
from services.common.remoting_conn import RemotingConnection
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand
from services.remoting.errors import HeaderFieldError
from services.remoting.message import SocketAddress, encode_pulled

__all__ = ["DEFAULT_QUERY_MAX_NUM", "MAX_MSGS_NUM_BATCH", "QueryMessageProcessor"]

MAX_MSGS_NUM_BATCH = 64
DEFAULT_QUERY_MAX_NUM = 32
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
MAX_KEY_CHARS = 1024


class QueryMessageProcessor:
    """Built with the store and the address written into each message's id (its store host)."""

    def __init__(self, store: MessageStore, store_host: SocketAddress) -> None:
        self.store = store
        self.store_host = store_host

    async def query(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.QueryMessageRequestHeader.from_ext_fields(request.ext_fields)
        if not valid_topic(h.topic):
            raise HeaderFieldError("QueryMessageRequestHeader", "topic", "must be 1-127 of letters, digits, '%', '|', "
                                   "'_' and '-'")
        if not 0 < len(h.key) <= MAX_KEY_CHARS:
            raise HeaderFieldError("QueryMessageRequestHeader", "key", f"must be 1-{MAX_KEY_CHARS} characters")
        unique = request.ext_fields.get(UNIQUE_KEY_QUERY) == "true"
        limit = DEFAULT_QUERY_MAX_NUM if unique else max(0, min(h.max_num, MAX_MSGS_NUM_BATCH))

        def find() -> tuple[list[bytes], tuple[int, int]]:
            records = self.store.query_messages(h.topic, h.key, limit, h.begin_timestamp, h.end_timestamp)
            return [encode_pulled(to_pulled(r, self.store_host)) for r in records], self.store.keys.last_update

        found, (stamp, offset) = await asyncio.to_thread(find)
        header = bh.QueryMessageResponseHeader(index_last_update_timestamp=stamp,
                                               index_last_update_phyoffset=offset).to_ext_fields()
        if not found:
            return answer(request, ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                          header)
        return answer(request, ResponseCode.SUCCESS, None, header, b"".join(found))

    async def view(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.ViewMessageRequestHeader.from_ext_fields(request.ext_fields)
        record = await asyncio.to_thread(self.store.read_message, h.offset)
        if record is None:
            return answer(request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        return answer(request, ResponseCode.SUCCESS, None, None, encode_pulled(to_pulled(record, self.store_host)))
