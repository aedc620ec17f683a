"""The controller as the cluster's name server: the route table brokers register their topics in.

Theory of operation. RocketMQ's name server (``RouteInfoManager``) keeps soft state, rebuilt from what
brokers send: every broker registers with every name server every 30 s (REGISTER_BROKER, 103) with its
topic configs, and a name server forgets a broker when its connection closes, when it unregisters (104),
or when it has not registered for its heartbeat timeout (120 s unless it asks for another). Nothing here
goes through Raft: each controller node holds its own table, as each name server does, and clients may
ask any node. The table keeps RocketMQ's shape:

* groups: broker name -> cluster and the broker ids and addresses that registered (id 0 is the master);
* the live table: (cluster, address) -> when it last registered, its timeout, its DataVersion, its
  HA address and the connection it came on;
* topics: topic -> broker name -> QueueData, written from the registrations of a group's master (or,
  with no master, of its lowest id when the broker declares enableActingMaster), merged registration by
  registration and dropped only when the whole group is gone, as RocketMQ does.

In controller mode a RocketMQ broker registers with id 0 while it is master and with its own id
otherwise, so the name server learns of a failover only when the new master re-registers. This table
also asks the controller (``controller_view``, the Raft state of this node) about each group. A group the
controller manages (a broker-set in its state) is the controller's, whatever a registration says:

* its cluster is the controller's: a registration naming it in another cluster is refused, and a group
  of that name registered earlier in another cluster (before the controller knew it) is dropped;
* a registration is accepted only from an address the controller has for that broker-set, and, when the
  controller holds a key for that broker id, only when the broker signed it with that key (fresh, and
  each signature once);
* its ids are the controller's: an address is shown under the id the controller gave it, and as 0 when
  it is the controller's master; the id and data version a registration claims decide nothing;
* the group's topics come from the registration of the controller's master.

So a route lists the current master as 0 as soon as the controller has elected it, even before it
re-registers, and never lists an address the controller does not have for the group. A group the
controller does not manage (a RocketMQ broker without controller mode) keeps RocketMQ's rules.

For every group, a registration belongs to the connection it came on: only that connection can
unregister it (104) or keep it fresh (322, 904), and it is forgotten when that connection closes.
Liveness still comes only from registrations: the controller's view never adds an address that has not
registered with this node.

The table does no I/O and reads time only through ``now_ms``; expiry is applied before every read and
write, which is what RocketMQ's 5-second scan approximates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field

from services.common.codes import ResponseCode
from services.common.signing import signature_ok
from services.remoting.acl import ReplayGuard
from services.remoting.bodies import BrokerData, ClusterInfo, QueueData, TopicRouteData
from services.remoting.javaorder import hash_map_order, java_hash_order, new_hash_set_table_size
from services.remoting.namesrv_bodies import DataVersion, TopicConfig

__all__ = ["AUTO_CREATE_TOPIC", "DEFAULT_BROKER_TIMEOUT_MS", "MASTER_ID", "TOPICS_PER_STEP", "ControllerGroup",
           "Limits", "Proof", "RegisterResult", "Registration", "RouteRefused", "RouteTable", "check_topics"]

MASTER_ID = 0
#: RocketMQ's DEFAULT_BROKER_CHANNEL_EXPIRED_TIME for name-server registrations.
DEFAULT_BROKER_TIMEOUT_MS = 120_000
#: A broker may ask for a longer timeout, up to this (a huge one would keep a dead broker routable).
MAX_BROKER_TIMEOUT_MS = 600_000
#: The topic a client's producer falls back to for a topic nobody has created yet (autoCreateTopicEnable).
AUTO_CREATE_TOPIC = "TBW102"
PERM_WRITE = 2
PERM_READ = 4
#: TopicValidator: a topic name is 1-127 of these characters.
TOPIC_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]{1,127}")
_CONTROL = re.compile(r"[\x00-\x20\x7f]")
#: The topics a registration counts or takes between two turns of the event loop (a few milliseconds).
TOPICS_PER_STEP = 1000
_PORT = re.compile(r"[0-9]{1,5}")


@dataclass(frozen=True)
class Limits:
    """What one node holds at most, whoever registers (registration needs no credentials)."""

    max_brokers: int = 4096
    max_queue_entries: int = 300_000  # (topic, broker group) pairs
    max_queue_nums: int = 4096  # RocketMQ's own benchmark topic has 1024 queues


class RouteRefused(Exception):
    """A registration this table will not take; ``code`` and ``remark`` are the answer to send."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code, self.remark = code, remark


@dataclass(frozen=True)
class Proof:
    """A registration signed by the broker's key: ``signature`` (hex) over ``message`` (the request as
    services/common/signing.request_message encodes it), made at ``signed_ms`` (epoch millis)."""

    signature: str
    signed_ms: int
    message: bytes


@dataclass(frozen=True)
class Registration:
    """One REGISTER_BROKER, decoded. ``channel`` identifies the connection it came on (any object)."""

    cluster: str
    broker_name: str
    broker_id: int
    address: str
    ha_address: str
    topics: Mapping[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)
    heartbeat_timeout_ms: int | None = None
    enable_acting_master: bool | None = None
    zone_name: str | None = None
    channel: object = None
    proof: Proof | None = None


@dataclass(frozen=True)
class RegisterResult:
    """RegisterBrokerResult: for a broker that is not its group's master, the master's addresses."""

    master_address: str | None = None
    ha_address: str | None = None


@dataclass(frozen=True)
class ControllerGroup:
    """What the controller's state says of one broker group: its cluster, its master's id (None while it
    has none), every broker id it assigned with the address that registered it, and the public key it
    holds for each id that has one."""

    cluster: str
    master_id: int | None
    addresses: Mapping[int, str]
    keys: Mapping[int, str] = field(default_factory=dict)


ControllerView = Callable[[str], "ControllerGroup | None"]


@dataclass
class _Live:
    broker_name: str
    last_ms: int
    timeout_ms: int
    data_version: DataVersion
    ha_address: str
    channel: object


@dataclass
class _Group:
    cluster: str
    addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False


class RouteTable:
    def __init__(self, now_ms: Callable[[], int], controller_view: ControllerView | None = None,
                 limits: Limits | None = None, wall_ms: Callable[[], int] | None = None) -> None:
        """``now_ms`` times registrations (a monotonic clock); ``wall_ms`` (epoch millis, default
        ``now_ms``) judges how fresh a signed registration is."""
        self.now_ms = now_ms
        self.wall_ms = wall_ms or now_ms
        self.controller_view: ControllerView = controller_view or (lambda name: None)
        self.limits = limits or Limits()
        self._proofs = ReplayGuard()
        self._live: dict[tuple[str, str], _Live] = {}
        self._groups: dict[str, _Group] = {}
        self._clusters: dict[str, dict[str, None]] = {}  # cluster -> broker names, as an ordered set
        self._topics: dict[str, dict[str, QueueData]] = {}
        self._entries = 0

    # ------------------------------------------------------------------ writes
    def register(self, reg: Registration) -> RegisterResult:
        """Take a registration (RouteInfoManager.registerBroker); raises RouteRefused."""
        steps = self.registering(reg)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                result: RegisterResult = done.value
                return result

    def registering(self, reg: Registration, *, topics_checked: bool = False,
                    step: int = TOPICS_PER_STEP) -> Generator[None, None, RegisterResult]:
        """``register`` in steps: it yields after every ``step`` topics it counts or takes, so that a
        registration of many topics never holds an event loop long. Registrations must not interleave (the
        caller serialises them); other changes may come between steps: a registration whose broker is
        dropped meanwhile (its connection closed) takes no more topics. ``topics_checked``: the topics'
        names and numbers were already checked (``check_topics``, off the loop)."""
        self.expire()
        self._check(reg, topics_checked)
        view = self.controller_view(reg.broker_name)
        broker_id = reg.broker_id if view is None else self._admit(reg, view)
        yield from self._check_room(reg, step)
        key = (reg.cluster, reg.address)
        self._clusters.setdefault(reg.cluster, {})[reg.broker_name] = None
        group = self._groups.setdefault(reg.broker_name, _Group(reg.cluster))
        group.enable_acting_master, group.zone_name = bool(reg.enable_acting_master), reg.zone_name
        # one address holds one id: a slave that became master comes back under 0
        for held_id, address in list(group.addrs.items()):
            if address == reg.address and held_id != broker_id:
                del group.addrs[held_id]
        old = group.addrs.get(broker_id)
        if view is None and old is not None and old != reg.address and self._outranked(reg, old):
            self._live.pop(key, None)
            return RegisterResult()  # RocketMQ answers SUCCESS and keeps the broker that holds the id
        group.addrs[broker_id] = reg.address
        changed = old is None or self._version_changed(key, reg.data_version)
        timeout = reg.heartbeat_timeout_ms if reg.heartbeat_timeout_ms and reg.heartbeat_timeout_ms > 0 \
            else DEFAULT_BROKER_TIMEOUT_MS
        live = self._live[key] = _Live(reg.broker_name, self.now_ms(), min(timeout, MAX_BROKER_TIMEOUT_MS),
                                       reg.data_version, reg.ha_address, reg.channel)
        yield from self._take_topics(reg, group, changed, lambda: self._live.get(key) is live, step)
        return self._result(reg, group)

    def unregister(self, cluster: str, address: str, broker_name: str, channel: object = None) -> bool:
        """UNREGISTER_BROKER: the address leaves its group; a group left empty takes its topics along.
        Only the connection that registered the address can unregister it (RocketMQ lets anyone)."""
        self.expire()
        live = self._live.get((cluster, address))
        if live is None or live.channel is not channel:
            return False
        return self._remove(cluster, address, broker_name)

    def query_data_version(self, cluster: str, address: str, channel: object = None) -> DataVersion | None:
        """QUERY_DATA_VERSION: the DataVersion this broker last registered (None: not registered here).
        Asking on the connection that registered keeps the registration fresh, as RocketMQ's name server
        treats it; asking on another one does not."""
        self.expire()
        live = self._live.get((cluster, address))
        if live is None:
            return None
        if live.channel is channel:
            live.last_ms = self.now_ms()
        return live.data_version

    def touch(self, cluster: str, address: str, channel: object = None) -> None:
        """A lighter heartbeat (BROKER_HEARTBEAT, 904) on the connection that registered: the
        registration stays fresh."""
        live = self._live.get((cluster, address))
        if live is not None and live.channel is channel:
            live.last_ms = self.now_ms()

    def on_channel_closed(self, channel: object) -> int:
        """The connection registrations came on closed: those brokers are gone (as RocketMQ's
        BrokerHousekeepingService decides). Returns how many were removed."""
        keys = [k for k, live in self._live.items() if live.channel is channel]
        for cluster, address in keys:
            self._drop(cluster, address)
        return len(keys)

    def expire(self) -> list[tuple[str, str]]:
        """Forget every broker whose registration is older than its timeout; returns (cluster, address)."""
        now = self.now_ms()
        expired = [k for k, live in self._live.items() if live.last_ms + live.timeout_ms < now]
        for cluster, address in expired:
            self._drop(cluster, address)
        return expired

    # ------------------------------------------------------------------ reads
    def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: every group with its addresses, and the groups of every cluster."""
        self.expire()
        brokers = {name: data for name, group in self._groups.items()
                   if (data := self._broker_data(name, group)).broker_addrs}
        clusters = {c: frozenset(n for n in names if n in brokers) for c, names in self._clusters.items()}
        return ClusterInfo(brokers, {c: names for c, names in clusters.items() if names})

    def route(self, topic: str) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC: the topic's queues on each group and those groups' addresses, listed in
        the order RocketMQ's HashMap and HashSet iterate them; None for a topic no live group serves."""
        self.expire()
        shown = {name: data for name, queue in self._topics.get(topic, {}).items()
                 if (group := self._groups.get(name)) is not None
                 and (data := self._broker_data(name, group)).broker_addrs}
        if not shown:
            return None
        queues = {name: queue for name, queue in self._topics[topic].items() if name in shown}
        queue_order = hash_map_order(queues)
        name_order = java_hash_order(queue_order, new_hash_set_table_size(len(queues)))
        return TopicRouteData(tuple(queues[n] for n in queue_order), tuple(shown[n] for n in name_order), {})

    def topics(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic some group registered, in the order registered."""
        self.expire()
        return list(self._topics)

    def member_group(self, broker_name: str) -> dict[int, str]:
        """GET_BROKER_MEMBER_GROUP: the group's ids and addresses as routes show them (none: not registered)."""
        self.expire()
        return self.addresses(broker_name)

    # ------------------------------------------------------------------ operators' writes (205, 327, 216)
    def set_write_perm(self, broker_name: str, writable: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER (``writable`` False: every queue of the group loses PERM_WRITE) or
        ADD_WRITE_PERM_OF_BROKER (True: every queue becomes read-write, whatever it was, as RocketMQ sets it).
        Returns the number of topics changed. It lasts until the group's master registers another DataVersion
        (a changed topic config), as in RocketMQ; routes still show only what ``addresses`` allows."""
        self.expire()
        count = 0
        for queues in self._topics.values():
            queue = queues.get(broker_name)
            if queue is None:
                continue
            perm = PERM_READ | PERM_WRITE if writable else queue.perm & ~PERM_WRITE
            queues[broker_name] = QueueData(broker_name, queue.read_queue_nums, queue.write_queue_nums, perm,
                                            queue.topic_sys_flag)
            count += 1
        return count

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: the topic's routes on every group, or on the groups of ``cluster``. A group
        that still has the topic brings it back with its next registration, as in RocketMQ."""
        self.expire()
        queues = self._topics.get(topic)
        if queues is None:
            return
        names = list(queues) if not cluster else [n for n in self._clusters.get(cluster, {}) if n in queues]
        for name in names:
            del queues[name]
            self._entries -= 1
        if not queues:
            del self._topics[topic]

    def live_brokers(self) -> list[tuple[str, str, str]]:
        """(cluster, broker name, address) of every registration held."""
        return [(c, live.broker_name, a) for (c, a), live in self._live.items()]

    # ------------------------------------------------------------------ the combined view
    def addresses(self, broker_name: str) -> dict[int, str]:
        """The group's broker ids and addresses as routes show them (see the module's docstring)."""
        group = self._groups.get(broker_name)
        return {} if group is None else self._addresses(broker_name, group)

    def _addresses(self, name: str, group: _Group) -> dict[int, str]:
        """A managed group shows only the addresses the controller has for it, under the controller's ids
        (registrations taken before the controller knew the group included)."""
        view = self.controller_view(name)
        if view is None:
            return dict(sorted(group.addrs.items()))
        if view.cluster != group.cluster:
            return {}  # registered in another cluster before the controller knew the group: not shown
        shown: dict[int, str] = {}
        for address in group.addrs.values():
            broker_id = _controller_id(view, address)
            if broker_id is not None:
                shown[MASTER_ID if broker_id == view.master_id else broker_id] = address
        return dict(sorted(shown.items()))

    def _broker_data(self, name: str, group: _Group) -> BrokerData:
        return BrokerData(group.cluster, name, self._addresses(name, group), group.zone_name,
                          group.enable_acting_master)

    # ------------------------------------------------------------------ internals
    def _outranked(self, reg: Registration, old_address: str) -> bool:
        """Another live broker holds this id with a newer state (a higher master epoch): keep it."""
        other = self._live.get((reg.cluster, old_address))
        return other is not None and other.data_version.state_version > reg.data_version.state_version

    def _version_changed(self, key: tuple[str, str], version: DataVersion) -> bool:
        live = self._live.get(key)
        return live is None or live.data_version != version

    def _take_topics(self, reg: Registration, group: _Group, changed: bool, current: Callable[[], bool],
                     step: int) -> Generator[None, None, None]:
        shown = self._addresses(reg.broker_name, group)
        my_id = next((i for i, a in shown.items() if a == reg.address), None)
        is_master = my_id == MASTER_ID
        prime_slave = (reg.enable_acting_master is not None and not is_master and my_id is not None
                       and my_id == min(shown))
        if not (is_master or prime_slave):
            return
        for index, (topic, config) in enumerate(reg.topics.items()):
            if index and index % step == 0:
                yield
                if not current():
                    return  # dropped meanwhile: its topics must not come back with it gone
            queues = self._topics.get(topic)
            if changed or queues is None or reg.broker_name not in queues:
                perm = config.perm & ~PERM_WRITE if prime_slave and group.enable_acting_master else config.perm
                self._put_queue(topic, QueueData(reg.broker_name, config.read_queue_nums, config.write_queue_nums,
                                                 perm, config.topic_sys_flag))

    def _put_queue(self, topic: str, queue: QueueData) -> None:
        queues = self._topics.setdefault(topic, {})
        if queue.broker_name not in queues:
            self._entries += 1
        queues[str(queue.broker_name)] = queue

    def _result(self, reg: Registration, group: _Group) -> RegisterResult:
        shown = self._addresses(reg.broker_name, group)
        master = shown.get(MASTER_ID)
        if master is None or master == reg.address:
            return RegisterResult()
        live = self._live.get((reg.cluster, master))
        return RegisterResult(master, live.ha_address) if live is not None else RegisterResult()

    def _drop(self, cluster: str, address: str) -> None:
        """A broker gone by expiry or a closed connection: unregister it from the group it is in."""
        name = next((n for n, g in self._groups.items() if g.cluster == cluster and address in g.addrs.values()),
                    None)
        if name is None:
            self._live.pop((cluster, address), None)
        else:
            self._remove(cluster, address, name)

    def _remove(self, cluster: str, address: str, broker_name: str) -> bool:
        removed = self._live.pop((cluster, address), None) is not None
        group = self._groups.get(broker_name)
        if group is None or group.cluster != cluster:
            return removed
        before = len(group.addrs)
        group.addrs = {i: a for i, a in group.addrs.items() if a != address}
        if not group.addrs:
            self._forget_group(cluster, broker_name)
        elif group.enable_acting_master and MASTER_ID not in self._addresses(broker_name, group):
            for queues in self._topics.values():  # no master left: nobody may write (RocketMQ does the same)
                if (queue := queues.get(broker_name)) is not None:
                    queues[broker_name] = QueueData(broker_name, queue.read_queue_nums, queue.write_queue_nums,
                                                    queue.perm & ~PERM_WRITE, queue.topic_sys_flag)
        return removed or len(group.addrs) != before

    def _forget_group(self, cluster: str, broker_name: str) -> None:
        del self._groups[broker_name]
        names = self._clusters.get(cluster, {})
        names.pop(broker_name, None)
        if not names:
            self._clusters.pop(cluster, None)
        for topic in list(self._topics):
            if self._topics[topic].pop(broker_name, None) is not None:
                self._entries -= 1
            if not self._topics[topic]:
                del self._topics[topic]

    # ------------------------------------------------------------------ checks
    def _check(self, reg: Registration, topics_checked: bool) -> None:
        _check_name(reg.cluster, "clusterName")
        _check_name(reg.broker_name, "brokerName")
        _check_address(reg.address, "brokerAddr")
        if reg.ha_address:
            _check_address(reg.ha_address, "haServerAddr")
        if reg.zone_name is not None:
            _check_name(reg.zone_name, "zoneName")
        if reg.broker_id < 0:
            raise RouteRefused(ResponseCode.INVALID_PARAMETER, f"brokerId {reg.broker_id} is negative")
        if not topics_checked:
            check_topics(reg.topics, self.limits)
        group = self._groups.get(reg.broker_name)
        if group is not None and group.cluster != reg.cluster and self.controller_view(reg.broker_name) is None:
            raise RouteRefused(ResponseCode.INVALID_PARAMETER,
                               f"broker group {reg.broker_name} is registered in cluster {group.cluster}, "
                               f"not {reg.cluster}")

    def _admit(self, reg: Registration, view: ControllerGroup) -> int:
        """A registration for a group the controller manages: the id it is held under, or RouteRefused."""
        name = reg.broker_name
        if reg.cluster != view.cluster:
            raise RouteRefused(ResponseCode.NO_PERMISSION, f"broker group {name} belongs to cluster {view.cluster} "
                                                           f"in the controller's state, not {reg.cluster}")
        broker_id = _controller_id(view, reg.address)
        if broker_id is None:
            raise RouteRefused(ResponseCode.NO_PERMISSION, f"{reg.address} is not an address of broker group "
                                                           f"{name} in the controller's state")
        refusal = self._proof_refusal(reg, view)
        if refusal is not None:
            raise RouteRefused(ResponseCode.NO_PERMISSION, f"registration of {reg.address} in {name}: {refusal}")
        group = self._groups.get(name)
        if group is not None and group.cluster != view.cluster:  # a squatter from before the controller knew it
            for key in [k for k, live in self._live.items() if k[0] == group.cluster and live.broker_name == name]:
                del self._live[key]
            self._forget_group(group.cluster, name)
        return broker_id

    def _proof_refusal(self, reg: Registration, view: ControllerGroup) -> str | None:
        """Why the registration's signature does not prove it comes from the broker that holds the address
        (None: it does, or no broker id at that address has a key)."""
        keys = [key for broker_id, address in view.addresses.items()
                if address == reg.address and (key := view.keys.get(broker_id))]
        if not keys:
            return None
        proof = reg.proof
        if proof is None:
            return "the controller holds a key for this broker, and the registration is not signed with it"
        if not any(signature_ok(key, proof.signature, proof.message) for key in keys):
            return "the signature is not this broker's (or the registration was changed)"
        return self._proofs.admit(proof.signature, proof.signed_ms, self.wall_ms())

    def _check_room(self, reg: Registration, step: int) -> Generator[None, None, None]:
        if (reg.cluster, reg.address) not in self._live and len(self._live) >= self.limits.max_brokers:
            raise RouteRefused(ResponseCode.SYSTEM_ERROR,
                               f"this name server holds its limit of {self.limits.max_brokers} brokers")
        new = 0
        for index, topic in enumerate(reg.topics):
            if index and index % step == 0:
                yield
            new += reg.broker_name not in self._topics.get(topic, ())
        if self._entries + new > self.limits.max_queue_entries:
            raise RouteRefused(ResponseCode.SYSTEM_ERROR,
                               f"registering {new} more topic routes would pass this name server's limit of "
                               f"{self.limits.max_queue_entries}")


def _controller_id(view: ControllerGroup, address: str) -> int | None:
    """The controller's id for an address of the group: the master's if it is the master's address, else
    the newest id registered from it (None: the controller has no such address in the group)."""
    ids = [broker_id for broker_id, held in view.addresses.items() if held == address]
    if not ids:
        return None
    return view.master_id if view.master_id in ids else max(ids)


def check_topics(topics: Mapping[str, TopicConfig], limits: Limits) -> None:
    """Every topic of a registration is a valid name with numbers in range; raises RouteRefused. Pure, so a
    large registration can be checked off the event loop."""
    for name, config in topics.items():
        if TOPIC_PATTERN.fullmatch(name) is None or config.topic_name != name:
            raise RouteRefused(ResponseCode.INVALID_PARAMETER,
                               f"topic {name[:140]!r} is not a valid topic name (1-127 of letters, digits, "
                               "%|_-) or is not the name of its config")
        for what, value, high in (("readQueueNums", config.read_queue_nums, limits.max_queue_nums),
                                  ("writeQueueNums", config.write_queue_nums, limits.max_queue_nums),
                                  ("perm", config.perm, 15), ("topicSysFlag", config.topic_sys_flag, 2**31 - 1)):
            if not 0 <= value <= high:
                raise RouteRefused(ResponseCode.INVALID_PARAMETER,
                                   f"topic {name}: {what} {value} is outside 0..{high}")


def _check_name(value: str, what: str) -> None:
    if not 1 <= len(value) <= 255 or _CONTROL.search(value):
        raise RouteRefused(ResponseCode.INVALID_PARAMETER,
                           f"{what} {value[:60]!r} must be 1-255 characters without spaces or control characters")


def _check_address(value: str, what: str) -> None:
    host, _, port = value.rpartition(":")
    if (not host or len(value) > 255 or _CONTROL.search(value) or _PORT.fullmatch(port) is None
            or not 0 < int(port) < 65536):
        raise RouteRefused(ResponseCode.INVALID_PARAMETER, f"{what} {value[:60]!r} is not a host:port address")
