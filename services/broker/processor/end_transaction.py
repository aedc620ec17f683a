"""END_TRANSACTION (37): RocketMQ's EndTransactionProcessor. A producer's commit or rollback of a half message
(oneway from the Java client: served, never answered), on the master only; the writes and the rules are the
transaction service's (services/broker/transaction/service.py). A slave answers SLAVE_NOT_AVAILABLE, as
RocketMQ's does."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from services.broker.processor.common import answer
from services.common.codes import ResponseCode
from services.common.remoting_conn import RemotingConnection
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand

__all__ = ["EndTransactionProcessor"]

log = logging.getLogger(__name__)

End = Callable[[bh.EndTransactionRequestHeader], Awaitable[tuple[int, str | None]]]


class EndTransactionProcessor:
    """Built with whether the broker is master now and the transaction service's ``end``."""

    def __init__(self, is_master: Callable[[], bool], end: End) -> None:
        self.is_master = is_master
        self.end = end

    async def serve(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        header = bh.EndTransactionRequestHeader.from_ext_fields(request.ext_fields)
        if not self.is_master():
            return answer(request, ResponseCode.SLAVE_NOT_AVAILABLE,
                          "Message store is slave mode, so end transaction is forbidden.")
        code, remark = await self.end(header)
        if code != ResponseCode.SUCCESS:
            log.info("END_TRANSACTION from %s for offset %d: %s", conn.peer, header.commit_log_offset, remark)
        return answer(request, code, remark)
