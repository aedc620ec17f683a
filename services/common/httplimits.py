"""What one HTTP listener accepts: connections, time to send a request, request sizes.

Plain data, built from each service's configuration (``http_limits()`` on ``ControllerConfig`` and
``BrokerConfig``) and enforced by services/common/httpguard.py. No import of the server stack here, so
that the configuration modules stay cheap to import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

KIB = 1024
MIB = 1024 * KIB

#: Defaults shared by both services (each is a configuration property; see docs/*-config.md).
DEFAULT_MAX_CONNECTIONS = 4096
DEFAULT_HEADER_TIMEOUT_MS = 10_000
DEFAULT_BODY_TIMEOUT_MS = 60_000
#: An idle keep-alive connection is closed after this long (uvicorn's default, kept).
KEEP_ALIVE_S = 5.0
#: Request line plus headers. Far above anything our clients send (a few hundred bytes).
MAX_HEAD_BYTES = 64 * KIB
#: Any request body unless a route says otherwise; the largest legitimate one (a POST /config or an
#: alterSyncStateSet) is a few hundred bytes.
SMALL_BODY_BYTES = 64 * KIB
#: One websocket message (brokers' liveness channels carry only pings).
WS_MAX_MESSAGE_BYTES = 64 * KIB
#: A TLS handshake must be over within this long of the connection's accept (or within the head deadline,
#: if that is shorter): a connection that never sends its ClientHello holds a descriptor until then.
TLS_HANDSHAKE_TIMEOUT_S = 5.0
#: A DNS name: dot-separated labels of letters, digits, '-' and '_' (ASCII only), 253 characters at most.
_HOST_NAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9_][A-Za-z0-9_-]{0,62}(?:\.[A-Za-z0-9_][A-Za-z0-9_-]{0,62})*\.?")
#: Listen addresses that are no name of the node (every interface).
WILDCARDS = ("", "0.0.0.0", "::", "[::]")


@dataclass(frozen=True)
class HttpLimits:
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_MS / 1000
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_MS / 1000
    keep_alive_s: float = KEEP_ALIVE_S
    max_head_bytes: int = MAX_HEAD_BYTES
    max_body_bytes: int = SMALL_BODY_BYTES
    #: Routes (exact paths) allowed a larger (or smaller) body than ``max_body_bytes``.
    route_body_bytes: Mapping[str, int] = field(default_factory=dict)
    #: Request bodies all connections together may hold while they are read; beyond it a request is
    #: answered SYSTEM_BUSY instead of being read (many large bodies at once cannot exhaust memory).
    body_budget_bytes: int = 16 * MIB
    ws_max_message_bytes: int = WS_MAX_MESSAGE_BYTES
    #: The names this node is configured under (its listen address, its own entry in the peer list,
    #: brokerIP1): a request's Host must be one of them, an IP address, localhost or an ``extra_hosts`` one.
    host_names: frozenset[str] = frozenset()
    #: More names clients use for the node (httpAllowedHosts: a reverse proxy's, a DNS alias). A page
    #: served under one of them is the node's own console, whatever the Host its request arrives with.
    extra_hosts: frozenset[str] = frozenset()

    def body_limit(self, path: str) -> int:
        return self.route_body_bytes.get(path, self.max_body_bytes)

    def tls_handshake_timeout_s(self) -> float:
        return min(TLS_HANDSHAKE_TIMEOUT_S, self.header_timeout_s)


def effective_connection_cap(configured: int, fd_soft_limit: int) -> int:
    """At most half the process's file descriptors go to HTTP connections: the rest stay for the store's
    files, the replication and Raft ports, and outgoing connections, so the cap is reached long before
    descriptors run out."""
    return max(1, min(configured, fd_soft_limit // 2))


def stranger_share(cap: int) -> int:
    """How many of a listener's ``cap`` connections may come from strangers (addresses that are not a known
    peer's, without a verified client certificate): half, so the other half is always there for the brokers
    and controllers the node knows."""
    return max(1, cap // 2)


def parse_host_names(text: str, property_name: str) -> frozenset[str]:
    """A comma-separated list of host names (``httpAllowedHosts``), lower-cased; ValueError naming the
    property and the entry at fault."""
    names = set()
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if not _HOST_NAME.fullmatch(item):
            raise ValueError(f"{property_name} takes host names separated by commas (no scheme, port or path), "
                             f"got {item!r}")
        names.add(item.lower().rstrip("."))
    return frozenset(names)

