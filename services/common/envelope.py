"""The JSON envelope every service answers with, and the FastAPI plumbing that guarantees it.

``{"code": int, "codeName": str, "remark": str, "data": {...} | null}`` — malformed input gets
``INVALID_PARAMETER`` (HTTP 400), an unknown route ``REQUEST_CODE_NOT_SUPPORTED`` (404), and an
unexpected failure ``SYSTEM_ERROR`` (500) with no traceback in the body.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.common.codes import ResponseCode, code_name

log = logging.getLogger(__name__)


def envelope(code: int, remark: str | None = None, data: Any = None) -> dict[str, Any]:
    return {"code": int(code), "codeName": code_name(int(code)), "remark": remark or "", "data": data}


def respond(code: int, remark: str | None = None, data: Any = None, status: int | None = None) -> JSONResponse:
    if status is not None:
        return JSONResponse(envelope(code, remark, data), status_code=status)
    status = 200
    if code == ResponseCode.INVALID_PARAMETER:
        status = 400
    elif code == ResponseCode.SYSTEM_ERROR:
        status = 500
    return JSONResponse(envelope(code, remark, data), status_code=status)


def _describe_validation(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p not in ("body", "query"))
        parts.append(f"{loc or 'request'}: {err.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return respond(ResponseCode.INVALID_PARAMETER, _describe_validation(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            body = envelope(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                            f"no such route: {request.method} {request.url.path}")
            return JSONResponse(body, status_code=404)
        if exc.status_code == 405:
            body = envelope(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                            f"method {request.method} not allowed on {request.url.path}")
            return JSONResponse(body, status_code=405)
        return JSONResponse(envelope(ResponseCode.INVALID_PARAMETER, str(exc.detail)),
                            status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error serving %s %s", request.method, request.url.path, exc_info=exc)
        return respond(ResponseCode.SYSTEM_ERROR, f"internal error: {type(exc).__name__}")
