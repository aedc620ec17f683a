"""The name server's route table (services/controller/namesrv.py): registration, expiry on a fake clock,
closed connections, the controller's view of the master shown as id 0 (and a failover), cluster info,
the TBW102 route, and what a hostile registration cannot do.

RocketMQ behaviour followed: namesrv/.../routeinfo/RouteInfoManager.java (registerBroker,
unRegisterBroker, pickupTopicRouteData, scanNotActiveBroker) at commit 8fc57f1.
"""

from __future__ import annotations

import pytest

from services.broker.ha.auth import BrokerKey
from services.common.clock import FakeClock
from services.common.codes import ResponseCode
from services.controller.namesrv import (
    AUTO_CREATE_TOPIC,
    DEFAULT_BROKER_TIMEOUT_MS,
    ControllerGroup,
    Limits,
    Proof,
    RegisterResult,
    Registration,
    RouteRefused,
    RouteTable,
    check_topics,
)
from services.remoting.bodies import BrokerData, QueueData
from services.remoting.namesrv_bodies import DataVersion, TopicConfig

CLUSTER, GROUP = "DefaultCluster", "broker-a"
A1, A2, A3 = "127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931"
TBW102 = TopicConfig(AUTO_CREATE_TOPIC, 8, 8, 7)


def topics(*names: str, queues: int = 4) -> dict[str, TopicConfig]:
    return {n: TopicConfig(n, queues, queues, 6) for n in names}


def reg(broker_id: int, address: str, *names: str, group: str = GROUP, cluster: str = CLUSTER,
        version: DataVersion | None = None, channel: object = None, **kwargs: object) -> Registration:
    return Registration(cluster, group, broker_id, address, address.replace(":109", ":209"),
                        {**topics(*names), AUTO_CREATE_TOPIC: TBW102}, version or DataVersion(0, 1, 1),
                        channel=channel, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def table(clock: FakeClock) -> RouteTable:
    return RouteTable(clock.monotonic_ms)


class Controller:
    """A controller view the test sets by hand: group -> (master id, {id: address})."""

    def __init__(self) -> None:
        self.groups: dict[str, ControllerGroup] = {}

    def set(self, master: int | None, addresses: dict[int, str], group: str = GROUP) -> None:
        self.groups[group] = ControllerGroup(CLUSTER, master, addresses)

    def __call__(self, name: str) -> ControllerGroup | None:
        return self.groups.get(name)


def addrs(table: RouteTable, topic: str = "TopicTest") -> dict[int, str]:
    route = table.route(topic)
    assert route is not None
    return dict(route.broker_datas[0].broker_addrs)


# ------------------------------------------------------------------------------ registration, queries


def test_a_group_registers_and_cluster_info_lists_it(table: RouteTable) -> None:
    table.register(reg(0, A1, "TopicTest"))
    table.register(reg(1, A2, "TopicTest"))
    info = table.cluster_info()
    assert info.broker_addr_table == {GROUP: BrokerData(CLUSTER, GROUP, {0: A1, 1: A2})}
    assert info.cluster_addr_table == {CLUSTER: frozenset({GROUP})}


def test_a_route_has_the_masters_queues_and_the_groups_addresses(table: RouteTable) -> None:
    table.register(reg(0, A1, "TopicTest"))
    table.register(Registration(CLUSTER, GROUP, 1, A2, "", topics("TopicTest", "SlaveOnly", queues=9)))
    route = table.route("TopicTest")
    assert route is not None
    assert route.queue_datas == (QueueData(GROUP, 4, 4, 6, 0),)  # a slave's configs do not count
    assert route.broker_datas == (BrokerData(CLUSTER, GROUP, {0: A1, 1: A2}),)
    assert route.filter_server_table == {}
    assert table.route("SlaveOnly") is None
    assert table.route("NoSuchTopic") is None


def test_registrations_merge_topics_and_a_new_version_updates_them(table: RouteTable) -> None:
    table.register(reg(0, A1, "First", version=DataVersion(0, 1, 1)))
    table.register(reg(0, A1, "Second", version=DataVersion(0, 2, 2)))
    assert table.route("First") is not None and table.route("Second") is not None
    table.register(Registration(CLUSTER, GROUP, 0, A1, "", {"First": TopicConfig("First", 2, 2, 4)},
                                DataVersion(0, 3, 3)))
    route = table.route("First")
    assert route is not None and route.queue_datas == (QueueData(GROUP, 2, 2, 4, 0),)


def test_a_slave_learns_its_master_from_the_registration_answer(table: RouteTable) -> None:
    assert table.register(reg(0, A1)) == RegisterResult()
    assert table.register(reg(2, A2)) == RegisterResult(A1, "127.0.0.1:20911")


def test_tbw102_lists_every_group_that_allows_auto_creation(table: RouteTable) -> None:
    table.register(reg(0, A1, group="broker-a"))
    table.register(reg(0, A2, group="broker-b"))
    table.register(Registration(CLUSTER, "broker-c", 0, A3, "", topics("Other")))  # autoCreateTopicEnable=false
    route = table.route(AUTO_CREATE_TOPIC)
    assert route is not None
    assert sorted(str(b.broker_name) for b in route.broker_datas) == ["broker-a", "broker-b"]
    assert {q.perm for q in route.queue_datas} == {7}  # PERM_INHERIT | PERM_READ | PERM_WRITE


def test_one_address_holds_one_id_a_slave_turned_master_comes_back_as_0(table: RouteTable) -> None:
    table.register(reg(0, A1, "TopicTest"))
    table.register(reg(2, A2, "TopicTest"))
    table.unregister(CLUSTER, A1, GROUP)
    table.register(reg(0, A2, "TopicTest", version=DataVersion(2, 5, 5)))
    assert addrs(table) == {0: A2}


def test_a_stale_master_does_not_take_id_0_from_a_newer_one(table: RouteTable) -> None:
    table.register(reg(0, A2, "TopicTest", version=DataVersion(3, 1, 1)))
    assert table.register(reg(0, A1, "TopicTest", version=DataVersion(2, 1, 1))) == RegisterResult()
    assert addrs(table) == {0: A2}
    assert (CLUSTER, GROUP, A1) not in table.live_brokers()
    table.register(reg(0, A1, "TopicTest", version=DataVersion(4, 1, 1)))
    assert addrs(table) == {0: A1}


# ------------------------------------------------------------------------------ forgetting brokers


def test_a_registration_expires_after_120_s_without_a_new_one(table: RouteTable, clock: FakeClock) -> None:
    table.register(reg(0, A1, "TopicTest"))
    table.register(reg(1, A2, "TopicTest"))
    clock.advance(DEFAULT_BROKER_TIMEOUT_MS - 1000)
    table.register(reg(1, A2, "TopicTest"))  # the slave re-registers, the master does not
    clock.advance(1000)
    assert addrs(table) == {0: A1, 1: A2}  # exactly 120 s: not yet
    clock.advance(1)
    assert addrs(table) == {1: A2}
    clock.advance(DEFAULT_BROKER_TIMEOUT_MS)
    assert table.route("TopicTest") is None  # the last member gone takes the group's topics along
    assert table.cluster_info().broker_addr_table == {} and table.cluster_info().cluster_addr_table == {}


def test_a_broker_may_ask_for_its_own_timeout_within_bounds(table: RouteTable, clock: FakeClock) -> None:
    table.register(reg(0, A1, "TopicTest", heartbeat_timeout_ms=5000))
    table.register(reg(1, A2, "TopicTest", heartbeat_timeout_ms=10**12))
    clock.advance(5001)
    assert addrs(table) == {1: A2}
    clock.advance(600_000)
    assert table.route("TopicTest") is None  # ten minutes at most


def test_a_heartbeat_keeps_a_registration_fresh(table: RouteTable, clock: FakeClock) -> None:
    table.register(reg(0, A1, "TopicTest"))
    clock.advance(DEFAULT_BROKER_TIMEOUT_MS)
    table.touch(CLUSTER, A1)
    table.touch(CLUSTER, A3)  # unknown: nothing happens
    clock.advance(DEFAULT_BROKER_TIMEOUT_MS)
    assert addrs(table) == {0: A1}


def test_a_closed_connection_takes_its_registrations_along(table: RouteTable) -> None:
    first, second = object(), object()
    table.register(reg(0, A1, "TopicTest", channel=first))
    table.register(reg(1, A2, "TopicTest", channel=second))
    assert table.on_channel_closed(object()) == 0
    assert table.on_channel_closed(first) == 1
    assert addrs(table) == {1: A2}


def test_unregister_removes_the_address_and_an_empty_group_its_topics(table: RouteTable) -> None:
    table.register(reg(0, A1, "TopicTest"))
    table.register(reg(0, A2, "Other", group="broker-b"))
    assert not table.unregister(CLUSTER, A3, GROUP)
    assert not table.unregister("OtherCluster", A1, GROUP)
    assert table.unregister(CLUSTER, A1, GROUP)
    assert table.route("TopicTest") is None
    route = table.route(AUTO_CREATE_TOPIC)
    assert route is not None and [b.broker_name for b in route.broker_datas] == ["broker-b"]
    assert table.cluster_info().cluster_addr_table == {CLUSTER: frozenset({"broker-b"})}


def test_with_acting_master_a_group_without_master_loses_write_permission(table: RouteTable) -> None:
    table.register(reg(0, A1, "TopicTest", enable_acting_master=True))
    table.register(reg(1, A2, "TopicTest", enable_acting_master=True))
    table.unregister(CLUSTER, A1, GROUP)
    route = table.route("TopicTest")
    assert route is not None and route.queue_datas == (QueueData(GROUP, 4, 4, 4, 0),)


def test_without_a_master_the_lowest_id_registers_topics_only_for_a_new_broker(table: RouteTable) -> None:
    table.register(reg(1, A1, "FromOld"))  # enableActingMaster absent: an old broker, never a prime slave
    assert table.route("FromOld") is None
    table.register(reg(2, A2, "FromNew", enable_acting_master=False))
    assert table.route("FromNew") is None  # not the lowest id
    table.register(reg(1, A1, "FromOld", enable_acting_master=True))
    route = table.route("FromOld")
    assert route is not None and route.queue_datas == (QueueData(GROUP, 4, 4, 4, 0),)  # read only


# ------------------------------------------------------------------------------ the controller's view


def test_the_controllers_master_is_shown_as_0(clock: FakeClock) -> None:
    controller = Controller()
    controller.set(1, {1: A1, 2: A2})
    table = RouteTable(clock.monotonic_ms, controller)
    table.register(reg(1, A1, "TopicTest", enable_acting_master=False))  # not yet re-registered as master
    table.register(reg(2, A2, "TopicTest", enable_acting_master=False))
    assert addrs(table) == {0: A1, 2: A2}
    assert table.register(reg(2, A2, "TopicTest")) == RegisterResult(A1, "127.0.0.1:20911")
    route = table.route("TopicTest")
    assert route is not None and route.queue_datas == (QueueData(GROUP, 4, 4, 6, 0),)  # the master's configs


def test_a_failover_moves_id_0_to_the_new_master_before_it_re_registers(clock: FakeClock) -> None:
    controller = Controller()
    controller.set(1, {1: A1, 2: A2})
    table = RouteTable(clock.monotonic_ms, controller)
    old, new = object(), object()
    table.register(reg(0, A1, "TopicTest", channel=old))
    table.register(reg(2, A2, "TopicTest", channel=new))
    assert addrs(table) == {0: A1, 2: A2}
    table.on_channel_closed(old)  # the master's process is killed
    assert addrs(table) == {2: A2}  # no master until the controller elects one
    controller.set(2, {1: A1, 2: A2})
    assert addrs(table) == {0: A2}
    assert table.cluster_info().broker_addr_table[GROUP].broker_addrs == {0: A2}
    table.register(reg(0, A2, "TopicTest", channel=new, version=DataVersion(2, 9, 9)))  # then it does
    table.register(reg(0, A1, "TopicTest", version=DataVersion(1, 1, 1)))  # the old one comes back, stale:
    assert addrs(table) == {0: A2, 1: A1}  # shown as the slave the controller says it is
    table.register(reg(1, A1, "TopicTest", version=DataVersion(2, 2, 2)))  # and then registers as one
    assert addrs(table) == {0: A2, 1: A1}


def test_an_address_the_controller_does_not_have_for_a_managed_group_is_refused(clock: FakeClock) -> None:
    controller = Controller()
    controller.set(1, {1: A1})
    table = RouteTable(clock.monotonic_ms, controller)
    table.register(reg(0, A1, "TopicTest"))
    for broker_id, version in ((0, DataVersion(2**62, 1, 1)), (7, DataVersion(0, 1, 1))):
        with pytest.raises(RouteRefused, match=f"{A3} is not an address of broker group broker-a") as caught:
            table.register(reg(broker_id, A3, "TopicTest", version=version))
        assert caught.value.code == ResponseCode.NO_PERMISSION
    assert addrs(table) == {0: A1} and addrs(table, AUTO_CREATE_TOPIC) == {0: A1}
    assert (CLUSTER, GROUP, A3) not in table.live_brokers()


def test_a_managed_group_is_in_the_controllers_cluster_only(clock: FakeClock) -> None:
    controller = Controller()
    controller.set(1, {1: A1})
    table = RouteTable(clock.monotonic_ms, controller)
    table.register(reg(0, A1, "TopicTest"))
    with pytest.raises(RouteRefused, match="broker-a belongs to cluster DefaultCluster in the controller's "
                                           "state, not Evil") as caught:
        table.register(reg(0, A1, "TopicTest", cluster="Evil"))
    assert caught.value.code == ResponseCode.NO_PERMISSION
    assert table.cluster_info().cluster_addr_table == {CLUSTER: frozenset({GROUP})}


def test_a_squatter_from_before_the_controller_knew_the_group_is_hidden_then_dropped(clock: FakeClock) -> None:
    controller = Controller()
    table = RouteTable(clock.monotonic_ms, controller)
    table.register(reg(0, A3, "TopicTest", "Squatted", cluster="Evil"))  # nobody manages broker-a yet
    table.register(reg(5, A2, "TopicTest", cluster="Evil"))
    controller.set(1, {1: A1})
    assert table.route("TopicTest") is None  # the group shows no address the controller does not have
    table.register(reg(0, A1, "TopicTest"))  # the real master: accepted, and the squatter dropped
    assert addrs(table) == {0: A1}
    assert table.route("Squatted") is None
    assert table.cluster_info().cluster_addr_table == {CLUSTER: frozenset({GROUP})}
    assert all(address != A3 for _, _, address in table.live_brokers())


def test_a_huge_data_version_does_not_outrank_the_controllers_master(clock: FakeClock) -> None:
    controller = Controller()
    controller.set(1, {1: A1, 2: A2})
    table = RouteTable(clock.monotonic_ms, controller)
    table.register(reg(0, A1, "TopicTest", version=DataVersion(1, 1, 1)))
    table.register(reg(0, A2, "TopicTest", version=DataVersion(2**62, 1, 1)))  # the slave claims id 0, hugely
    assert addrs(table) == {0: A1, 2: A2}
    table.register(reg(0, A1, "TopicTest", "Later", version=DataVersion(1, 2, 2)))  # the master's next one counts
    assert table.route("Later") is not None


def test_a_group_the_controller_does_not_know_is_shown_as_registered(clock: FakeClock) -> None:
    controller = Controller()
    controller.set(1, {1: A1}, group="broker-other")
    table = RouteTable(clock.monotonic_ms, controller)
    table.register(reg(0, A3, "TopicTest"))
    table.register(reg(1, A1, "TopicTest"))
    assert addrs(table) == {0: A3, 1: A1}


# ------------------------------------------------------------------------------ signed registrations

KEY, OTHER_KEY = BrokerKey.generate(), BrokerKey.generate()
NOW = 1_700_000_000_000


def signed(key: BrokerKey, message: bytes = b"registration", at: int = NOW) -> Proof:
    return Proof(key.sign(message).hex(), at, message)


@pytest.fixture
def keyed(clock: FakeClock) -> RouteTable:
    """A table whose controller holds a key for broker 1 (A1) and none for broker 2 (A2, a RocketMQ broker)."""
    controller = Controller()
    controller.groups[GROUP] = ControllerGroup(CLUSTER, 1, {1: A1, 2: A2}, {1: KEY.public_hex})
    return RouteTable(clock.monotonic_ms, controller, wall_ms=lambda: NOW + 5_000)


def test_a_broker_with_a_key_registers_only_with_its_signature(keyed: RouteTable) -> None:
    keyed.register(reg(0, A1, "TopicTest", proof=signed(KEY)))
    keyed.register(reg(2, A2, "TopicTest"))  # no key held for it: the address is enough
    assert addrs(keyed) == {0: A1, 2: A2}


@pytest.mark.parametrize(("proof", "match"), [
    (None, "not signed with it"),
    (signed(OTHER_KEY), "not this broker's"),
    (Proof(signed(KEY).signature, NOW, b"registration, changed"), "not this broker's"),
    (Proof("ab" * 64, NOW, b"registration"), "not this broker's"),
    (signed(KEY, at=NOW - 120_000), "ms from this server's clock"),
])
def test_a_registration_not_proven_by_the_brokers_key_is_refused(keyed: RouteTable, proof: Proof | None,
                                                                  match: str) -> None:
    with pytest.raises(RouteRefused, match=match) as caught:
        keyed.register(reg(0, A1, "TopicTest", proof=proof))
    assert caught.value.code == ResponseCode.NO_PERMISSION
    assert keyed.route("TopicTest") is None


def test_a_signed_registration_is_accepted_once(keyed: RouteTable) -> None:
    proof = signed(KEY)
    keyed.register(reg(0, A1, "TopicTest", proof=proof, channel="broker"))
    with pytest.raises(RouteRefused, match="replay"):
        keyed.register(reg(0, A1, "TopicTest", proof=proof, channel="stranger"))
    assert keyed.unregister(CLUSTER, A1, GROUP, "broker")  # still the broker's own registration


# ------------------------------------------------------------------------------ the connection that registered


def test_only_the_connection_that_registered_can_unregister_or_refresh(table: RouteTable, clock: FakeClock) -> None:
    broker, stranger = object(), object()
    table.register(reg(0, A1, "TopicTest", channel=broker))
    assert not table.unregister(CLUSTER, A1, GROUP, stranger)
    assert addrs(table) == {0: A1}
    clock.advance(DEFAULT_BROKER_TIMEOUT_MS)
    table.touch(CLUSTER, A1, stranger)
    assert table.query_data_version(CLUSTER, A1, stranger) == DataVersion(0, 1, 1)  # read, but not refreshed
    clock.advance(1)
    assert table.route("TopicTest") is None
    table.register(reg(0, A1, "TopicTest", channel=broker))
    clock.advance(DEFAULT_BROKER_TIMEOUT_MS)
    table.touch(CLUSTER, A1, broker)
    clock.advance(DEFAULT_BROKER_TIMEOUT_MS)
    assert table.query_data_version(CLUSTER, A1, broker) is not None
    assert table.unregister(CLUSTER, A1, GROUP, broker)
    assert table.route("TopicTest") is None


# ------------------------------------------------------------------------------ hostile registrations


@pytest.mark.parametrize(("registration", "match"), [
    (Registration(CLUSTER, GROUP, 0, A1, "", topics("bad topic")), "not a valid topic name"),
    (Registration(CLUSTER, GROUP, 0, A1, "", topics("x" * 128)), "not a valid topic name"),
    (Registration(CLUSTER, GROUP, 0, A1, "", {"T": TopicConfig("U")}), "is not the name of its config"),
    (Registration(CLUSTER, GROUP, 0, A1, "", topics("T", queues=4097)), "readQueueNums 4097 is outside 0..4096"),
    (Registration(CLUSTER, GROUP, 0, A1, "", {"T": TopicConfig("T", perm=16)}), "perm 16 is outside 0..15"),
    (Registration(CLUSTER, GROUP, 0, A1, "", {"T": TopicConfig("T", topic_sys_flag=-1)}), "topicSysFlag -1"),
    (Registration(CLUSTER, GROUP, -1, A1, ""), "brokerId -1 is negative"),
    (Registration(CLUSTER, GROUP, 0, "127.0.0.1", ""), "brokerAddr '127.0.0.1' is not a host:port address"),
    (Registration(CLUSTER, GROUP, 0, "h:70000", ""), "not a host:port address"),
    (Registration(CLUSTER, GROUP, 0, A1, "h a:1"), "haServerAddr"),
    (Registration(CLUSTER, "", 0, A1, ""), "brokerName '' must be 1-255 characters"),
    (Registration("a\x00b", GROUP, 0, A1, ""), "clusterName"),
    (Registration(CLUSTER, GROUP, 0, A1, "", zone_name="z" * 256), "zoneName"),
])
def test_a_malformed_registration_is_refused_naming_the_field(table: RouteTable, registration: Registration,
                                                              match: str) -> None:
    with pytest.raises(RouteRefused, match=match) as caught:
        table.register(registration)
    assert caught.value.code == ResponseCode.INVALID_PARAMETER
    assert table.cluster_info().broker_addr_table == {}


def test_a_group_cannot_be_registered_in_a_second_cluster(table: RouteTable) -> None:
    table.register(reg(0, A1, "TopicTest"))
    with pytest.raises(RouteRefused, match="broker-a is registered in cluster DefaultCluster, not Evil"):
        table.register(reg(1, A2, "TopicTest", cluster="Evil"))
    assert table.cluster_info().cluster_addr_table == {CLUSTER: frozenset({GROUP})}


def test_the_table_is_bounded(clock: FakeClock) -> None:
    table = RouteTable(clock.monotonic_ms, limits=Limits(max_brokers=2, max_queue_entries=5))
    table.register(reg(0, A1, "T1"))
    table.register(reg(1, A2, "T2"))
    with pytest.raises(RouteRefused, match="limit of 2 brokers") as caught:
        table.register(reg(2, A3))
    assert caught.value.code == ResponseCode.SYSTEM_ERROR
    table.register(reg(1, A2, "T2"))  # a broker already held may register again
    with pytest.raises(RouteRefused, match="limit of 5"):
        table.register(reg(0, A1, "T1", "T3", "T4", "T5", "T6"))
    table.register(reg(0, A1, "T1", "T3", "T4"))
    assert table.route("T4") is not None


# ------------------------------------------------------------------------------ Java's iteration order


def test_a_routes_groups_come_in_javas_order(table: RouteTable) -> None:
    for address, name in ((A1, "broker-a"), (A2, "B"), (A3, "a")):
        table.register(reg(0, address, "TopicTest", group=name))
    route = table.route("TopicTest")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == ["a", "B", "broker-a"]
    assert [b.broker_name for b in route.broker_datas] == ["a", "B", "broker-a"]


# ------------------------------------------------------------------------- a registration in steps


def test_a_large_registration_is_taken_a_step_at_a_time(table: RouteTable) -> None:
    many = reg(0, A1, *(f"T{i}" for i in range(2500)))
    steps = table.registering(many, step=1000)
    taken = []
    for _ in steps:
        taken.append(sum(1 for t in many.topics if table.route(t) is not None))
    assert taken == [0, 0, 1000, 2000]  # counted in two steps (2501 topics), then taken in three
    assert all(table.route(t) is not None for t in many.topics)


def test_a_broker_dropped_between_steps_takes_no_more_topics(table: RouteTable) -> None:
    channel = object()
    steps = table.registering(reg(0, A1, *(f"T{i}" for i in range(2500)), channel=channel), step=1000)
    for _ in range(3):  # counted, and the first thousand taken
        next(steps)
    table.on_channel_closed(channel)  # its connection closes meanwhile
    with pytest.raises(StopIteration):
        next(steps)
    assert table.route("T0") is None and table.route("T2400") is None
    assert table.live_brokers() == []


def test_topics_checked_off_the_loop_are_not_checked_again(table: RouteTable) -> None:
    bad = Registration(CLUSTER, GROUP, 0, A1, "", {"bad name": TopicConfig("bad name")})
    with pytest.raises(RouteRefused, match="not a valid topic name"):
        check_topics(bad.topics, Limits())
    with pytest.raises(RouteRefused, match="not a valid topic name"):
        table.register(bad)
