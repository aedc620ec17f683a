"""A transactional producer on a raw remoting connection, as RocketMQ's TransactionMQProducer behaves on the
wire: it heartbeats its producer group (so the broker has a connection to send check-backs on), sends half
messages (TRAN_MSG), ends them with END_TRANSACTION (oneway) and answers CHECK_TRANSACTION_STATE (39) with an
END_TRANSACTION marked fromTransactionCheck, with the verdict its ``decide`` gives."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace

from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting.codec import FrameDecoder, encode
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.message import TRANSACTION_PREPARED_TYPE, decode_pulled
from tests.integration.test_broker_remoting import send

Decide = Callable[[str], int]


class TxnProducer:
    def __init__(self, address: str, group: str, decide: Decide | None = None) -> None:
        host, port = address.rsplit(":", 1)
        self.group, self.decide = group, decide
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.checks: list[tuple[str, int]] = []  # (transaction id, check times) of each check-back received
        self._lock = threading.Lock()
        self._waiting: dict[int, Future[RemotingCommand]] = {}
        self._opaque = itertools.count(100)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        body = bb.HeartbeatData(f"txn-{group}-{id(self)}", (bb.ProducerData(group),), ()).encode()
        assert self.call(make_request(RequestCode.HEART_BEAT, 0, {}, body)).code == 0

    def call(self, request: RemotingCommand) -> RemotingCommand:
        opaque = next(self._opaque)
        request = replace(request, opaque=opaque)
        future: Future[RemotingCommand] = Future()
        self._waiting[opaque] = future
        self._write(request)
        return future.result(timeout=10)

    def _write(self, request: RemotingCommand) -> None:
        with self._lock:
            self.sock.sendall(encode(request))

    def half(self, topic: str, key: str, queue_id: int = 1) -> RemotingCommand:
        """Send one half message; the answer (SUCCESS, with its offsets and transaction id)."""
        request = send(topic, key.encode(), queue_id=queue_id, TRAN_MSG="true", PGROUP=self.group, UNIQ_KEY=key)
        born = {"bornTimestamp": str(int(time.time() * 1000)), "sysFlag": str(TRANSACTION_PREPARED_TYPE)}
        return self.call(replace(request, ext_fields={**request.ext_fields, **born}))

    def end(self, answer: RemotingCommand, verdict: int) -> None:
        """END_TRANSACTION for the half message a send was answered about (oneway, as the Java client sends it)."""
        ext = answer.ext_fields
        self._end(int(ext["queueOffset"]), int(ext["msgId"][-16:], 16), ext["transactionId"], verdict, False)

    def _end(self, queue_offset: int, log_offset: int, tid: str, verdict: int, from_check: bool) -> None:
        header = bh.EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=queue_offset, commit_log_offset=log_offset,
            commit_or_rollback=verdict, msg_id=tid, from_transaction_check=from_check, transaction_id=tid)
        self._write(make_request(bh.END_TRANSACTION, next(self._opaque), header.to_ext_fields(), oneway=True))

    def close(self) -> None:
        """The producer "crashes": its connection goes without a word."""
        self.sock.close()

    def _read(self) -> None:
        decoder = FrameDecoder()
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            for command in decoder.feed(data):
                if command.is_response:
                    future = self._waiting.pop(command.opaque, None)
                    if future is not None:
                        future.set_result(command)
                elif command.code == bh.CHECK_TRANSACTION_STATE:
                    self._check(command)

    def _check(self, request: RemotingCommand) -> None:
        header = bh.CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
        (message,) = decode_pulled(request.body)
        tid = message.properties["UNIQ_KEY"]
        self.checks.append((tid, int(message.properties.get("TRANSACTION_CHECK_TIMES", "0"))))
        if self.decide is not None:
            self._end(header.tran_state_table_offset, header.commit_log_offset, tid, self.decide(tid), True)
