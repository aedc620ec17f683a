"""The Raft port's connection bounds (services/controller/raft_transport.py).

The first half drives one GuardedConnection over a real loopback TCP pair with a stand-in poller (the
test delivers the read events), writing pysyncobj frames by hand as a peer would. The second half
starts a real single-node RaftNode in this process and talks to its port.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pysyncobj import pickle as sync_pickle
from pysyncobj.encryptor import getEncryptor
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import CONNECTION_STATE

from services.controller import raft_transport
from services.controller.raft import RaftNode, RaftSettings
from services.controller.raft_transport import (
    FRAME_STALL_TIMEOUT_S,
    MAX_FRAME_BYTES,
    MAX_HANDSHAKE_BYTES,
    MAX_HANDSHAKE_FRAME_BYTES,
    MAX_UNAUTHENTICATED,
    GuardedConnection,
    guard,
)

PASSWORD = "unit-test-password"
ENCRYPTOR = getEncryptor(PASSWORD)
NONCE = b"n" * 32


def frame(message: Any, nonce: bytes | None = None, encryptor: Any = ENCRYPTOR, at: int | None = None,
          payload: bytes | None = None) -> bytes:
    """A frame as pysyncobj writes it: ``<int32 length>`` + Fernet(zlib(pickle((nonce, message))))."""
    if payload is None:
        payload = zlib.compress(sync_pickle.dumps((nonce, message) if nonce else message), 3)
    data = encryptor.encrypt_at_time(payload, int(time.monotonic()) if at is None else at)
    return struct.pack("i", len(data)) + data


class Poller:
    def __init__(self) -> None:
        self.callbacks: dict[int, Callable[[int, int], None]] = {}

    def subscribe(self, fd: int, callback: Callable[[int, int], None], mask: int) -> None:
        self.callbacks[fd] = callback

    def unsubscribe(self, fd: int) -> None:
        self.callbacks.pop(fd, None)


class Link:
    """A GuardedConnection (the controller's side) and the raw socket of the peer talking to it."""

    def __init__(self) -> None:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            self.peer = socket.create_connection(listener.getsockname())
            ours, _ = listener.accept()
        ours.setblocking(False)
        self.poller = Poller()
        self.fd = ours.fileno()
        conn = GuardedConnection(poller=self.poller, socket=ours, timeout=60.0, sendBufferSize=2 ** 16,
                                 recvBufferSize=2 ** 16, keepalive=None)
        self.conn = guard(conn, incoming=True, peer="test-peer")
        self.conn.encryptor = ENCRYPTOR
        self.received: list[Any] = []
        self.conn.setOnMessageReceivedCallback(self.received.append)
        self.largest_buffer = 0

    def pump(self) -> None:
        callback = self.poller.callbacks.get(self.fd)
        if callback is not None:
            callback(self.fd, POLL_EVENT_TYPE.READ)
            self.largest_buffer = max(self.largest_buffer, len(self.conn._buffer()))

    def send(self, data: bytes) -> None:
        """Send ``data`` as the peer and let the connection read all of it (or hang up)."""
        self.peer.sendall(data)
        select.select([self.fd], [], [], 5)
        self.pump_until(lambda: self.closed or not self._pending())

    def _pending(self) -> bool:
        try:
            return bool(self.conn._TcpConnection__socket.recv(1, socket.MSG_PEEK))
        except BlockingIOError:
            return False

    def pump_until(self, done: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, "timed out pumping the connection"
            try:
                self.pump()
            except BlockingIOError:
                pass

    @property
    def closed(self) -> bool:
        return bool(self.conn.state == CONNECTION_STATE.DISCONNECTED)

    def authenticate(self) -> None:
        """The handshake of an incoming connection: the peer's nonce, then its address under ours."""
        self.send(frame(b"p" * 32))
        self.conn.recvRandKey = NONCE  # what the transport does on the first message
        self.send(frame("127.0.0.1:1", nonce=NONCE))
        assert self.conn.authenticated and not self.closed

    def close(self) -> None:
        self.peer.close()
        self.conn.disconnect()


@pytest.fixture
def link() -> Iterator[Link]:
    made = Link()
    try:
        yield made
    finally:
        made.close()


def test_frames_cut_anywhere_are_put_back_together(link: Link) -> None:
    data = frame(b"p" * 32) + frame("second")
    for i in range(0, len(data), 7):
        link.send(data[i:i + 7])
    assert link.received == [b"p" * 32, "second"]


@pytest.mark.parametrize("size", [MAX_HANDSHAKE_FRAME_BYTES + 1, 2 ** 31 - 1, -5])
def test_an_oversized_length_before_authenticating_closes_at_once(link: Link, size: int) -> None:
    link.send(struct.pack("i", size))  # nothing of the payload is waited for
    assert link.closed and link.received == []
    link.peer.settimeout(5)
    assert link.peer.recv(1) == b""


def test_more_than_a_handshake_of_bytes_before_authenticating_closes(link: Link) -> None:
    one = frame(b"x" * 2000)  # each frame is within the bound; together they are not
    for _ in range(MAX_HANDSHAKE_BYTES // len(one) + 2):
        if not link.closed:
            link.send(one)
    assert link.closed and len(link.received) == MAX_HANDSHAKE_BYTES // len(one)


def test_after_authenticating_large_frames_pass_and_the_buffer_holds_one_frame_at_most(link: Link) -> None:
    link.authenticate()
    big = [bytes([i]) * (5 * 1024 * 1024) for i in (1, 2)]
    data = b"".join(frame(b, nonce=NONCE) for b in big)
    sender = threading.Thread(target=link.peer.sendall, args=(data,))
    sender.start()
    link.pump_until(lambda: len(link.received) == 4 or link.closed, timeout=60)
    sender.join(10)
    assert link.received[2:] == big and not link.closed
    assert link.largest_buffer <= len(data) // 2 + 2 ** 16


def test_an_authenticated_peer_is_still_bounded(link: Link) -> None:
    link.authenticate()
    link.send(struct.pack("i", MAX_FRAME_BYTES + 1))
    assert link.closed


def test_a_message_that_inflates_past_the_bound_closes(link: Link) -> None:
    link.authenticate()
    bomb = zlib.compress(sync_pickle.dumps((NONCE, b"\0" * (40 * 1024 * 1024))), 9)
    link.send(frame(None, payload=bomb))
    assert link.closed and len(link.received) == 2


@pytest.mark.parametrize("bad", [
    pytest.param(lambda: frame(b"p" * 32, encryptor=getEncryptor("wrong")), id="wrong-password"),
    pytest.param(lambda: struct.pack("i", 9) + b"not a fernet", id="garbage"),
])
def test_a_frame_that_does_not_decrypt_closes(link: Link, bad: Callable[[], bytes]) -> None:
    link.send(bad())
    assert link.closed and link.received == []


def test_a_replayed_older_frame_or_a_missing_nonce_closes(link: Link) -> None:
    link.authenticate()
    link.send(frame("old", nonce=NONCE, at=0))
    assert link.closed
    other = Link()
    try:
        other.authenticate()
        other.send(frame("no nonce"))
        assert other.closed
    finally:
        other.close()


def test_half_a_frame_with_no_further_byte_is_stalled(link: Link) -> None:
    link.authenticate()
    now = time.monotonic()
    assert not link.conn.stalled(now + FRAME_STALL_TIMEOUT_S + 1)  # idle with nothing buffered is fine
    link.send(frame("cut short", nonce=NONCE)[:10])
    assert not link.conn.stalled(time.monotonic())
    assert link.conn.stalled(time.monotonic() + FRAME_STALL_TIMEOUT_S + 1)


def test_the_proof_goes_with_the_connection(link: Link) -> None:
    link.authenticate()
    link.conn.disconnect()
    assert not link.conn.authenticated and link.conn.handshake_bytes == 0


# ---------------------------------------------------------------------- a real node's port
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def node(tmp_path: Path) -> Iterator[RaftNode]:
    """A single-node RaftNode; its one configured peer is a dead address above its own, so that peer
    would connect to it (pysyncobj: the higher address dials)."""
    port = free_port()
    raft = RaftNode(RaftSettings(self_address=f"127.0.0.1:{port}", peer_addresses=["127.0.0.2:65000"],
                                 bind_address=f"127.0.0.1:{port}", store_dir=tmp_path / "raft", password=PASSWORD,
                                 election_timeout_min_s=0.3, election_timeout_max_s=0.6, heartbeat_period_s=0.05,
                                 leader_fallback_timeout_s=0.3))
    try:
        deadline = time.monotonic() + 10
        while not raft._obj._SyncObj__transport.ready:
            assert time.monotonic() < deadline, "the Raft port was not bound"
            time.sleep(0.02)
        yield raft
    finally:
        raft.destroy()


def raft_port(raft: RaftNode) -> int:
    return int(raft.settings.bind_address.rsplit(":", 1)[1])


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """True once the server closed ``sock`` (EOF or reset); False if it is still open at the deadline."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def read_frame(sock: socket.socket) -> Any:
    sock.settimeout(5)
    header = b""
    while len(header) < 4:
        header += sock.recv(4 - len(header))
    (size,) = struct.unpack("i", header)
    data = b""
    while len(data) < size:
        data += sock.recv(size - len(data))
    return sync_pickle.loads(zlib.decompress(ENCRYPTOR.decrypt(data)))


def handshake(port: int) -> tuple[socket.socket, bytes]:
    """Connect as a peer holding the password: send our nonce, get the node's (under ours)."""
    sock = socket.create_connection(("127.0.0.1", port))
    ours = b"c" * 32
    sock.sendall(frame(ours))
    echoed, theirs = read_frame(sock)
    assert echoed == ours
    return sock, theirs


def test_a_silent_connection_is_closed_after_the_handshake_deadline(node: RaftNode,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(raft_transport, "HANDSHAKE_TIMEOUT_S", 0.3)
    silent = socket.create_connection(("127.0.0.1", raft_port(node)))
    half = socket.create_connection(("127.0.0.1", raft_port(node)))
    half.sendall(b"\x10\x00")  # half of a length
    with silent, half:
        assert closed_by_server(silent, 10) and closed_by_server(half, 10)


def test_connections_waiting_to_authenticate_are_capped_oldest_closed_first(
        node: RaftNode, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(raft_transport, "HANDSHAKE_TIMEOUT_S", 600.0)
    extra = 4
    socks = []
    for _ in range(MAX_UNAUTHENTICATED + extra):  # each is established before the next: accepted in order
        socks.append(socket.create_connection(("127.0.0.1", raft_port(node))))
    try:
        assert all(closed_by_server(s, 10) for s in socks[:extra])
        assert not any(closed_by_server(s, 0.3) for s in socks[extra:])
    finally:
        for s in socks:
            s.close()


def test_a_peer_with_the_password_is_served(node: RaftNode) -> None:
    sock, theirs = handshake(raft_port(node))
    with sock:
        sock.sendall(frame(["status"], nonce=theirs))
        echoed, status = read_frame(sock)  # every answer carries the nonce this side sent
    assert echoed == b"c" * 32 and status["self"].address == node.settings.self_address


def test_a_read_only_replica_is_refused(node: RaftNode) -> None:
    sock, theirs = handshake(raft_port(node))
    with sock:
        sock.sendall(frame("readonly", nonce=theirs))
        assert closed_by_server(sock, 10)


def test_a_peer_connecting_again_closes_its_older_connection(node: RaftNode) -> None:
    first, theirs = handshake(raft_port(node))
    first.sendall(frame("127.0.0.2:65000", nonce=theirs))
    second, theirs2 = handshake(raft_port(node))
    second.sendall(frame("127.0.0.2:65000", nonce=theirs2))
    with first, second:
        assert closed_by_server(first, 10)


@pytest.mark.parametrize("message", [[], [7], {"type": "x"}, b"short", 7])
def test_a_malformed_identification_is_refused_and_the_node_carries_on(node: RaftNode, message: Any) -> None:
    sock, theirs = handshake(raft_port(node))
    with sock:
        sock.sendall(frame(message, nonce=theirs))
        assert closed_by_server(sock, 10)
    sock, theirs = handshake(raft_port(node))
    with sock:
        sock.sendall(frame(["status"], nonce=theirs))
        assert read_frame(sock)[1]["self"].address == node.settings.self_address


def test_a_first_message_that_is_not_a_nonce_is_refused(node: RaftNode) -> None:
    with socket.create_connection(("127.0.0.1", raft_port(node))) as sock:
        sock.sendall(frame({"not": "a nonce"}))
        assert closed_by_server(sock, 10)
