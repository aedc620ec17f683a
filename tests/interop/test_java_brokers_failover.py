"""RocketMQ's own Java brokers under mqctl's controllers, and the same scenario under RocketMQ's controllers
(tests/interop/failover.py): three brokers in controller mode get ids, a master and a full SyncStateSet;
the tier's Java producer (DefaultMQProducer, the brokers with allAckInSyncStateSet=true) sends through the name
servers; the master is SIGKILLed, then SIGSTOPped, and the controller leader SIGKILLed; a consumer then
reads every acknowledged message. Both runs must show the same masters, master epochs and SyncStateSets.

Where the two kinds of controllers follow different rules, the scenario's outcome does not change, and the
run shows it: mqctl refuses a group's first election to a broker it has no heartbeat from
(docs/compatibility.md, "Controller state machine", first row), and RocketMQ's broker asks for it before
its first heartbeat reaches the controllers, so under mqctl the first master takes its role at the
broker's next try, 5 s later; the master, its epoch and the set are the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.failover import Record, Scenario
from tests.interop.sides import JavaBrokers, OurControllers, TheirControllers
from tests.rocketmq import SCENARIO_VERSIONS, RocketMQ
from tests.rocketmq.fetch import require_java
from tests.rocketmq.javaclients import JavaClients
from tests.rocketmq.servers import BROKER_DEFAULTS, CONTROLLER_DEFAULTS, Runtime

pytestmark = pytest.mark.timeout(900)

#: A heartbeat timeout RocketMQ's brokers keep on two busy cores (3 s made them churn, docs/operations.md).
HEARTBEAT_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
JAVA_BROKER = {**BROKER_DEFAULTS, "controllerHeartBeatTimeoutMills": HEARTBEAT_TIMEOUT_MS,
               "brokerHeartbeatInterval": HEARTBEAT_INTERVAL_MS}
#: Our controllers scan as often as the kit's RocketMQ controllers do, and notify the brokers.
OUR_CONTROLLER = {"scanNotActiveBrokerInterval": CONTROLLER_DEFAULTS["scanNotActiveBrokerInterval"],
                  "scanInactiveMasterInterval": CONTROLLER_DEFAULTS["scanInactiveMasterInterval"],
                  "notifyBrokerRoleChanged": "true"}


def run(root: Path, version: str, ours: bool) -> Record:
    runtime = Runtime(require_java(), RocketMQ(version).fetch(), root / "home")
    client = JavaClients(version).build()
    controllers = (OurControllers(root / "controllers", OUR_CONTROLLER) if ours
                   else TheirControllers(runtime, root / "rocketmq", CONTROLLER_DEFAULTS))
    brokers = JavaBrokers(runtime, root / "brokers", controllers.addresses, controllers.namesrv, JAVA_BROKER)
    try:
        scenario = Scenario(controllers, brokers, client, root, HEARTBEAT_TIMEOUT_MS / 1000,
                            HEARTBEAT_INTERVAL_MS / 1000, all_back_after_sigstop=ours)
        record = scenario.run()
    finally:
        brokers.close()
        controllers.close()
    print(f"{'mqctl' if ours else 'RocketMQ'} controllers, RocketMQ {version} brokers: "
          + "; ".join(f"{k} {v:.0f} s" for k, v in record.timings.items()))
    return record


@pytest.fixture(scope="module", params=SCENARIO_VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    """The RocketMQ version of the Java brokers, the client and (in the second run) the controllers."""
    return str(request.param)


@pytest.fixture(scope="module")
def under_ours(tmp_path_factory: pytest.TempPathFactory, version: str) -> Iterator[Record]:
    yield run(tmp_path_factory.mktemp(f"java-{version}-under-mqctl"), version, ours=True)


@pytest.fixture(scope="module")
def under_theirs(tmp_path_factory: pytest.TempPathFactory, version: str) -> Iterator[Record]:
    yield run(tmp_path_factory.mktemp(f"java-{version}-under-rocketmq"), version, ours=False)


def check_no_loss(record: Record) -> None:
    assert len(record.acknowledged) >= 100, record.produced.not_acknowledged[-5:]
    assert not record.lost, f"acknowledged but not consumed: {sorted(record.lost)[:20]}"


def test_java_brokers_fail_over_under_our_controllers(under_ours: Record) -> None:
    steps = {m.step: m for m in under_ours.milestones}
    assert (steps["started"].master_id, steps["started"].master_epoch) == (1, 1)
    assert steps["started"].sync_state_set == (1, 2, 3)
    assert steps["master SIGKILLed"].master_id in (2, 3) and steps["master SIGKILLed"].master_epoch == 2
    assert steps["old master restarted"].sync_state_set == (1, 2, 3)
    assert steps["master SIGSTOPped"].master_epoch == 3
    assert steps["stopped master continued"].sync_state_set == (1, 2, 3)
    assert steps["controller leader killed"].master_epoch == 3
    check_no_loss(under_ours)


def test_the_same_scenario_under_rocketmq_controllers(under_theirs: Record) -> None:
    steps = {m.step: m for m in under_theirs.milestones}
    stopped = int(steps["old master restarted"].master_id or 0)
    assert stopped in steps["stopped master continued"].sync_state_set
    check_no_loss(under_theirs)


def test_the_same_masters_epochs_and_sync_state_sets(under_ours: Record, under_theirs: Record) -> None:
    """Every step's master and master epoch, and the SyncStateSet and its epoch up to the SIGSTOP. After
    it the set depends on the name server's rule for the master it names a re-registering slave:
    RocketMQ's answers the address registered as id 0 (which can still be the stopped master's), mqctl's
    controllers the master they elected (failover.py, SIGSTOP_STEADY; docs/compatibility.md, "Mixed
    clusters"), so under mqctl's controllers every replica is back in the set."""
    ours = [m.steady() for m in under_ours.milestones]
    assert ours == [m.steady() for m in under_theirs.milestones], (under_ours.timeline, under_theirs.timeline)
    assert [m.sync_state_set_epoch for m in under_ours.milestones[:3]] == [3, 5, 6]
