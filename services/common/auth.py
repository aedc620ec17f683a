"""Shared-token authentication for mutating calls (admin changes and broker↔controller traffic).

When a token is configured, such calls must carry ``Authorization: Bearer <token>``; reads stay open.
The comparison is constant-time, and the token is never logged or shown in configuration dumps.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Awaitable, Callable

TOKEN_ENV = "MQCTL_TOKEN"
HEADER = "Authorization"


def auth_headers(token: str | None) -> dict[str, str]:
    return {HEADER: f"Bearer {token}"} if token else {}


def token_from_env(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get(TOKEN_ENV) or None


def token_ok(expected: str, header_value: str | None) -> bool:
    """True when no token is configured, or the header carries exactly that token."""
    if not expected:
        return True
    if not header_value or not header_value.startswith("Bearer "):
        return False
    return hmac.compare_digest(header_value[len("Bearer "):].encode(), expected.encode())


def install_token_check(app: object, expected: Callable[[], str], protected: frozenset[str]) -> None:
    """Refuse POSTs to ``protected`` paths without the configured token (NO_PERMISSION, HTTP 401)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, Response

    from services.common.codes import ResponseCode
    from services.common.envelope import envelope

    assert isinstance(app, FastAPI)

    @app.middleware("http")
    async def check_token(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if request.method == "POST" and request.url.path in protected \
                and not token_ok(expected(), request.headers.get(HEADER)):
            return JSONResponse(envelope(ResponseCode.NO_PERMISSION,
                                         "this call needs the cluster's auth token (--token or $MQCTL_TOKEN)"),
                                status_code=401)
        return await call_next(request)
