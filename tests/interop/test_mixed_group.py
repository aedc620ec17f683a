"""A mixed broker group: one mqctl broker and two of RocketMQ's own Java brokers in one group under mqctl's
controllers, replicating over RocketMQ's HA protocol (``rocketmqHaPeers=true`` on ours: RocketMQ's record
layout, and no proof of identity from a member the controllers hold no key for, from the address they have
for it; docs/security.md, "Mixed broker groups").

tests/interop/failover.py's scenario, with a failover each way: our broker starts first and is master at
epoch 1; the Java brokers join as its slaves (the handshake, the epochs, the transfer and confirmOffset of
RocketMQ's protocol, served by ours) and the set grows to all three; the tier's Java producer sends through
our name servers with every replica acking; our master is SIGKILLed and a Java slave takes over from what
it replicated; our broker, restarted, reconciles its log with the Java master's epochs and replicates from
it (the protocol's slave side, spoken by ours); the Java master is SIGKILLed and ours takes over again;
then a consumer reads every acknowledged message. The first Java master's commitlog (records our broker
wrote, and records RocketMQ's wrote) is read back with our own record checks."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, make_broker
from services.broker.record import ROCKETMQ_MAGIC, Blank, Parsed, check_record
from tests.interop.failover import Record, Scenario
from tests.interop.sides import OurControllers
from tests.rocketmq import SCENARIO_VERSIONS, RocketMQ
from tests.rocketmq.errors import ProcessExited
from tests.rocketmq.fetch import require_java
from tests.rocketmq.javaclients import JavaClients
from tests.rocketmq.jvm import stop_all
from tests.rocketmq.ports import free_block
from tests.rocketmq.servers import BROKER_DEFAULTS, CONTROLLER_DEFAULTS, Broker, Runtime

pytestmark = pytest.mark.timeout(900)

HEARTBEAT_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
SEGMENT = 67108864  # every replica of a group must cut its log into segments of one size
JAVA_BROKER = {**BROKER_DEFAULTS, "controllerHeartBeatTimeoutMills": HEARTBEAT_TIMEOUT_MS,
               "brokerHeartbeatInterval": HEARTBEAT_INTERVAL_MS, "mappedFileSizeCommitLog": SEGMENT}
OUR_BROKER = {"rocketmqHaPeers": "true", "allAckInSyncStateSet": "true", "mappedFileSizeCommitLog": SEGMENT,
              "controllerHeartBeatTimeoutMills": HEARTBEAT_TIMEOUT_MS, "brokerHeartbeatInterval": 500,
              "syncBrokerMetadataPeriod": 500, "checkSyncStateSetPeriod": 1000, "haSendHeartbeatInterval": 1000,
              "totalReplicas": 3, "inSyncReplicas": 2}
OUR_CONTROLLER = {"scanNotActiveBrokerInterval": CONTROLLER_DEFAULTS["scanNotActiveBrokerInterval"],
                  "scanInactiveMasterInterval": CONTROLLER_DEFAULTS["scanInactiveMasterInterval"],
                  "notifyBrokerRoleChanged": "true"}


@dataclass
class MixedBrokers:
    """Index 0: an mqctl broker; 1 and 2: RocketMQ's Java brokers; one group (``broker-a``)."""

    runtime: Runtime
    root: Path
    controllers: str
    namesrv: str
    ours: BrokerNode = field(init=False)
    java: list[Broker] = field(init=False)
    running: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.ours = make_broker(self.root, "broker-a", 0, self.controllers, set(), **OUR_BROKER)
        ports = free_block(0, 2).brokers
        self.java = [Broker(self.runtime, self.root / f"java{i}", "broker-a", port, self.controllers, self.namesrv,
                            JAVA_BROKER) for i, port in enumerate(ports[:2], start=1)]

    def address(self, index: int) -> str:
        return self.ours.address if index == 0 else self.java[index - 1].address

    def start(self, index: int) -> None:
        if index == 0:
            self.ours.start()
        else:
            self.java[index - 1].process.start()
        self.running.add(index)

    def signal(self, index: int, sig: signal.Signals) -> None:
        if index == 0:
            self.ours.kill(sig)
        else:
            self.java[index - 1].process.signal(sig)
            if sig == signal.SIGKILL:
                self.java[index - 1].process.wait_exit(10)
        if sig == signal.SIGKILL:
            self.running.discard(index)

    def check_alive(self) -> None:
        for index in self.running:
            if index == 0 and not self.ours.alive():
                raise ProcessExited(f"broker {self.ours.address} exited; {self.ours.log_file}:\n"
                                    + "\n".join(self.ours.log_file.read_text().splitlines()[-30:]))
            if index > 0:
                self.java[index - 1].process.check_alive()

    def close(self) -> None:
        for broker in self.java:
            broker.process.signal(signal.SIGCONT)
        stop_all([b.process for b in self.java])
        self.ours.kill(signal.SIGCONT)
        self.ours.stop()


@dataclass
class Outcome:
    record: Record
    new_master_log: Path
    #: The client ports of our broker and of the first RocketMQ master: the storeHost of their records.
    ports: tuple[int, int]


def run(root: Path, version: str) -> Outcome:
    runtime = Runtime(require_java(), RocketMQ(version).fetch(), root / "home")
    client = JavaClients(version).build()
    controllers = OurControllers(root / "controllers", OUR_CONTROLLER)
    brokers = MixedBrokers(runtime, root / "brokers", controllers.addresses, controllers.namesrv)
    scenario = Scenario(controllers, brokers, client, root, HEARTBEAT_TIMEOUT_MS / 1000, HEARTBEAT_INTERVAL_MS / 1000)
    try:
        try:
            scenario.start_group()
            scenario.start_producer()
            scenario.fail_master("master SIGKILLed", signal.SIGKILL)
            scenario.acknowledged_after("master SIGKILLed")
            brokers.start(0)
            scenario.rejoin("old master restarted", 0)
            scenario.fail_master("RocketMQ's master SIGKILLed", signal.SIGKILL)
            scenario.acknowledged_after("RocketMQ's master SIGKILLed")
            record = scenario.finish()
        finally:
            if scenario.producer is not None:
                scenario.producer.kill()
            (root / "record.txt").write_text(scenario.record.summary())
        java_master = int(record.milestones[1].master_id or 0) - 1
        ports = (int(brokers.address(0).rsplit(":", 1)[1]), int(brokers.address(java_master).rsplit(":", 1)[1]))
        return Outcome(record, root / "brokers" / f"java{java_master}" / "store" / "commitlog", ports)
    finally:
        brokers.close()
        controllers.close()


@pytest.fixture(scope="module", params=SCENARIO_VERSIONS)
def outcome(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    yield run(tmp_path_factory.mktemp(f"mixed-group-{request.param}"), str(request.param))


def test_a_group_of_both_kinds_fails_over_each_way_without_losing_a_message(outcome: Outcome) -> None:
    steps = {m.step: m for m in outcome.record.milestones}
    assert (steps["started"].master_id, steps["started"].master_epoch) == (1, 1)  # ours, the first started
    assert steps["started"].sync_state_set == (1, 2, 3)
    # ours → RocketMQ's: the lowest id among the equal slaves
    assert (steps["master SIGKILLed"].master_id, steps["master SIGKILLed"].master_epoch) == (2, 2)
    assert steps["master SIGKILLed"].sync_state_set == (2, 3)
    # ours, restarted, replicates from RocketMQ's master (truncating what it held past the failover)
    assert steps["old master restarted"].sync_state_set == (1, 2, 3)
    # RocketMQ's → ours
    assert (steps["RocketMQ's master SIGKILLed"].master_id, steps["RocketMQ's master SIGKILLed"].master_epoch) == (1, 3)
    assert steps["RocketMQ's master SIGKILLed"].sync_state_set == (1, 3)
    assert len(outcome.record.acknowledged) >= 80
    assert not outcome.record.lost, f"acknowledged but not consumed: {sorted(outcome.record.lost)[:20]}"


def test_the_java_masters_log_reads_with_our_record_checks(outcome: Outcome) -> None:
    """Every record of the first RocketMQ master's first segment, up to the zeroes of its preallocated file,
    passes check_record: those it replicated from our broker and those it stored itself (told apart by
    their storeHost's port, bytes 68-72 of a record with an IPv4 born host)."""
    data = (outcome.new_master_log / f"{0:020d}").read_bytes()
    pos, stored_by = 0, []
    while pos + 8 <= len(data) and data[pos:pos + 8] != bytes(8):
        r = check_record(data, pos, pos)
        assert isinstance(r, Parsed), f"offset {pos}: {r}"
        assert not isinstance(r, Blank)
        assert int.from_bytes(data[pos + 4:pos + 8], "big") == ROCKETMQ_MAGIC
        stored_by.append(int.from_bytes(data[pos + 68:pos + 72], "big"))
        pos += r.total
    ours, theirs = outcome.ports
    assert stored_by.count(ours) >= 20 and stored_by.count(theirs) >= 20, (outcome.ports, set(stored_by))
    assert stored_by == sorted(stored_by, key=lambda port: port != ours)  # ours first, then RocketMQ's own
