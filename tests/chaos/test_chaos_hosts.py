"""The short seeded chaos run in hosts mode that CI executes: every node on its own host (network namespaces),
the faults made by the kernel between hosts (partitions of the controllers' leader, of the master from the
controllers and from its slaves, one-way cuts, random loss on replication and controller links) besides
killed and paused processes. The long one: ``python -m tests.chaos --hosts --minutes 10``.

Skipped, with the reason, where network namespaces cannot be created (they can on this project's CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chaos.hosts import NETWORK_FAULT_KINDS
from tests.netns.topology import cleanup_all, unavailable_reason

pytestmark = [pytest.mark.chaos, pytest.mark.netns]

SEED = int(os.environ.get("MQCTL_CHAOS_SEED", "20261126"))
MINUTES = float(os.environ.get("MQCTL_CHAOS_HOSTS_MINUTES", "1.25"))
KINDS = (*NETWORK_FAULT_KINDS, "cut_master_from_controllers", "oneway_master_to_controllers", "kill_master")


def test_short_seeded_run_across_hosts_loses_no_acknowledged_message(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"network namespaces are not available here: {reason}")
    print(f"chaos seed {SEED} in hosts mode; replay with python -m tests.chaos --hosts --seed {SEED} "
          f"--minutes {MINUTES} --faults {','.join(KINDS)}")
    verdict_file = tmp_path / "verdict.json"
    try:
        done = subprocess.run([sys.executable, "-m", "tests.chaos", "--hosts", "--minutes", str(MINUTES), "--seed",
                               str(SEED), "--faults", ",".join(KINDS), "--data-dir", str(tmp_path / "cluster"),
                               "--json", str(verdict_file)], capture_output=True, text=True, timeout=600,
                              check=False)
    finally:
        cleanup_all()  # whatever a killed run left behind
    assert verdict_file.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    verdict = json.loads(verdict_file.read_text())
    print(verdict)
    stats = verdict["stats"]
    assert verdict["mode"] == "hosts" and stats["acknowledged"] > 1000
    assert sum(stats["faults"].values()) >= 4 and set(stats["faults"]) & set(NETWORK_FAULT_KINDS)
    assert verdict["ok"] and stats["lost"] == 0, verdict["violations"]
