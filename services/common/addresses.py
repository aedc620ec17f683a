"""Addresses as operators write them (``host:port``, ``[ipv6]:port``, ``a:p;b:p`` lists), checked once here."""

from __future__ import annotations

import ipaddress
import os
import re

from services.common import tls
from services.common.errors import AddressError, UsageError

__all__ = ["ADDRESS_EXAMPLE", "DEFAULT_CONTROLLER_ADDR", "ENV_CONTROLLER_ADDR", "address_key", "check_address",
           "http_url", "join_address", "parse_addresses", "split_address"]

DEFAULT_CONTROLLER_ADDR = "127.0.0.1:9878"
ENV_CONTROLLER_ADDR = "MQCTL_CONTROLLER_ADDR"

#: A DNS name or IPv4 address: dot-separated labels of letters, digits, '-' and '_' (ASCII only).
_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62}))*\.?")
_DOTTED_QUAD = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
_PORT = re.compile(r"[0-9]{1,10}")
ADDRESS_EXAMPLE = "e.g. 127.0.0.1:9878 or [::1]:9878"


def split_address(text: str, *, lenient: bool = False) -> tuple[str, int]:
    """``host:port`` or ``[ipv6]:port`` → (host, port), the IPv6 host without brackets.

    Raises ValueError saying what is wrong. ``lenient`` also reads an unbracketed IPv6 address whose last
    group is the port (``::1:10911``), as a server may report its own address; an operator must write
    brackets, because ``::1:19878`` is itself a valid IPv6 address and the port would be a guess."""
    if text.startswith("["):
        inner, sep, port = text[1:].partition("]:")
        if not sep:
            raise ValueError(f"expected [ipv6]:port, {ADDRESS_EXAMPLE}")
        _check_ipv6(inner, f"{inner!r} is not an IPv6 address")
        return inner, _port(port)
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"expected host:port, {ADDRESS_EXAMPLE}")
    if ":" in host:
        _check_ipv6(host, f"expected host:port, {ADDRESS_EXAMPLE}")
        if not lenient:
            raise ValueError(f"write an IPv6 address in brackets, e.g. [{host}]:{port}")
        return host, _port(port)
    if len(host) > 253 or not _HOST_NAME.fullmatch(host):
        raise ValueError(f"a host name holds only letters, digits, '.', '-' and '_' ({ADDRESS_EXAMPLE})")
    if _DOTTED_QUAD.fullmatch(host):  # read as IPv4 by URL parsers, so it must be one
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"{host!r} is not an IPv4 address") from None
    return host, _port(port)


def _check_ipv6(host: str, problem: str) -> None:
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        raise ValueError(problem) from None
    if "%" in host:
        raise ValueError("IPv6 zone ids (%eth0) are not supported")


def _port(text: str) -> int:
    if not _PORT.fullmatch(text) or not 0 < int(text) < 65536:
        raise ValueError(f"the port must be a number from 1 to 65535 ({ADDRESS_EXAMPLE})")
    return int(text)


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def address_key(address: str) -> tuple[str, int] | None:
    """What identifies an address for comparisons: the lower-cased host and the port (None if malformed)."""
    try:
        host, port = split_address(address, lenient=True)
    except ValueError:
        return None
    return host.lower(), port


def http_url(address: str, path: str, what: str = "server") -> str:
    """``http://host:port/path`` (``https://`` with TLS on) for a checked address (IPv6 hosts in brackets);
    AddressError if malformed."""
    try:
        host, port = split_address(address, lenient=True)
    except ValueError as exc:
        raise AddressError(f"bad {what} address {address!r}: {exc}") from None
    return f"{tls.scheme()}://{join_address(host, port)}{path}"


def check_address(text: str, what: str) -> str:
    """An operator's ``host:port``, stripped; AddressError (a usage error) naming it if malformed."""
    item = text.strip()
    try:
        split_address(item)
    except ValueError as exc:
        raise AddressError(f"bad {what} address {item!r}: {exc}") from None
    return item


def parse_addresses(spec: str | None) -> list[str]:
    """``host:port;host:port`` → list; falls back to $MQCTL_CONTROLLER_ADDR, then 127.0.0.1:9878.

    ``,`` also separates, and a leading ``http://`` and trailing ``/`` are tolerated. Hosts are names,
    IPv4 addresses or bracketed IPv6 addresses (``[::1]:9878``)."""
    text = spec or os.environ.get(ENV_CONTROLLER_ADDR) or DEFAULT_CONTROLLER_ADDR
    result = []
    for item in text.replace(",", ";").split(";"):
        item = item.strip()
        for prefix in ("http://", "https://"):
            item = item.removeprefix(prefix)
        item = item.rstrip("/")
        if item:
            result.append(check_address(item, "controller"))
    if not result:
        raise UsageError("no controller address given")
    return result
