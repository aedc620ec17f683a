"""The short, seeded chaos run that CI executes (the long one: ``python -m tests.chaos --minutes 10``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos.checker import check
from tests.chaos.harness import FAULT_KINDS, ChaosRun
from tests.interop.test_java_clients import kit_or_skip
from tests.rocketmq import PINNED
from tests.rocketmq.javaclients import JavaClients

pytestmark = pytest.mark.chaos

SEED = int(os.environ.get("MQCTL_CHAOS_SEED", "20261121"))
SECONDS = float(os.environ.get("MQCTL_CHAOS_SECONDS", "60"))


@pytest.mark.parametrize("protocol", ["http", "remoting"])
def test_short_seeded_chaos_run_loses_no_acknowledged_message(tmp_path: Path, protocol: str) -> None:
    """Brokers that talk to the controllers over HTTP, and over RocketMQ's remoting protocol; with the latter,
    RocketMQ's Java clients are in the workload too (orderly, failing, delayed and transactional)."""
    java = kit_or_skip(lambda: JavaClients(PINNED).build()) if protocol == "remoting" else None
    print(f"chaos seed {SEED} ({SECONDS:.0f}s, brokers to controllers over {protocol}); replay with "
          f"MQCTL_CHAOS_SEED={SEED} python -m tests.chaos --seed {SEED} --controller-protocol {protocol}"
          + (" --java-clients" if java else ""))
    run = ChaosRun(tmp_path / "chaos", SEED, SECONDS, kinds=FAULT_KINDS, fault_gap_s=(3.0, 6.0),
                   controller_protocol=protocol, java=java)
    try:
        run.start()
        history = run.run()
        assert run.cluster is not None
        run.heal(timeout=120)
        run.drain_java()
        verdict = check(run.cluster, history, run.workload)
    finally:
        run.stop()
    print(verdict.stats)
    assert verdict.stats["acknowledged"] > 1000
    assert len(history.faults) >= 5
    assert verdict.ok, {k: v for k, v in verdict.violations.items() if v}
    if java is not None:  # every kind of Java client sent and had acknowledgements through the faults
        clients = verdict.stats["java"]
        assert all(clients[name]["acknowledged"] > 0 for name in ("orderly-producer", "delayed-producer",
                                                                   "poison-producer", "transaction-producer")), clients
        assert clients["dlq-consumer"]["consumed"] > 0, clients
