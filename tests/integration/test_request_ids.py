"""Request ids of writes are distinct across processes too (each process has its own random prefix)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from services.controller.raft import new_request_id

pytestmark = pytest.mark.component


def test_generated_request_ids_are_distinct_across_processes() -> None:
    ids = [new_request_id() for _ in range(100)]
    code = "from services.controller.raft import new_request_id; print(new_request_id())"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           timeout=60).stdout.strip()
    assert other[:16] != ids[0][:16] and other not in ids
