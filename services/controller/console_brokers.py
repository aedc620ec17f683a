"""What the console asks the brokers for its consumer-groups view (console_consumers.py makes the view): RocketMQ's
own remoting requests, so that RocketMQ's Java brokers answer them as ours do.

Each round (every ``STATS_INTERVAL_S`` while a page is open) goes to each broker group's master, at most
``MAX_MASTERS`` of them, all at once:

=====  ================================  ==================================================================
code   request                           what is read of the answer
=====  ================================  ==================================================================
28     GET_BROKER_RUNTIME_INFO           ``putTps`` and ``getTransferredTps``: their first figure (10 s)
201    GET_ALL_SUBSCRIPTIONGROUP_CONFIG  the consumer groups' names (asked again every
                                         ``GROUP_LIST_INTERVAL_S`` only), RocketMQ's own groups left out
43     GET_ALL_CONSUMER_OFFSET           with 201: the groups that committed offsets (``topic@group``), for a
                                         group that consumes without settings of its own
208    GET_CONSUME_STATS                 per group, the first ``MAX_GROUPS_PER_BROKER`` by name: each queue's
                                         broker and consumer offsets and last consume time, the consume TPS
=====  ================================  ==================================================================

Every byte from a broker is hostile: an answer is at most ``MAX_ANSWER_BYTES`` (the connection is dropped on
a longer frame), read by the project's decoders (a large one on a worker thread), checked again here (names'
lengths, queues per group, rates that are numbers), and each request waits ``REQUEST_TIMEOUT_S`` at most, a
master's whole round ``BROKER_DEADLINE_S``, with at most ``IN_FLIGHT`` requests out at once over all masters.
A master that does not answer over remoting (no address, refused, silent, a server that speaks HTTP only) is
``n/a``; one whose answer is refused here is ``bad answer``; a group whose stats did not come is named as
such. Nothing here raises to the caller.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from services.common.codes import ResponseCode
from services.common.errors import MqctlError
from services.common.offload import Busy, Offload
from services.common.remoting_client import RemotingClient
from services.controller.console_consumers import (
    BAD_ANSWER,
    MAX_GROUPS,
    MAX_POINTS,
    MAX_QUEUE_ROWS,
    NOT_AVAILABLE,
    WINDOW_MS,
    BrokerAnswer,
    ConsumerGroups,
    ConsumersView,
    GroupAnswer,
    QueueLag,
    is_system_group,
)
from services.remoting import admin_bodies as ab
from services.remoting import admin_headers as ah
from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting.bodies import Body, KVTable
from services.remoting.command import RemotingCommand, make_request
from services.remoting.errors import RemotingError
from services.remoting.subscription_bodies import SubscriptionGroupWrapper

__all__ = ["BROKER_DEADLINE_S", "GROUP_LIST_INTERVAL_S", "IN_FLIGHT", "MAX_ANSWER_BYTES", "MAX_GROUPS_PER_BROKER",
           "MAX_MASTERS", "MAX_QUEUES_PER_GROUP", "REQUEST_TIMEOUT_S", "STATS_INTERVAL_S", "BrokerAsker",
           "ConsumerWatch", "Master", "parse_tps"]

log = logging.getLogger(__name__)

#: How often the masters are asked while a page is open.
STATS_INTERVAL_S = 3.0
#: How often each master's list of groups (201) is asked again.
GROUP_LIST_INTERVAL_S = 10.0
#: The longest wait for one answer, and for all of one master's answers in a round.
REQUEST_TIMEOUT_S, BROKER_DEADLINE_S = 1.0, 2.5
#: Masters asked per round, consume stats asked per master per round, requests out at once.
MAX_MASTERS, MAX_GROUPS_PER_BROKER, IN_FLIGHT = 100, 50, 8
#: The largest answer read (a frame beyond it drops the connection): some 10,000 queues of consume stats.
MAX_ANSWER_BYTES = 2 * 1024 * 1024
#: The most queues one group's consume stats may hold, and the longest topic or broker name taken.
MAX_QUEUES_PER_GROUP, MAX_NAME = 8192, 512
#: The highest rate taken as a rate (a broker's TPS beyond it is no measurement).
MAX_TPS = 1e12
LIMITS = {"maxGroups": MAX_GROUPS, "maxPoints": MAX_POINTS, "maxQueueRows": MAX_QUEUE_ROWS,
          "maxGroupsPerBroker": MAX_GROUPS_PER_BROKER, "maxMasters": MAX_MASTERS}

B = TypeVar("B", bound=Body)
#: One request to an address, answered before REQUEST_TIMEOUT_S or failed with an MqctlError.
Call = Callable[[str, RemotingCommand], Awaitable[RemotingCommand]]


@dataclass(frozen=True)
class Master:
    """A broker group and its master's address as this controller's state machine has them."""

    cluster_name: str
    broker_name: str
    address: str | None


class _Refused(Exception):
    """One request gave nothing usable: ``status`` NOT_AVAILABLE (no answer) or BAD_ANSWER, and why."""

    def __init__(self, status: str, remark: str) -> None:
        super().__init__(remark)
        self.status, self.remark = status, remark


def parse_tps(text: str | None) -> float | None:
    """The first figure of a runtime-info rate (``"12.5 11.0 9.8"``: over 10 s, 1 min, 10 min); None if none."""
    head = (text or "").strip().split(" ", 1)[0]
    try:
        value = float(head[:32])
    except ValueError:
        return None
    return value if math.isfinite(value) and 0 <= value <= MAX_TPS else None


class BadStats(ValueError):
    """A consume-stats answer that decoded but is not usable."""


def queue_lags(stats: ab.ConsumeStats) -> tuple[QueueLag, ...]:
    """The queues of a consume-stats answer, checked: a bounded count, names of a bounded length."""
    if len(stats.offset_table) > MAX_QUEUES_PER_GROUP:
        raise BadStats(f"more than {MAX_QUEUES_PER_GROUP} queues")
    queues = []
    for queue, w in stats.offset_table.items():
        if not 0 < len(queue.topic) <= MAX_NAME or len(queue.broker_name) > MAX_NAME:
            raise BadStats("a queue's topic or broker name is empty or too long")
        queues.append(QueueLag(queue.topic, queue.broker_name, queue.queue_id, w.broker_offset, w.consumer_offset,
                               max(0, w.last_timestamp)))
    return tuple(sorted(queues))


class BrokerAsker:
    """One round's questions to one master (``ask``), through ``call``; remembers each master's group list."""

    def __init__(self, call: Call, clock: Callable[[], float] = time.time,
                 offload: Offload | None = None, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.call, self.clock, self.monotonic = call, clock, monotonic
        self.offload = offload or Offload(name="console-decode")
        self._in_flight: asyncio.Semaphore | None = None
        self._lists: dict[str, tuple[float, tuple[str, ...], int]] = {}  # address -> (asked at, names, listed)

    async def ask(self, master: Master) -> BrokerAnswer:
        base = BrokerAnswer(master.cluster_name, master.broker_name, master.address)
        if not master.address:
            return replace(base, status=NOT_AVAILABLE, remark="no master")
        try:
            async with asyncio.timeout(BROKER_DEADLINE_S):
                return await self._ask(master.address, base)
        except TimeoutError:
            return replace(base, status=NOT_AVAILABLE, remark=f"no answer within {BROKER_DEADLINE_S:g} s")
        except _Refused as exc:
            return replace(base, status=exc.status, remark=exc.remark)

    def forget(self, addresses: Sequence[str]) -> None:
        """Keep the group lists of these addresses only."""
        for address in [a for a in self._lists if a not in addresses]:
            del self._lists[address]

    async def _ask(self, address: str, base: BrokerAnswer) -> BrokerAnswer:
        put_tps, get_tps = await self._runtime(address)
        names, listed = await self._group_names(address)
        results = await asyncio.gather(*(self._stats(address, name) for name in names))
        groups = tuple(r for r in results if r is not None)
        failed = tuple(n for n, r in zip(names, results) if r is None)
        return replace(base, remark=f"{len(failed)} of {len(names)} groups' stats not answered" if failed else "",
                       groups_listed=listed, groups=groups, failed_groups=failed, put_tps=put_tps, get_tps=get_tps)

    async def _runtime(self, address: str) -> tuple[float | None, float | None]:
        try:
            table = (await self._request(address, ah.GET_BROKER_RUNTIME_INFO, {}, KVTable, "runtime info")).table
        except _Refused as exc:
            if exc.status == NOT_AVAILABLE:
                raise  # the first question: a master that does not answer it is not asked the rest
            return None, None
        return parse_tps(table.get("putTps")), parse_tps(table.get("getTransferredTps"))

    async def _group_names(self, address: str) -> tuple[tuple[str, ...], int]:
        """The groups to ask of (the first MAX_GROUPS_PER_BROKER by name, RocketMQ's own left out) and how many
        the broker listed; the list is asked again after GROUP_LIST_INTERVAL_S."""
        asked_at, names, listed = self._lists.get(address, (-math.inf, (), 0))
        if self.monotonic() - asked_at >= GROUP_LIST_INTERVAL_S:
            wrapper = await self._request(address, ah.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}, SubscriptionGroupWrapper,
                                          "group list")
            found = set(wrapper.table) | await self._committing_groups(address)
            mine = sorted(n for n in found if not is_system_group(n))
            names, listed = tuple(mine[:MAX_GROUPS_PER_BROKER]), len(mine)
            self._lists[address] = (self.monotonic(), names, listed)
        return names, listed

    async def _committing_groups(self, address: str) -> set[str]:
        """The groups of the master's offset table (``topic@group`` keys); none if it does not give it."""
        try:
            offsets = await self._request(address, bh.GET_ALL_CONSUMER_OFFSET, {}, bb.ConsumerOffsetSerializeWrapper,
                                          "consumer offsets")
        except _Refused:
            return set()
        return {group for key in offsets.offset_table if 0 < len(group := key.partition("@")[2]) <= MAX_NAME}

    async def _stats(self, address: str, group: str) -> GroupAnswer | None:
        try:
            stats = await self._request(address, ah.GET_CONSUME_STATS, {"consumerGroup": group}, ab.ConsumeStats,
                                        "consume stats")
            tps = stats.consume_tps
            if not (math.isfinite(tps) and 0 <= tps <= MAX_TPS):
                raise BadStats("the consume TPS is no rate")
            return GroupAnswer(group, int(self.clock() * 1000), queue_lags(stats), tps)
        except (_Refused, BadStats):
            return None

    async def _request(self, address: str, code: int, fields: dict[str, str], body: type[B], what: str) -> B:
        if self._in_flight is None:
            self._in_flight = asyncio.Semaphore(IN_FLIGHT)
        async with self._in_flight:
            try:
                answer = await self.call(address, make_request(code, 0, fields))
            except MqctlError as exc:
                raise _Refused(NOT_AVAILABLE, f"no answer over RocketMQ's remoting protocol ({exc.remark[:160]})") \
                    from None
            if answer.code != ResponseCode.SUCCESS:
                raise _Refused(BAD_ANSWER, f"{what} refused with code {answer.code}")
            try:
                return await self.offload.run(len(answer.body), lambda: body.decode(answer.body,
                                                                                    max_bytes=MAX_ANSWER_BYTES))
            except RemotingError as exc:
                raise _Refused(BAD_ANSWER, f"malformed {what}: {str(exc)[:160]}") from None
            except Busy:
                raise _Refused(NOT_AVAILABLE, f"{what} not read: too many large answers at once") from None


class ConsumerWatch:
    """Asks every master each ``interval_s`` while ``running()``; ``view`` is the newest consumer-groups view."""

    def __init__(self, clock: Callable[[], float] = time.time, interval_s: float = STATS_INTERVAL_S) -> None:
        self.clock, self.interval_s = clock, interval_s
        self.groups = ConsumerGroups(interval_s, LIMITS)
        self.view: dict[str, Any] = ConsumersView(None, interval_s, WINDOW_MS, limits=LIMITS).to_json()

    async def run(self, masters: Callable[[], list[Master]], running: Callable[[], bool],
                  call: Call | None = None) -> None:
        """Rounds until ``running()`` is false, over one remoting client (or ``call``) closed at the end."""
        client = RemotingClient(timeout_s=REQUEST_TIMEOUT_S, max_frame_size=MAX_ANSWER_BYTES)
        asker = BrokerAsker(call or client.call, self.clock)
        try:
            while running():
                started = time.monotonic()
                try:
                    await self.round(asker, masters())
                except Exception:  # never let one bad round stop the next (the answers are already checked)
                    log.exception("console: asking the brokers for their consumer groups failed; retrying")
                await asyncio.sleep(max(0.1, self.interval_s - (time.monotonic() - started)))
        finally:
            await client.close()
            asker.offload.close()

    async def round(self, asker: BrokerAsker, masters: list[Master]) -> ConsumersView:
        chosen = masters[:MAX_MASTERS]
        asker.forget([m.address for m in chosen if m.address])
        answers = await asyncio.gather(*(asker.ask(m) for m in chosen))
        view = self.groups.update(answers, int(self.clock() * 1000))
        self.view = view.to_json()
        return view
