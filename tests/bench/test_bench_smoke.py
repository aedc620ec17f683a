"""Every benchmark runs once with tiny parameters, so the suite keeps them working (timings are not
asserted: benchmarks report, tests check behaviour)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.common import RESULTS

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("args", [["bench.failover", "--kills", "1"],
                                  ["bench.replicated_writes", "--seconds", "1", "--producers", "1"]])
def test_benchmark_runs(args: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "result:" in done.stdout
    name = "failover_kill" if args[0] == "bench.failover" else "replicated_writes"
    assert json.loads((RESULTS / f"{name}.json").read_text())["benchmark"] == name
