"""Who gets a client port's connection slots (services/common/conncap.py), with stand-in transports: strangers
hold at most their share, a known peer finds room by closing the oldest idle stranger, a verified client
certificate makes a stranger known, and the known peers' addresses are read from the node's state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.common.conncap import ConnectionCap, KnownPeers, normal_ip


@dataclass
class Busy:
    serving: bool = False

    def busy(self) -> bool:
        return self.serving


@dataclass(eq=False)
class FakeTransport:
    host: str
    protocol: Any = field(default_factory=Busy)
    closing: bool = False

    def get_extra_info(self, name: str) -> Any:
        return (self.host, 40000) if name == "peername" else None

    def get_protocol(self) -> Any:
        return self.protocol

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.closing = True


KNOWN = "10.0.0.1"


def cap(limit: int = 6, strangers: int = 3) -> ConnectionCap:
    return ConnectionCap(limit, strangers, lambda host: host == KNOWN)


def test_strangers_hold_at_most_their_share_and_known_peers_the_rest() -> None:
    c = cap()
    strangers = [FakeTransport(f"192.0.2.{i}") for i in range(4)]
    assert [c.admit(t) is not None for t in strangers] == [True, True, True, False]
    assert "unknown addresses" in c.refusal(False)
    known = [FakeTransport(KNOWN) for _ in range(3)]
    assert all(c.admit(t) is not None for t in known)
    assert c.open_count() == 6
    strangers[0].closing = True  # a closed one is forgotten when a limit is reached
    assert c.admit(FakeTransport("192.0.2.9")) is not None


def test_a_known_peer_closes_the_oldest_idle_stranger_rather_than_be_refused() -> None:
    c = cap()
    strangers = [FakeTransport(f"192.0.2.{i}") for i in range(3)]
    strangers[0].protocol.serving = True  # the oldest is serving a request: the next oldest goes
    for t in strangers:
        assert c.admit(t) is not None
    for _ in range(3):
        assert c.admit(FakeTransport(KNOWN)) is not None
    assert c.admit(FakeTransport(KNOWN)) is not None
    assert [t.closing for t in strangers] == [False, True, False]
    assert c.admit(FakeTransport("192.0.2.8")) is None  # strangers never displace
    strangers[2].protocol.serving = True
    assert c.admit(FakeTransport(KNOWN)) is None  # nobody idle to close
    assert "the cap is 6" in c.refusal(True)


def test_a_verified_certificate_makes_a_stranger_known() -> None:
    c = cap()
    slots = [c.admit(FakeTransport(f"192.0.2.{i}")) for i in range(3)]
    assert all(slots) and c.admit(FakeTransport("192.0.2.7")) is None
    c.promote(slots[0])
    assert c.admit(FakeTransport("192.0.2.7")) is not None


def test_known_peers_fixed_and_read_from_the_state() -> None:
    registered = {"10.0.0.5"}
    reads: list[int] = []

    def current() -> set[str]:
        reads.append(1)
        return set(registered)

    peers = KnownPeers(["10.0.0.1", "[::1]"], current, refresh_s=3600)
    assert peers("10.0.0.1") and peers("::1") and peers("10.0.0.5") and not peers("10.0.0.6")
    registered.add("10.0.0.6")
    assert not peers("10.0.0.6") and len(reads) == 1  # re-read at most every refresh_s
    peers.refresh_s = 0
    assert peers("10.0.0.6")
    assert normal_ip("::ffff:10.0.0.6") == "10.0.0.6"
