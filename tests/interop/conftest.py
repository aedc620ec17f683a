"""A real RocketMQ cluster per version (name server, three DLedger controllers, three controller-mode
brokers of broker-a), shared by every test of the tier and always stopped, with nothing left running."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.rocketmq import VERSIONS, RocketMQCluster, ToolMissing, leftover_pids


@pytest.fixture(scope="session", params=VERSIONS)
def rocketmq(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQCluster]:
    version: str = request.param
    cluster = RocketMQCluster(tmp_path_factory.mktemp(f"rocketmq-{version}"), version)
    try:
        cluster.start()
    except ToolMissing as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()
        print(f"RocketMQ {version}: " + ", ".join(f"{k} {v:.1f} s" for k, v in cluster.timings.items()))
        left = leftover_pids(cluster.root)
        assert not left, f"processes of RocketMQ {version} outlived the stop: {left}"


def mqctl(*args: str) -> subprocess.CompletedProcess[str]:
    """Our CLI, as an operator runs it (no MQCTL_* variable from the environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    return subprocess.run([sys.executable, "-m", "mqctl", "--timeout", "10", *args], capture_output=True,
                          text=True, timeout=120, env=env, check=False)


def mqadmin_ok(cluster: RocketMQCluster, *args: str) -> str:
    """Real mqadmin's stdout; it exits 0 even when a command fails, so a stack trace on stderr fails too."""
    done = cluster.mqadmin(*args)
    assert done.returncode == 0 and "Exception" not in done.stderr, f"mqadmin {args}: {done.stderr[-3000:]}"
    return done.stdout


def both(cluster: RocketMQCluster, mqadmin_args: tuple[str, ...], mqctl_args: tuple[str, ...]) -> tuple[str, str]:
    """The same question to real mqadmin and to mqctl at once (mqadmin's JVM takes seconds to exit)."""
    with ThreadPoolExecutor(2) as pool:
        theirs = pool.submit(mqadmin_ok, cluster, *mqadmin_args)
        ours = pool.submit(mqctl, *mqctl_args)
        done = ours.result()
        assert done.returncode == 0, done.stderr
        return theirs.result(), done.stdout
