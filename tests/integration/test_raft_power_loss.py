"""A power loss of every controller at once loses no acknowledged write: three real controllers (Raft between
them) acknowledge broker-id applications and registrations, all three are killed with SIGKILL and their Raft
files put back to exactly what they had fsynced (tests/support/powerloss.py), and after a restart every
acknowledged write is there. With pysyncobj's own journal, which never fsyncs, nothing survives such a cut."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqctl.cluster import ControllerCluster
from tests.integration.conftest import FAST_SCANS, register_broker
from tests.support.powerloss import SHADOW_ENV, power_loss

pytestmark = pytest.mark.integration


@pytest.fixture
def shadowed(tmp_path: Path) -> Iterator[ControllerCluster]:
    cluster = ControllerCluster(tmp_path / "cluster", extra=dict(FAST_SCANS), env={SHADOW_ENV: "1"})
    cluster.configure()
    cluster.start()
    try:
        cluster.leader(timeout=60)
        yield cluster
    finally:
        cluster.kill_all()


def test_every_acknowledged_write_survives_a_power_loss_of_every_controller(shadowed: ControllerCluster) -> None:
    acked: list[str] = []
    with shadowed.client() as client:
        for i in range(30):
            register_broker(client, "PowerCluster", f"group-{i}", f"127.0.0.1:{21100 + i}")
            acked.append(f"group-{i}")  # acknowledged: the controller answered SUCCESS
    shadowed.kill_all()
    for node in shadowed.nodes:
        outcome = power_loss(node.store_dir / "raft")
        assert outcome.get("raft.journal") == "kept", outcome
    shadowed.start()
    shadowed.leader(timeout=60)
    with shadowed.client() as client:
        known = {b.brokerName for b in client.sync_state_data(acked).brokers}
    assert known == set(acked)
