"""The controller's Raft port: pysyncobj's TCP transport with bounds on what a connection may cost.

pysyncobj reads a frame as ``<int32 length><payload>`` and keeps appending to an immutable ``bytes``
buffer until the whole length has arrived, so a 2 GiB length prefix followed by a slow stream made the
tick thread (which also runs Raft) copy an ever-growing buffer: quadratic work, the controller pegged,
leader reads failing for as long as the stream lasted. It also never closes a connection that stays
silent (its timeout is only checked when the socket has an event), and accepts any number of them.

Here, on top of the library's own handshake (Fernet with the group's password, then a nonce each side
must echo back), every connection:

* proves it holds the password before it may send more than a handshake: until a message comes back
  carrying the nonce we sent, a frame may be at most ``MAX_HANDSHAKE_FRAME_BYTES`` and all of them
  together ``MAX_HANDSHAKE_BYTES``; afterwards a frame may be at most ``MAX_FRAME_BYTES`` and a message
  at most ``MAX_MESSAGE_BYTES`` once decompressed. A length over the bound closes the connection as
  soon as its 4 bytes arrive, before any payload is buffered;
* reads into a ``bytearray`` and stops reading once a whole frame is buffered, so large legitimate
  frames cost linear time and the buffer never holds more than one frame plus one ``recv``;
* if it came in and has not identified itself as a peer within ``HANDSHAKE_TIMEOUT_S``, is closed; so
  is any connection holding part of a frame with no byte for ``FRAME_STALL_TIMEOUT_S``, and an incoming
  peer connection once the same peer has connected again.

Incoming connections that have not identified themselves are at most ``MAX_UNAUTHENTICATED``; a new
one closes the oldest (refusing the new one instead would let whoever holds the slots keep a real peer
out). Once identified, each connection is a configured peer's latest (an older one of the same peer is
closed), so incoming connections are at most peers + ``MAX_UNAUTHENTICATED``. Read-only pysyncobj
replicas are not part of the controller and are refused.

This relies on pysyncobj 0.3.17's internals (``TcpConnection``'s private read buffer and parse
methods, ``TCPTransport``'s connection tables), so the version is checked at import: the dependency
is pinned exactly, and an upgrade must re-read ``tcp_connection.py`` and ``transport.py``.
"""

from __future__ import annotations

import errno
import logging
import socket
import struct
import time
import zlib
from collections.abc import Callable
from typing import Any

from pysyncobj import pickle as sync_pickle  # type: ignore[import-untyped]
from pysyncobj.dns_resolver import globalDnsResolver  # type: ignore[import-untyped]
from pysyncobj.poller import POLL_EVENT_TYPE  # type: ignore[import-untyped]
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection  # type: ignore[import-untyped]
from pysyncobj.transport import TCPTransport  # type: ignore[import-untyped]
from pysyncobj.version import VERSION  # type: ignore[import-untyped]

SUPPORTED_PYSYNCOBJ = "0.3.17"
if VERSION != SUPPORTED_PYSYNCOBJ:
    raise ImportError(f"services.controller.raft_transport is written against pysyncobj {SUPPORTED_PYSYNCOBJ}'s "
                      f"internals, found {VERSION}; install pysyncobj=={SUPPORTED_PYSYNCOBJ}")

log = logging.getLogger(__name__)

#: The largest log entry a controller proposes (raft.py splits group commits to stay under it and
#: refuses a single write above it).
MAX_ENTRY_BYTES = 4 * 1024 * 1024
#: The largest frame accepted from a peer that proved it holds the password. pysyncobj sends at most
#: 64 KiB of small entries plus one entry (a larger single entry goes in 64 KiB pieces, as do snapshot
#: chunks); a follower forwards one command at a time. So the largest legitimate frame is about
#: 4 MiB + 64 KiB of pickle, which zlib does not grow, and Fernet's base64 adds a third: under 6 MiB.
#: 16 MiB leaves more than twice that as margin.
MAX_FRAME_BYTES = 16 * 1024 * 1024
#: A frame's payload once decompressed (a zlib bomb is refused instead of inflated).
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
#: Before the nonce came back: the messages are a 32-byte nonce, a peer address (at most a host name
#: and a port) or a pysyncobj utility command, each about 200 bytes once encrypted.
MAX_HANDSHAKE_FRAME_BYTES = 4 * 1024
MAX_HANDSHAKE_BYTES = 16 * 1024
HANDSHAKE_TIMEOUT_S = 5.0
FRAME_STALL_TIMEOUT_S = 10.0
MAX_UNAUTHENTICATED = 8
SWEEP_INTERVAL_S = 0.25
ACCEPTS_PER_EVENT = 64
LISTEN_BACKLOG = 16

_HEADER = struct.Struct("i")  # pysyncobj's frame length: a native signed int, as its peers send it


class _RateLimitedLog:
    """One warning per kind of reason per interval: a flood of bad connections must not flood the log
    (nor this table: kinds are a few constants, never text from the connection)."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self._interval = interval_s
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, reason: str, peer: str, kind: str | None = None) -> None:
        kind = kind or reason
        now = time.monotonic()
        if now - self._last.get(kind, -self._interval) < self._interval:
            self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
            return
        more = self._suppressed.pop(kind, 0)
        self._last[kind] = now
        log.warning("Raft port: closed a connection from %s: %s%s", peer, reason,
                    f" ({more} more like this in the last {self._interval:.0f}s)" if more else "")


drops = _RateLimitedLog()


class GuardedConnection(TcpConnection):  # type: ignore[misc]
    """A pysyncobj connection with bounded frames, a linear read buffer and a record of when it last
    read and whether it proved the password. Built by :class:`GuardedServer` for incoming connections;
    the transport's outgoing connections become one through :func:`guard`."""

    # The library's attributes this class reads (set by TcpConnection.__init__ and the transport).
    _TcpConnection__readBuffer: bytes | bytearray
    recvLastTimestamp: int
    recvRandKey: bytes | None
    encryptor: Any

    incoming = False
    peer = "?"
    accepted_at = 0.0
    last_read = 0.0
    authenticated = False
    handshake_bytes = 0

    def connect(self, host: str, port: int) -> bool:
        self._reset()
        return bool(super().connect(host, port))

    def disconnect(self) -> None:
        self._reset()  # the library forgets the nonces here; the proof goes with them
        super().disconnect()

    def _reset(self) -> None:
        self.authenticated, self.handshake_bytes = False, 0
        self.accepted_at = self.last_read = time.monotonic()

    def stalled(self, now: float) -> bool:
        """Part of a frame is buffered and no byte came for a while."""
        return bool(self._buffer()) and now - self.last_read > FRAME_STALL_TIMEOUT_S

    def _buffer(self) -> bytearray:
        # The library resets its buffer to ``bytes()`` on connect and disconnect.
        buf = self._TcpConnection__readBuffer
        if not isinstance(buf, bytearray):
            buf = bytearray(buf)
            self._TcpConnection__readBuffer = buf
        return buf

    def _frame_limit(self) -> int:
        return MAX_FRAME_BYTES if self.authenticated else MAX_HANDSHAKE_FRAME_BYTES

    def _drop(self, reason: str, kind: str | None = None) -> None:
        drops.warning(reason, self.peer, kind)
        self.disconnect()

    def _header_ok(self, buf: bytearray) -> bool:
        if len(buf) < _HEADER.size:
            return True
        (size,) = _HEADER.unpack_from(buf)
        if 0 <= size <= self._frame_limit():
            return True
        stage = "" if self.authenticated else " before authenticating"
        self._drop(f"a frame of {size} bytes{stage} (at most {self._frame_limit()})", kind="frame size" + stage)
        return False

    def _frame_ready(self, buf: bytearray) -> bool:
        return len(buf) >= _HEADER.size and len(buf) - _HEADER.size >= _HEADER.unpack_from(buf)[0]

    # Replaces TcpConnection.__processRead: called in a loop until it returns False.
    def _TcpConnection__processRead(self) -> bool:
        sock = self._TcpConnection__socket
        try:
            incoming = sock.recv(self._TcpConnection__recvBufferSize)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                self.disconnect()
            return False
        if not incoming or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            self.disconnect()
            return False
        self.last_read = time.monotonic()
        buf = self._buffer()
        buf += incoming
        # Stop once a whole frame is here: it is parsed (and may authenticate the connection) before
        # more is read, so the buffer holds one frame and one recv at most.
        return self._header_ok(buf) and not self._frame_ready(buf)

    # Replaces TcpConnection.__processParseMessage: the next whole message, or None.
    def _TcpConnection__processParseMessage(self) -> Any:
        buf = self._buffer()
        if not self._header_ok(buf) or not self._frame_ready(buf):
            return None
        size = _HEADER.unpack_from(buf)[0]
        data = bytes(buf[_HEADER.size:_HEADER.size + size])
        del buf[:_HEADER.size + size]  # from the front of a bytearray: no copy of the rest
        if not self.authenticated:
            self.handshake_bytes += _HEADER.size + size
            if self.handshake_bytes > MAX_HANDSHAKE_BYTES:
                self._drop(f"more than {MAX_HANDSHAKE_BYTES} bytes before authenticating")
                return None
        try:
            return self._decode(data)
        except Exception:  # noqa: BLE001 - a wrong password, a replay, garbage: hang up, as the library does
            self._drop("a message that does not decrypt or decode (wrong controllerRaftPassword?)")
            return None

    def _decode(self, data: bytes) -> Any:
        if self.encryptor:
            stamp = self.encryptor.extract_timestamp(data)
            if stamp < self.recvLastTimestamp:
                raise ValueError("message older than the previous one")
            self.recvLastTimestamp = stamp
            data = self.encryptor.decrypt(data)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(data, MAX_MESSAGE_BYTES)
        if inflater.unconsumed_tail or not inflater.eof:
            raise ValueError("message too large or truncated once decompressed")
        message = sync_pickle.loads(raw)
        if self.recvRandKey:
            nonce, message = message
            if nonce != self.recvRandKey:
                raise ValueError("the nonce this side sent did not come back")
            self.authenticated = True
        return message


def guard(conn: TcpConnection, incoming: bool, peer: str) -> GuardedConnection:
    """Turn one of the library's connections into a :class:`GuardedConnection`. The library builds
    outgoing connections itself (with callbacks bound to that very object), so the object's class is
    switched instead of building another; the subclass adds behaviour, not state the base needs."""
    conn.__class__ = GuardedConnection
    guarded: GuardedConnection = conn
    guarded.incoming, guarded.peer = incoming, peer
    guarded._reset()
    return guarded


class GuardedServer:
    """The listening socket. Replaces pysyncobj's TcpServer, which builds plain connections, and which
    stops listening for good on any accept error (EMFILE included); here such an error only skips the
    turn. Offers the library's ``bind()``/``unbind()``."""

    def __init__(self, poller: Any, host: str, port: int, conf: Any,
                 on_connection: Callable[[GuardedConnection], None]) -> None:
        self._poller, self._host, self._port, self._conf = poller, host, port, conf
        self._on_connection = on_connection
        self._socket: socket.socket | None = None

    def bind(self) -> None:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setblocking(False)
            sock.bind((self._host, self._port))
            sock.listen(LISTEN_BACKLOG)
        except OSError:
            sock.close()
            raise
        self._socket = sock
        self._poller.subscribe(sock.fileno(), self._on_readable, POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR)

    def unbind(self) -> None:
        if self._socket is not None:
            self._poller.unsubscribe(self._socket.fileno())
            self._socket.close()
            self._socket = None

    def _on_readable(self, fd: int, event: int) -> None:
        for _ in range(ACCEPTS_PER_EVENT):
            if self._socket is None:
                return
            try:
                sock, address = self._socket.accept()
            except BlockingIOError:
                return
            except OSError as exc:  # out of descriptors, for instance: try again at the next event
                drops.warning(f"accept failed: {exc.strerror}", "?", kind="accept")
                return
            self._on_connection(self._wrap(sock, address))

    def _wrap(self, sock: socket.socket, address: Any) -> GuardedConnection:
        conf = self._conf
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, conf.sendBufferSize)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, conf.recvBufferSize)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
        conn = GuardedConnection(poller=self._poller, socket=sock, timeout=conf.connectionTimeout,
                                 sendBufferSize=conf.sendBufferSize, recvBufferSize=conf.recvBufferSize,
                                 keepalive=conf.tcp_keepalive)
        return guard(conn, incoming=True, peer=peer)


def _identification_problem(conn: Any, message: Any) -> str | None:
    """What is wrong with a message of the handshake: the peer's nonce, then its address (or
    "readonly", or a utility command such as ``["status"]``)."""
    if not conn.sendRandKey:
        return None if isinstance(message, bytes) and len(message) == 32 else "a handshake without a 32-byte nonce"
    if isinstance(message, list):
        return None if message and isinstance(message[0], str) else "a malformed pysyncobj utility command"
    if message == "readonly":
        return "a pysyncobj read-only replica, which the controller does not serve"
    return None if isinstance(message, str) else "an identification that is neither a peer address nor a command"


class GuardedTransport(TCPTransport):  # type: ignore[misc]
    """pysyncobj's TCP transport with :class:`GuardedServer`, guarded outgoing connections, the
    admission policy and the periodic sweep described at the top of this module."""

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
        self._incoming: dict[GuardedConnection, None] = {}  # insertion order: oldest first
        self._next_sweep = 0.0
        super().__init__(syncObj, selfNode, otherNodes)

    def send(self, node: Any, message: Any) -> bool:
        """Every message leaves only once the journal on disk holds what it may claim (raft_journal.py); while
        the journal cannot be written, none leaves (to pysyncobj, a message lost on the way)."""
        sync = getattr(self._syncObj, "journal_sync", None)
        if sync is not None and not sync():
            return False
        return bool(super().send(node, message))

    def _createServer(self) -> None:
        host, port = self._syncObj.conf.bindAddress.rsplit(":", 1)
        host = host.strip("[]")
        if host not in ("0.0.0.0", "::"):
            host = globalDnsResolver().resolve(host)
        self._server = GuardedServer(self._syncObj._poller, host, int(port), self._syncObj.conf, self._admit)

    def addNode(self, node: Any) -> None:
        super().addNode(node)
        conn = self._connections.get(node)
        if conn is not None and not isinstance(conn, GuardedConnection):
            guard(conn, incoming=False, peer=str(node.address))

    def _admit(self, conn: GuardedConnection) -> None:
        waiting = [c for c in self._incoming if c in self._unknownConnections]
        if len(waiting) >= MAX_UNAUTHENTICATED:
            oldest = waiting[0]
            drops.warning(f"{MAX_UNAUTHENTICATED} connections were already authenticating; closed the oldest "
                          f"({oldest.peer}) for a new one", conn.peer, kind="cap")
            oldest.disconnect()
        self._incoming[conn] = None
        self._onNewIncomingConnection(conn)

    def _onIncomingMessageReceived(self, conn: Any, message: Any) -> None:
        """The messages of a connection that has not identified itself yet (the library's handler would
        raise, on the tick thread, on an empty command or an unhashable name)."""
        problem = _identification_problem(conn, message)
        if problem:
            drops.warning(problem, conn.peer)
            conn.disconnect()
            return
        super()._onIncomingMessageReceived(conn, message)

    def _onDisconnected(self, conn: Any) -> None:
        self._incoming.pop(conn, None)
        super()._onDisconnected(conn)

    def _onTick(self) -> None:
        super()._onTick()
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_INTERVAL_S
            self._sweep(now)

    def _sweep(self, now: float) -> None:
        current = {id(c) for c in self._connections.values()}
        for conn in list(self._incoming):
            reason = self._why_close(conn, now, current)
            if reason:
                drops.warning(reason, conn.peer)
                conn.disconnect()
            if conn.state == CONNECTION_STATE.DISCONNECTED:
                self._incoming.pop(conn, None)  # usually gone already, through the library's callback
        for conn in list(self._connections.values()):
            if isinstance(conn, GuardedConnection) and not conn.incoming and conn.stalled(now):
                drops.warning(f"no byte of a started frame for {FRAME_STALL_TIMEOUT_S:.0f}s", conn.peer)
                conn.disconnect()

    def _why_close(self, conn: GuardedConnection, now: float, current: set[int]) -> str | None:
        if conn.state == CONNECTION_STATE.DISCONNECTED:
            return None
        if conn in self._unknownConnections:
            if now - conn.accepted_at > HANDSHAKE_TIMEOUT_S:
                return f"did not identify as a peer within {HANDSHAKE_TIMEOUT_S:.0f}s"
            return None
        if id(conn) not in current:
            return "the same peer connected again"
        if conn.stalled(now):
            return f"no byte of a started frame for {FRAME_STALL_TIMEOUT_S:.0f}s"
        return None
