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
from services.common.conncap import ConnectionCap, capped
from services.common.hostguard import HostGuard
from services.common.httpguard import guarded_http, raise_fd_limit, uvicorn_options
from services.common.httplimits import HttpLimits, effective_connection_cap, stranger_share
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

    def _log_started_message(self, listeners: Any) -> None:
        """Not uvicorn's line: it would say http:// for a TLS port (TLS is done by the connection cap, not
        by uvicorn). make_server logs the listener instead."""


# FastAPI's built-in OpenTelemetry support (newer releases) asks on every request whether a tracer,
# meter or logger provider has been configured, reading the environment each time: about 5 % of a
# controller's CPU per write. The services export Prometheus metrics of their own and configure no
# OpenTelemetry provider, so it is turned off where the installed FastAPI has it.
_NO_TELEMETRY = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}


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
                limits: HttpLimits | None = None, tls: ssl.SSLContext | None = None,
                known: Callable[[str], bool] | None = None) -> GracefulServer:
    """A server for ``app`` whose lifespan runs ``on_start`` before serving and ``on_stop`` after. With
    ``binary``, the same port also serves RocketMQ's remoting protocol (services/common/sniff.py).
    ``limits`` bound connections, request time and sizes (services/common/httpguard.py) and name the node
    (services/common/hostguard.py). With ``tls``, both protocols are spoken inside TLS only, the handshake
    made by the connection cap (services/common/conncap.py), which gives ``known`` peers' addresses the
    half of the cap strangers cannot take (without ``known``, every connection is a stranger's and may take
    the whole cap)."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await on_start()
        quiet_gc()
        yield
        await on_stop()

    app.router.lifespan_context = lifespan
    limits = limits or HttpLimits()
    app.add_middleware(BodyLimit, limits=limits)
    app.add_middleware(HostGuard, limits=limits)  # the outermost: before the token check and any body
    fds = raise_fd_limit()
    limit = effective_connection_cap(limits.max_connections, fds)
    cap = ConnectionCap(limit, stranger_share(limit) if known is not None else limit, known)
    log.info("%s listener %s:%d: at most %d connections, at most %d of them strangers (open-file limit %d)",
             "TLS" if tls else "HTTP", host, port, cap.limit, cap.strangers, fds)
    sniffing = sniffing_protocol(guarded_http(limits), binary, limits.header_timeout_s)
    protocol = capped(sniffing, cap, tls, limits.tls_handshake_timeout_s())
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, lifespan="on",
                            timeout_graceful_shutdown=3, http=protocol, **uvicorn_options(limits))
    return GracefulServer(config)
