"""A broker process refuses a damaged store at start with one error line naming the damage (the damage is
made by tests/unit/corruption/test_store_corruption.py's helpers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mqctl.cluster.processes import free_port_pair
from tests.unit.corruption.test_store_corruption import (
    SEG,
    damage_a_record,
    damage_epoch_file,
    damage_middle_segment,
    fill,
)

pytestmark = pytest.mark.component


@pytest.mark.parametrize("damage", [damage_middle_segment, damage_a_record, damage_epoch_file])
def test_damaged_store_stops_the_broker_process_with_one_error_line(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "store"
    fill(root, 40)
    (root / "epochFileCheckpoint").write_text("1\n1583951331\n0-0\n")
    expected = damage(root)
    conf = tmp_path / "broker.conf"
    port = free_port_pair()  # free, and below the kernel's ephemeral ports: the failure is the store's
    ports = [port, port + 1]
    conf.write_text(
        f"storePathRootDir={root}\nmappedFileSizeCommitLog={SEG}\nmaxMessageSize=1500\n"
        f"controllerAddr=127.0.0.1:1\nlistenPort={ports[0]}\nhaListenPort={ports[1]}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "services.broker", "-c", str(conf)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode != 0
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and expected in errors[0], proc.stdout + proc.stderr
    assert "unexpected" not in errors[0] and "Traceback" not in proc.stderr
