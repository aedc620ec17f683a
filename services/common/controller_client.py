"""HTTP client for the controller that finds and follows the Raft leader.

Give it any subset of the controller addresses: a follower answers ``CONTROLLER_NOT_LEADER`` with the
leader's address and the client goes there; a dead node is skipped. During an election (no leader known
anywhere) it retries until its deadline. Transport errors become :class:`UnreachableError`, non-SUCCESS
answers :class:`RemoteError` — translated once, here.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import httpx

from services.common.auth import auth_headers
from services.common.codes import ResponseCode, code_name
from services.common.errors import RemoteError, UnreachableError, UsageError

DEFAULT_CONTROLLER_ADDR = "127.0.0.1:9878"
ENV_CONTROLLER_ADDR = "MQCTL_CONTROLLER_ADDR"


def parse_addresses(spec: str | None) -> list[str]:
    """``host:port;host:port`` → list; falls back to $MQCTL_CONTROLLER_ADDR, then 127.0.0.1:9878."""
    text = spec if spec else os.environ.get(ENV_CONTROLLER_ADDR) or DEFAULT_CONTROLLER_ADDR
    result = []
    for item in text.replace(",", ";").split(";"):
        item = item.strip()
        for prefix in ("http://", "https://"):
            item = item.removeprefix(prefix)
        item = item.rstrip("/")
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"bad controller address {item!r}: expected host:port, e.g. 127.0.0.1:9878")
        result.append(item)
    if not result:
        raise UsageError("no controller address given")
    return result


@dataclass(frozen=True)
class Envelope:
    code: int
    remark: str
    data: Any
    address: str

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


class ControllerClient:
    def __init__(self, addresses: list[str], timeout: float = 5.0,
                 transport: httpx.BaseTransport | None = None, token: str | None = None) -> None:
        self.addresses = list(addresses)
        self.timeout = timeout
        self._client = httpx.Client(timeout=httpx.Timeout(timeout, connect=min(timeout, 2.0)),
                                    transport=transport, headers=auth_headers(token))
        self.leader: str | None = None

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ControllerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ single node
    def request_node(self, address: str, method: str, path: str, *, json: Any = None,
                     params: Any = None) -> Envelope:
        try:
            response = self._client.request(method, f"http://{address}{path}", json=json, params=params)
        except httpx.TimeoutException as exc:
            raise UnreachableError(f"controller {address} timed out", [address]) from exc
        except httpx.HTTPError as exc:
            raise UnreachableError(f"controller {address} is unreachable: {_reason(exc)}", [address]) from exc
        try:
            body = response.json()
            return Envelope(int(body["code"]), str(body.get("remark") or ""), body.get("data"), address)
        except (ValueError, KeyError, TypeError):
            raise RemoteError(int(ResponseCode.SYSTEM_ERROR),
                              f"{address} answered HTTP {response.status_code} without a controller "
                              "envelope; is it a controller?") from None

    # ------------------------------------------------------------------ leader-following
    def call(self, method: str, path: str, *, json: Any = None, params: Any = None,
             accept: tuple[int, ...] = ()) -> Envelope:
        """Send to the leader. Returns the envelope if SUCCESS or its code is in ``accept``."""
        deadline = time.monotonic() + self.timeout
        unreachable: list[str] = []
        last_not_leader: Envelope | None = None
        while True:
            candidates = self._candidates()
            tried: set[str] = set()
            while candidates:
                address = candidates.pop(0)
                if address in tried:
                    continue
                tried.add(address)
                try:
                    env = self.request_node(address, method, path, json=json, params=params)
                except UnreachableError:
                    if address not in unreachable:
                        unreachable.append(address)
                    if self.leader == address:
                        self.leader = None
                    continue
                if env.code != ResponseCode.CONTROLLER_NOT_LEADER:
                    self.leader = address
                    return self.check(env, accept)
                last_not_leader = env
                hint = (env.data or {}).get("controllerLeaderAddress") if isinstance(env.data, dict) else None
                if hint and hint not in tried:
                    candidates.insert(0, str(hint))
            if time.monotonic() + 0.2 >= deadline:
                break
            time.sleep(0.2)
        if last_not_leader is not None:
            raise RemoteError(int(ResponseCode.CONTROLLER_NOT_LEADER),
                              "no controller leader is reachable (tried "
                              f"{', '.join(sorted(set(self.addresses) | set(unreachable)))}); the controller "
                              "group may have lost its majority")
        raise UnreachableError(f"no controller reachable at {';'.join(self.addresses)}", unreachable)

    def call_any(self, method: str, path: str, *, json: Any = None, params: Any = None) -> Envelope:
        """Send to the first node that answers (for requests any node serves)."""
        errors: list[str] = []
        for address in self.addresses:
            try:
                return self.check(self.request_node(address, method, path, json=json, params=params), ())
            except UnreachableError:
                errors.append(address)
        raise UnreachableError(f"no controller reachable at {';'.join(self.addresses)}", errors)

    def _candidates(self) -> list[str]:
        ordered = [self.leader] if self.leader else []
        return ordered + [a for a in self.addresses if a != self.leader]

    @staticmethod
    def check(env: Envelope, accept: tuple[int, ...]) -> Envelope:
        if env.ok or env.code in accept:
            return env
        raise RemoteError(env.code, env.remark or code_name(env.code),
                          env.data if isinstance(env.data, dict) else None)


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc) or type(exc).__name__
    if "Connection refused" in text or "connect" in text.lower():
        return "connection refused"
    return text
