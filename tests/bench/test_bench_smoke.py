"""Every benchmark runs once with tiny parameters, so the suite keeps them working (timings are not
asserted: benchmarks report, tests check behaviour)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench


CASES = [
    pytest.param("failover_kill", ["bench.failover", "--kills", "1"], id="failover"),
    pytest.param("replicated_writes", ["bench.replicated_writes", "--seconds", "1", "--producers", "1"],
                 id="replicated_writes"),
    pytest.param("controller_writes", ["bench.controller_writes", "--seconds", "1", "--clients", "2"],
                 id="controller_writes"),
    pytest.param("controller_failover", ["bench.controller_failover", "--kills", "1"], id="controller_failover"),
    pytest.param("append_stall", ["bench.append_stall", "--seconds", "0.6", "--rounds", "2"], id="append_stall"),
    pytest.param("restart", ["bench.restart", "--broker-mib", "70", "--controller-events", "300"], id="restart"),
    pytest.param("false_failover", ["bench.false_failover", "--minutes", "0.05", "--producers", "1"],
                 id="false_failover"),
    pytest.param("remoting_sends", ["bench.remoting_sends", "--seconds", "1", "--rounds", "1", "--warmup", "0.2",
                                    "--connections", "1", "--in-flight", "8"], id="remoting_sends"),
    pytest.param("heartbeat_soak", ["bench.heartbeat_soak", "--brokers", "12", "--minutes", "0.1"],
                 id="heartbeat_soak"),
    pytest.param("frame_parse", ["bench.frame_parse", "--scale", "0.02"], id="frame_parse"),
    pytest.param("vs_rocketmq_sends_async_2r_async_flush",
                 ["bench.vs_rocketmq", "--seconds", "2", "--rounds", "2", "--warmup", "1", "--mode", "async",
                  "--window", "16", "--replicas", "2"], id="vs_rocketmq", marks=pytest.mark.rocketmq),
    pytest.param("vs_rocketmq_failover_kill",
                 ["bench.vs_rocketmq_failover", "--kills", "1", "--controllers", "1", "--replicas", "2",
                  "--threads", "2"], id="vs_rocketmq_failover", marks=pytest.mark.rocketmq),
    pytest.param("vs_rocketmq_controller_failover", ["bench.vs_rocketmq_controller_failover", "--kills", "1"],
                 id="vs_rocketmq_controller_failover", marks=pytest.mark.rocketmq),
    pytest.param("vs_rocketmq_consume",
                 ["bench.vs_rocketmq_consume", "--messages", "3000", "--queues", "2", "--threads", "2",
                  "--fill-slice", "1", "--latency-seconds", "1", "--rounds", "1"], id="vs_rocketmq_consume",
                 marks=pytest.mark.rocketmq),
    pytest.param("vs_rocketmq_controller_load",
                 ["bench.vs_rocketmq_controller_load", "--brokers", "6", "--controllers", "1", "--alter-rounds", "2",
                  "--soak", "1"], id="vs_rocketmq_controller_load", marks=pytest.mark.rocketmq),
    pytest.param("vs_rocketmq_restart",
                 ["bench.vs_rocketmq_restart", "--broker-mib", "1", "--controller-events", "50", "--restarts", "1",
                  "--fill-slice", "1"],
                 id="vs_rocketmq_restart", marks=pytest.mark.rocketmq),
    pytest.param("vs_rocketmq_footprint_load",
                 ["bench.vs_rocketmq_footprint", "--settle", "1", "--seconds", "1", "--timer", "off", "--controllers",
                  "1", "--replicas", "1", "--rate", "200"], id="vs_rocketmq_footprint", marks=pytest.mark.rocketmq),
    pytest.param("report_vs_duckdb", ["bench.report_vs_duckdb", "--events", "20000", "--groups", "20", "--runs", "1"],
                 id="report_vs_duckdb", marks=pytest.mark.spark),
]


@pytest.mark.parametrize("name,args", CASES)
def test_benchmark_runs(name: str, args: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "MQCTL_BENCH_RESULTS": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=300, check=False,
                          env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "result:" in done.stdout
    assert json.loads((tmp_path / f"{name}.json").read_text())["benchmark"] == name


@pytest.mark.spark
def test_report_scale_runs(tmp_path: Path) -> None:
    """bench/report_scale.py (a script: the whole report on a generated dataset, time and peak memory)."""
    script = Path(__file__).resolve().parents[2] / "bench" / "report_scale.py"
    done = subprocess.run([sys.executable, str(script), "--events", "20000", "--groups", "20", "--dir",
                           str(tmp_path / "dataset")], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout[done.stdout.rindex("\n{") + 1:])
    assert result["events"] == 20000 and result["groups"] == 20


def test_plot_draws_the_failover_results(tmp_path: Path) -> None:
    kill = {"benchmark": "failover_kill", "kills": [
        {"detectAndElectMs": 10, "roleChangeMs": 20, "clientRecoveryMs": 30, "totalMs": 60},
        {"detectAndElectMs": 12, "roleChangeMs": 25, "clientRecoveryMs": 40, "totalMs": 77}]}
    (tmp_path / "failover_kill.json").write_text(json.dumps(kill))
    out = tmp_path / "failover.png"
    env = {**os.environ, "MQCTL_BENCH_RESULTS": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "bench.plot", "--out", str(out)], capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_draws_the_comparison_with_rocketmq(tmp_path: Path) -> None:
    sends = {"benchmark": "vs_rocketmq_sends_sync_1r_async_flush", "mode": "sync", "threads": 8, "replicas": 1,
             "flush": "ASYNC_FLUSH", "ratios_ours_over_rocketmq": {"msgs_per_s": 0.82, "server_rss_mib": 0.17}}
    failover = {"benchmark": "vs_rocketmq_failover_kill", "ratios_ours_over_rocketmq": {"p50_ms": 0.4}}
    (tmp_path / "vs_rocketmq_sends_sync_1r_async_flush.json").write_text(json.dumps(sends))
    (tmp_path / "vs_rocketmq_failover_kill.json").write_text(json.dumps(failover))
    out = tmp_path / "vs.png"
    env = {**os.environ, "MQCTL_BENCH_RESULTS": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "bench.plot_vs_rocketmq", "--out", str(out)], capture_output=True,
                          text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
