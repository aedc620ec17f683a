"""uvicorn, with a clean exit: SIGTERM/SIGINT stop the server and the process then finishes its own
shutdown (Raft, store flush) and exits 0, instead of uvicorn re-raising the signal at the end."""

from __future__ import annotations

import contextlib
import gc
import inspect
import logging
import signal
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from services.common.bodylimit import BodyLimit
from services.common.httpguard import (
    ConnectionCap,
    capped,
    guarded_http,
    raise_fd_limit,
    uvicorn_options,
)
from services.common.httplimits import HttpLimits, effective_connection_cap
from services.common.sniff import BinaryFactory, sniffing_protocol

log = logging.getLogger(__name__)


class GracefulServer(uvicorn.Server):
    stopped_by: int | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.stopped_by = sig
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True


# FastAPI's built-in OpenTelemetry support (newer releases) asks on every request whether a tracer,
# meter or logger provider has been configured, reading the environment each time: about 5 % of a
# controller's CPU per write. The services export Prometheus metrics of their own and configure no
# OpenTelemetry provider, so it is turned off where the installed FastAPI has it.
_NO_TELEMETRY = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}


class TlsConfig(uvicorn.Config):
    """uvicorn's config with our own TLS context (services/common/tls.py) in place of one it builds."""

    tls: ssl.SSLContext | None = None

    def load(self) -> None:
        super().load()
        self.ssl = self.tls


def new_app(title: str, description: str) -> FastAPI:
    extra: dict[str, Any] = {"telemetry": _NO_TELEMETRY} if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {}
    return FastAPI(title=title, version="1", description=description, **extra)


def quiet_gc() -> None:
    """Move everything allocated at start-up (modules, the app, its routes and models) out of the cyclic
    collector's reach. A full collection then scans only what the running service allocates instead of
    pausing the event loop for tens of milliseconds over objects that live as long as the process."""
    gc.collect()
    gc.freeze()


def make_server(app: FastAPI, host: str, port: int, on_start: Callable[[], Awaitable[None]],
                on_stop: Callable[[], Awaitable[None]], binary: BinaryFactory | None = None,
                limits: HttpLimits | None = None, tls: ssl.SSLContext | None = None) -> GracefulServer:
    """A server for ``app`` whose lifespan runs ``on_start`` before serving and ``on_stop`` after. With
    ``binary``, the same port also serves RocketMQ's remoting protocol (services/common/sniff.py).
    ``limits`` bound connections, request time and sizes (services/common/httpguard.py). With ``tls``,
    both protocols are spoken inside TLS only."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await on_start()
        quiet_gc()
        yield
        await on_stop()

    app.router.lifespan_context = lifespan
    limits = limits or HttpLimits()
    app.add_middleware(BodyLimit, limits=limits)
    fds = raise_fd_limit()
    cap = ConnectionCap(effective_connection_cap(limits.max_connections, fds))
    log.info("%s listener %s:%d: at most %d connections (open-file limit %d)", "TLS" if tls else "HTTP", host,
             port, cap.limit, fds)
    protocol = capped(sniffing_protocol(guarded_http(limits), binary, limits.header_timeout_s), cap)
    config = TlsConfig(app, host=host, port=port, log_config=None, access_log=False, lifespan="on",
                       timeout_graceful_shutdown=3, http=protocol, **uvicorn_options(limits))
    config.tls = tls
    return GracefulServer(config)
