"""Shared-token authentication for mutating calls (admin changes and broker↔controller traffic).

When a token is configured, such calls must carry ``Authorization: Bearer <token>``; reads stay open.
The comparison is constant-time, and the token is never logged or shown in configuration dumps.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Awaitable, Callable
from typing import Any

from services.common.errors import ConfigError
from services.common.logsetup import add_secret

TOKEN_ENV = "MQCTL_TOKEN"
HEADER = "Authorization"


def check_token(token: str, property_name: str) -> None:
    """A token travels in an HTTP header and is compared byte for byte: printable ASCII, no spaces."""
    bad = next((c for c in token if not "!" <= c <= "~"), None)
    if bad is not None:
        raise ConfigError(f"{property_name} may hold only printable ASCII characters without spaces ('!' to '~'); "
                          f"it contains {_describe(bad)} at position {token.index(bad) + 1}")


def _describe(char: str) -> str:
    return "a space" if char == " " else f"U+{ord(char):04X}"


def auth_headers(token: str | None) -> dict[str, str]:
    add_secret(token)  # a token put in a header is one that a DEBUG log of that header would show
    return {HEADER: f"Bearer {token}"} if token else {}


def bearer_token(headers: dict[str, str]) -> str | None:
    """The token ``auth_headers`` put in ``headers``, if any."""
    value = headers.get(HEADER, "")
    return value[len("Bearer "):] or None if value.startswith("Bearer ") else None


def token_from_env(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get(TOKEN_ENV) or None


def token_ok(expected: str, header_value: str | None) -> bool:
    """True when no token is configured, or the header carries exactly that token."""
    if not expected:
        return True
    add_secret(expected)
    if not header_value or not header_value.startswith("Bearer "):
        return False
    return hmac.compare_digest(header_value[len("Bearer "):].encode(), expected.encode())


def install_token_check(app: object, expected: Callable[[], str], protected: frozenset[str]) -> None:
    """Refuse POSTs to ``protected`` paths without the configured token (NO_PERMISSION, HTTP 401).

    A plain ASGI middleware: it only looks at the request line and headers, so every other request
    passes through untouched (no per-request task or body streaming, unlike an ``http`` middleware).
    """
    from fastapi import FastAPI

    assert isinstance(app, FastAPI)
    app.add_middleware(TokenCheck, expected=expected, protected=protected)


class TokenCheck:
    def __init__(self, app: Any, expected: Callable[[], str], protected: frozenset[str]) -> None:
        self.app = app
        self.expected = expected
        self.protected = protected

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in self.protected:
            header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None)
            if not token_ok(self.expected(), header):
                from fastapi.responses import JSONResponse

                from services.common.codes import ResponseCode
                from services.common.envelope import envelope

                response = JSONResponse(envelope(ResponseCode.NO_PERMISSION,
                                                 "this call needs the cluster's auth token (--token or $MQCTL_TOKEN)"),
                                        status_code=401)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
