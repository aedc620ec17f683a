"""mqctl's brokers under RocketMQ's own controllers and name server (tests/interop/failover.py's scenario):
three brokers with ``controllerProtocol=remoting`` register with the DLedger controllers (1012, 1013, 1003),
heartbeat (904), elect a master and expand the SyncStateSet (1001), and register with RocketMQ's name
server (103, ``namesrvAddr``); the tier's Java producer sends through it with every replica acking; the master is
SIGKILLed, then SIGSTOPped, and the controller leader SIGKILLed; no acknowledged message is lost.

RocketMQ's controllers hold no broker keys (mqctl's 88001 is not served there), so the brokers prove their
ids on the replication port with the group's key derived from ``authToken`` (``brokerKeySource=authToken``,
docs/compatibility.md, "Replication"). With ``authToken`` set, an unsigned role notification (RocketMQ's
1008) is not taken even as a hint: the brokers learn each role change from their next pull of the replica
info, every ``syncBrokerMetadataPeriod``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.failover import Record, Scenario
from tests.interop.sides import OurBrokers, TheirControllers
from tests.rocketmq import SCENARIO_VERSIONS, RocketMQ
from tests.rocketmq.fetch import require_java
from tests.rocketmq.javaclients import JavaClients
from tests.rocketmq.servers import CONTROLLER_DEFAULTS, Runtime

pytestmark = pytest.mark.timeout(900)

HEARTBEAT_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
OUR_BROKER = {"controllerProtocol": "remoting", "authToken": "interop-t0ken", "brokerKeySource": "authToken",
              "allAckInSyncStateSet": "true", "controllerHeartBeatTimeoutMills": HEARTBEAT_TIMEOUT_MS,
              "brokerHeartbeatInterval": HEARTBEAT_INTERVAL_MS, "syncBrokerMetadataPeriod": 500,
              "checkSyncStateSetPeriod": 1000, "flushIntervalCommitLog": 100}


def run(root: Path, version: str) -> Record:
    runtime = Runtime(require_java(), RocketMQ(version).fetch(), root / "home")
    client = JavaClients(version).build()
    controllers = TheirControllers(runtime, root / "rocketmq", CONTROLLER_DEFAULTS)
    brokers = OurBrokers(root / "brokers", controllers.addresses, {**OUR_BROKER, "namesrvAddr": controllers.namesrv})
    try:
        record = Scenario(controllers, brokers, client, root, HEARTBEAT_TIMEOUT_MS / 1000,
                          HEARTBEAT_INTERVAL_MS / 1000).run()
    finally:
        brokers.close()
        controllers.close()
    print(f"mqctl brokers under RocketMQ {version} controllers: "
          + "; ".join(f"{k} {v:.0f} s" for k, v in record.timings.items()))
    return record


@pytest.fixture(scope="module", params=SCENARIO_VERSIONS)
def record(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Record]:
    yield run(tmp_path_factory.mktemp(f"mqctl-under-rocketmq-{request.param}"), request.param)


def test_our_brokers_fail_over_under_rocketmq_controllers(record: Record) -> None:
    steps = {m.step: m for m in record.milestones}
    assert (steps["started"].master_id, steps["started"].master_epoch) == (1, 1)
    assert steps["started"].sync_state_set == (1, 2, 3)
    assert steps["master SIGKILLed"].master_epoch == 2
    assert steps["old master restarted"].sync_state_set == (1, 2, 3)
    assert steps["stopped master continued"].sync_state_set == (1, 2, 3)
    assert len(record.acknowledged) >= 100
    assert not record.lost, f"acknowledged but not consumed: {sorted(record.lost)[:20]}"
