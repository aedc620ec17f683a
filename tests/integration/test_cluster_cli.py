"""`mqctl cluster up/status/kill-master/restart/down` for real, leaving no process behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mqctl.cluster import DevCluster, pid_running
from mqctl.cluster.processes import free_port_span
from tests.integration.conftest import poll, run_cli

pytestmark = pytest.mark.integration


def test_cluster_lifecycle_leaves_no_process(tmp_path: Path) -> None:
    data = tmp_path / "dev"
    base = free_port_span(40, step=2)
    pids: list[int] = []
    try:
        up = run_cli("cluster", "up", "--data-dir", str(data), "--base-port", str(base), timeout=180)
        assert up.returncode == 0, up.stdout + up.stderr
        assert "Cluster is up" in up.stdout
        dev = DevCluster.load(data)
        pids = [p for n in dev.nodes if (p := dev.pid(n)) is not None]
        assert len(pids) == 6
        assert (data / "controller-n0" / "controller.conf").read_text().startswith("controllerDLegerGroup=")
        assert "brokerName=broker-a" in (data / "broker-a-2" / "broker.conf").read_text()

        status = run_cli("cluster", "status", "--data-dir", str(data), "--format", "json")
        doc = json.loads(status.stdout)
        roles = {n["name"]: n["role"] for n in doc["nodes"]}
        assert roles["broker-a-1"] == "master" and sorted(roles[f"n{i}"] for i in range(3)).count("leader") == 1
        assert doc["groups"][0]["masterBrokerId"] == 1

        killed = run_cli("cluster", "kill-master", "-b", "broker-a", "--data-dir", str(data))
        assert killed.returncode == 0 and "broker-a-1" in killed.stdout
        poll(lambda: dev.sync_state("broker-a").get("masterBrokerId") in (2, 3), 30, "a new master")
        assert dev.sync_state("broker-a")["masterEpoch"] == 2

        assert run_cli("cluster", "restart", "broker-a-1", "--data-dir", str(data)).returncode == 0
        again = run_cli("cluster", "up", "--data-dir", str(data), timeout=180)  # resumes, waits until healthy
        assert again.returncode == 0, again.stderr
        assert "resuming" in again.stderr
        pids = [p for n in dev.nodes if (p := dev.pid(n)) is not None]

        busy = run_cli("cluster", "up", "--data-dir", str(tmp_path / "other"), "--base-port", str(base))
        assert busy.returncode == 2 and f"port {base}" in busy.stderr and "Traceback" not in busy.stderr
        bad = run_cli("cluster", "restart", "nope", "--data-dir", str(data))
        assert bad.returncode == 2 and "no node 'nope'" in bad.stderr
    finally:
        down = run_cli("cluster", "down", "--data-dir", str(data), timeout=120)
    assert down.returncode == 0, down.stderr
    assert not [p for p in pids if pid_running(p)]
    missing = run_cli("cluster", "status", "--data-dir", str(tmp_path / "none"))
    assert missing.returncode == 2 and "no cluster" in missing.stderr
    assert not os.path.exists(tmp_path / "none")
