"""The live console at ``/console`` (docs/console.md): one page of plain HTML, CSS and JavaScript served by
every controller node, kept current by one server-sent event stream per page.

The stream is fed by one ``ConsoleFeed`` per node, which runs only while some page is open: once a second it
reads this node's own state (its replica of the state machine and its own live table, so a follower or a node
cut off from the leader still shows what it knows, and says which it is), asks the other controllers for
their Raft status and each group's master for its replication status, and publishes the result when it
changed. Beside it, every few seconds, a ``ConsumerWatch`` asks the same masters for their consumer groups
over RocketMQ's remoting protocol (console_brokers.py; the view and its history are console_consumers.py).
Each stream adds the events applied since it last looked. Nothing here writes: the admin actions are sent by
the page to ``/console/api/...``, forwarded with the operator's token to the leader, whose answer code the
page shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from services.broker import contract as bc
from services.common import tls
from services.common.answers import checked
from services.common.codes import ResponseCode
from services.common.controller_client import AsyncControllerClient
from services.common.envelope import respond
from services.common.errors import MqctlError
from services.common.httpguard import SEND_BUFFER
from services.common.wire import exchange_async
from services.controller import contract as c
from services.controller.console_brokers import ConsumerWatch, Master
from services.controller.contract import CleanBrokerDataRequest, ElectMasterBody
from services.controller.controller import ControllerManager

log = logging.getLogger(__name__)
STATIC = Path(__file__).with_name("console_static")
PAGE, STREAM, REPORT = "/console", "/console/stream", "/console/report"
ELECT, CLEAN = "/console/api/electMaster", "/console/api/cleanBrokerData"
#: What a new page gets of the event history; later it gets every event as it is applied.
FIRST_EVENTS = 300
KEEPALIVE_S = 15.0
#: Streams one node serves at once; more are answered 503 SYSTEM_BUSY (the page tries again by itself).
MAX_STREAMS = 64
#: What the kernel may hold of one stream's messages (about twice this, as Linux counts): a client that stops
#: reading then backs its stream up into the server soon enough to be seen and cut off (httpguard.py).
STREAM_SEND_BUFFER = 64 * 1024
#: A message goes out in pieces of at most this: the server waits for a slow client between pieces, so what it
#: holds for one is its write buffer's high-water mark and one piece, whatever the size of the view.
SEND_CHUNK = 16 * 1024


def report_anchor(cluster: str, broker: str) -> str:
    """The id of a group's timeline in the report's page (spark_reports/render.py writes the same)."""
    return "g-" + re.sub(r"[^A-Za-z0-9_.-]", "_", f"{cluster}/{broker}")


class ConsoleFeed:
    """This node's view, rebuilt every ``interval_s`` while at least one page listens."""

    def __init__(self, manager: ControllerManager, interval_s: float = 1.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.manager, self.interval_s, self.clock = manager, interval_s, clock
        self.version = 0
        self.snapshot: dict[str, Any] = {}
        self.head = b""  # the message's bytes up to this stream's events: made once per view for every stream
        self._listeners = 0
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._report: tuple[float, set[str]] = (-1.0, set())
        self.consumers = ConsumerWatch(clock)

    async def updates(self) -> AsyncIterator[dict[str, Any] | None]:
        """Each new snapshot as it is published (the current one first); None after ``KEEPALIVE_S`` of none."""
        self._listeners += 1
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="console-feed")
        seen = [0]  # the version last given (0: none built yet)

        def fresh() -> bool:
            return self.version != seen[0]

        try:
            while True:
                async with self._changed:
                    try:
                        await asyncio.wait_for(self._changed.wait_for(fresh), KEEPALIVE_S)
                    except TimeoutError:
                        yield None
                        continue
                    seen[0] = self.version
                yield self.snapshot
        finally:
            self._listeners -= 1

    async def _run(self) -> None:
        watch = asyncio.create_task(self.consumers.run(self._masters, lambda: self._listeners > 0),
                                    name="console-consumers")
        try:
            await self._rebuild()
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    async def _rebuild(self) -> None:
        async with httpx.AsyncClient(timeout=httpx.Timeout(1.0), verify=tls.httpx_verify()) as http:
            while self._listeners > 0:
                try:
                    snapshot = await self.build(http)
                except Exception:  # never let one bad answer stop every page's updates
                    log.exception("console: building the view failed; retrying")
                    await asyncio.sleep(self.interval_s)
                    continue
                if {k: v for k, v in snapshot.items() if k != "at"} != \
                        {k: v for k, v in self.snapshot.items() if k != "at"}:
                    async with self._changed:
                        self.snapshot = snapshot
                        self.head = message_head(snapshot)
                        self.version += 1
                        self._changed.notify_all()
                await asyncio.sleep(self.interval_s)

    async def build(self, http: httpx.AsyncClient) -> dict[str, Any]:
        m = self.manager
        me = m.config.self_peer()
        groups = self._sync_groups()
        peers = [p for p in m.config.peers() if p.id != me.id]
        remote = await asyncio.gather(*(self._get(http, p.address, c.METADATA, PeerStatus) for p in peers))
        ha = await asyncio.gather(*(self._get(http, g["masterAddress"], bc.HA_STATUS, Replication) for g in groups))
        local = m.metadata()
        controllers = [_controller_row(me.id, me.address, local, True)]
        controllers += [_controller_row(p.id, p.address, data, False) for p, data in zip(peers, remote)]
        in_report = self._report_groups()
        return {
            "at": int(self.clock() * 1000),
            "node": {"id": me.id, "address": me.address, "isLeader": m.serving,
                     "leaderAddress": local.get("controllerLeaderAddress")},
            "tokenRequired": bool(m.config.authToken),
            "controllers": controllers,
            "groups": [_group_row(g, status, in_report) for g, status in zip(groups, ha)],
            "reportAvailable": bool(in_report),
            "consumers": self.consumers.view,
        }

    def _sync_groups(self) -> list[dict[str, Any]]:
        """Each broker group as this node's state machine has it (getSyncStateSet's data)."""
        m = self.manager
        if m.raft is None:
            return []
        data = m.raft.read(lambda s: s.get_sync_state_data(list(s.broker_sets), m.alive).data)
        return list((data or {}).get("brokers") or [])

    def _masters(self) -> list[Master]:
        return [Master(g["clusterName"], g["brokerName"], g.get("masterAddress")) for g in self._sync_groups()]

    @staticmethod
    async def _get(http: httpx.AsyncClient, address: str | None, path: str, model: type[M]) -> dict[str, Any] | None:
        """What the console reads of a peer's or a master's answer, or None: the answer is bounded in size and
        time (wire.exchange_async), and only fields that fit ``model`` are kept."""
        if not address:
            return None
        try:
            env = await exchange_async(http, address, "GET", path, what="server", headers={},
                                       deadline=time.monotonic() + 1.0)
            if env.code != ResponseCode.SUCCESS:
                return None
            return checked(model, env.data, address).model_dump()
        except MqctlError:
            return None

    def _report_groups(self) -> set[str]:
        """The anchors of the groups in the report the operator pointed the console at (re-read when it changes)."""
        page = self.report_page()
        if page is None:
            return set()
        try:
            mtime = page.stat().st_mtime
            if mtime != self._report[0]:
                found = set(re.findall(r'<h3 id="(g-[A-Za-z0-9_.-]+)"', page.read_text(encoding="utf-8",
                                                                                   errors="replace")))
                self._report = (mtime, found)
        except OSError:
            return set()
        return self._report[1]

    def report_page(self) -> Path | None:
        folder = self.manager.config.consoleReportDir
        return Path(folder).expanduser() / "report.html" if folder else None


M = TypeVar("M", bound=BaseModel)
Count = Annotated[int, Field(ge=-1, le=2**63 - 1)]
Short = Annotated[str, Field(max_length=32)]


class _Read(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class RaftView(_Read):
    state: Short | None = None
    term: Count | None = None
    commitIndex: Count | None = None
    lastApplied: Count | None = None


class PeerStatus(_Read):
    """What the console shows of another controller's metadata."""

    isLeader: bool | None = None
    raft: RaftView | None = None
    appliedEvents: Count | None = None


class SlaveView(_Read):
    slaveId: Count
    ackOffset: Count | None = None
    lag: Count | None = None


class Replication(_Read):
    """What the console shows of a master's haStatus (at most 1,000 slaves)."""

    confirmOffset: Count | None = None
    maxOffset: Count | None = None
    slaves: Annotated[list[SlaveView], Field(max_length=1000)] = []


def _controller_row(node_id: str, address: str, data: dict[str, Any] | None, local: bool) -> dict[str, Any]:
    raft = (data or {}).get("raft") or {}
    return {"id": node_id, "address": address, "thisNode": local, "reachable": data is not None,
            "isLeader": bool((data or {}).get("isLeader")), "state": raft.get("state"), "term": raft.get("term"),
            "commitIndex": raft.get("commitIndex"), "lastApplied": raft.get("lastApplied"),
            "appliedEvents": (data or {}).get("appliedEvents")}


def _group_row(group: dict[str, Any], status: dict[str, Any] | None, in_report: set[str]) -> dict[str, Any]:
    slaves = {s["slaveId"]: s for s in (status or {}).get("slaves") or []}
    replicas = []
    for replica in [*group.get("inSyncReplicas", []), *group.get("notInSyncReplicas", [])]:
        broker_id = replica["brokerId"]
        slave = slaves.get(broker_id, {})
        replicas.append({"brokerId": broker_id, "address": replica["brokerAddress"], "alive": replica["alive"],
                         "inSync": replica in group.get("inSyncReplicas", []),
                         "role": "master" if broker_id == group.get("masterBrokerId") else "slave",
                         "ackOffset": slave.get("ackOffset"), "lag": slave.get("lag")})
    anchor = report_anchor(group["clusterName"], group["brokerName"])
    return {"clusterName": group["clusterName"], "brokerName": group["brokerName"],
            "masterBrokerId": group.get("masterBrokerId"), "masterAddress": group.get("masterAddress"),
            "masterEpoch": group.get("masterEpoch"), "syncStateSetEpoch": group.get("syncStateSetEpoch"),
            "confirmOffset": (status or {}).get("confirmOffset"), "maxOffset": (status or {}).get("maxOffset"),
            "replicas": sorted(replicas, key=lambda r: r["brokerId"]),
            "report": f"{REPORT}#{anchor}" if anchor in in_report else None}


def _events_since(manager: ControllerManager, cursor: int | None) -> tuple[list[dict[str, Any]], int]:
    """The events applied at or after ``cursor`` (None: the latest ``FIRST_EVENTS``) and the next cursor."""
    if manager.raft is None:
        return [], cursor or 0
    def page(s: Any) -> tuple[list[dict[str, Any]], int]:
        start = max(0, s.next_event_index - FIRST_EVENTS) if cursor is None else cursor
        events = s.events_page(start, 1000)
        return events, (events[-1]["index"] + 1 if events else max(start, s.next_event_index))
    result: tuple[list[dict[str, Any]], int] = manager.raft.read(page)
    return result


def stream_route(feed: ConsoleFeed, manager: ControllerManager) -> Callable[[Request], Awaitable[Response]]:
    """The stream's route: at most MAX_STREAMS at once, each the newest view and this page's new events."""
    streams = StreamCount(MAX_STREAMS)

    async def stream(request: Request) -> Response:
        if not streams.take():
            return respond(ResponseCode.SYSTEM_BUSY, f"this controller already serves {MAX_STREAMS} console "
                                                     "streams, the most it keeps open: close a page, or open the "
                                                     "console on another controller", status=503)
        limit = request.scope.get("extensions", {}).get(SEND_BUFFER, {}).get("limit")
        if limit is not None:
            limit(STREAM_SEND_BUFFER)

        async def events() -> AsyncIterator[bytes | memoryview]:
            cursor: int | None = None
            yield b"retry: 2000\n\n"
            async for snapshot in feed.updates():
                if await request.is_disconnected():
                    return
                if snapshot is None:
                    yield b": keepalive\n\n"
                    continue
                new, cursor = _events_since(manager, cursor)
                head, tail = memoryview(feed.head), message_tail(new)  # only bytes wait for a slow client
                del new
                for start in range(0, len(head), SEND_CHUNK):  # the view is shared by every stream: never copied whole
                    yield head[start:start + SEND_CHUNK]
                yield tail
        return CountedStream(events(), streams.give_back, media_type="text/event-stream",
                             headers={**_NO_CACHE, "X-Accel-Buffering": "no"})
    return stream


def install_console(app: FastAPI, manager: ControllerManager) -> ConsoleFeed:
    """The page, its files, its stream, the report it links to and its two admin actions."""
    feed = ConsoleFeed(manager)

    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html", headers=_NO_CACHE)

    async def asset(name: str) -> Response:
        path = STATIC / name
        if name not in ("console.js", "console.css") or not path.is_file():
            return Response(status_code=404)
        kind = "text/javascript" if name.endswith(".js") else "text/css"
        return FileResponse(path, media_type=kind, headers=_NO_CACHE)

    stream = stream_route(feed, manager)

    async def report() -> Response:
        path = feed.report_page()
        if path is None or not path.is_file():
            return respond(ResponseCode.SYSTEM_ERROR, "no report here: set consoleReportDir to the --output "
                                                      "folder of mqctl report")
        return FileResponse(path, media_type="text/html")

    async def elect(body: ElectMasterBody, request: Request) -> JSONResponse:
        return await _forward(manager, request, c.ELECT_MASTER, body.model_dump(exclude_none=True))

    async def clean(body: CleanBrokerDataRequest, request: Request) -> JSONResponse:
        return await _forward(manager, request, c.CLEAN_BROKER_DATA, body.model_dump(exclude_none=True))

    app.add_api_route(PAGE, page, methods=["GET"], include_in_schema=False)
    app.add_api_route(PAGE + "/", page, methods=["GET"], include_in_schema=False)
    app.add_api_route(PAGE + "/static/{name}", asset, methods=["GET"], include_in_schema=False)
    app.add_api_route(STREAM, stream, methods=["GET"], include_in_schema=False)
    app.add_api_route(REPORT, report, methods=["GET"], include_in_schema=False)
    app.add_api_route(ELECT, elect, methods=["POST"], include_in_schema=False)
    app.add_api_route(CLEAN, clean, methods=["POST"], include_in_schema=False)
    return feed


_NO_CACHE = {"Cache-Control": "no-store"}


def message_head(snapshot: dict[str, Any]) -> bytes:
    """A view's ``state`` message up to where each stream adds its own events: the snapshot's JSON object, open."""
    encoded = json.dumps(snapshot, separators=(",", ":"))
    return b"event: state\ndata: " + encoded[:-1].encode() + (b"," if len(encoded) > 2 else b"")


def message_tail(events: list[dict[str, Any]]) -> bytes:
    """The rest of the message: this stream's new events, and the end of the object and of the message."""
    return b'"events":' + json.dumps(events, separators=(",", ":")).encode() + b"}\n\n"


class StreamCount:
    """The console streams a node serves at once, up to ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit, self.open = limit, 0

    def take(self) -> bool:
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def give_back(self) -> None:
        self.open -= 1


class CountedStream(StreamingResponse):
    """A stream that gives its place back however it ends: finished, cut off, or its client gone. What a
    stream holds is bounded too: each message is the newest view (never a queue of old ones), and a client that
    stops taking them is cut off by the HTTP guard (services/common/httpguard.py)."""

    def __init__(self, content: AsyncIterator[bytes | memoryview], on_end: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._on_end = on_end

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_end()


async def _forward(manager: ControllerManager, request: Request, path: str, body: dict[str, Any]) -> JSONResponse:
    """An admin action from the page, sent to the leader with the operator's token; its answer as it came."""
    auth = request.headers.get("authorization", "")
    token = auth[7:] if auth.lower().startswith("bearer ") else None
    client = AsyncControllerClient([p.address for p in manager.config.peers()],
                                   timeout=manager.config.controllerRequestTimeoutMillis / 1000, token=token)
    try:
        env = await client.call("POST", path, json=body, accept=tuple(range(1, 100_000)))
    except MqctlError as exc:
        return respond(ResponseCode.SYSTEM_ERROR, exc.remark)
    finally:
        with contextlib.suppress(Exception):
            await client.aclose()
    return respond(env.code, env.remark, env.data)
