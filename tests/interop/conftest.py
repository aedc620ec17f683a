"""A real RocketMQ cluster per version (name server, three DLedger controllers, three controller-mode
brokers of broker-a), shared by every test of the tier and stopped, with nothing left running, once the
tier's last test is done (package scope: the JVMs must not stay up for the rest of a parallel run);
and the answers of real mqadmin and of mqctl to the same questions about it, asked side by side."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from tests.interop import scenario
from tests.interop.admin_sides import Side
from tests.interop.ours import OurCluster
from tests.interop.scenario import Transcript
from tests.rocketmq import VERSIONS, RocketMQCluster, ToolMissing, leftover_pids


@pytest.fixture(scope="package", params=VERSIONS)
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


def mqadmin_ok(cluster: RocketMQCluster, *args: str, within_s: float = 90.0) -> str:
    """Real mqadmin's stdout. It exits 0 even when a command fails, so a stack trace on stderr is a failure;
    such a failure is asked again, after a pause growing from 3 s, until ``within_s`` has passed (three times
    at least), as its 3 s RPC
    timeouts run out when the tier's JVMs share two busy cores (a question is only ever a read, or a write
    that may be repeated)."""
    deadline = time.monotonic() + within_s
    tries = 0
    while True:
        done = cluster.mqadmin(*args)
        tries += 1
        if done.returncode == 0 and "Exception" not in done.stderr:
            return done.stdout
        if tries >= 3 and time.monotonic() >= deadline:
            break
        time.sleep(min(3.0 * tries, 10.0))  # a burst of JVMs starting elsewhere passes meanwhile
    causes = [line for line in done.stderr.splitlines() if "Exception" in line]
    raise AssertionError(f"mqadmin {' '.join(args)} failed {tries} times in {within_s:.0f} s (exit {done.returncode}): "
                         + " | ".join(causes))


def follower(cluster: RocketMQCluster) -> str:
    return next(a for a in cluster.controller_addrs.split(";") if a != cluster.leader())


def slave(cluster: RocketMQCluster) -> str:
    master = cluster.sync_state().master_address
    return next(b.address for b in cluster.brokers if b.address != master)


#: The questions both tools are asked, each as mqadmin's arguments (mqctl gets them plus --format mqadmin).
QUESTIONS: dict[str, Callable[[RocketMQCluster], tuple[str, ...]]] = {
    "getControllerMetaData": lambda c: ("getControllerMetaData", "-a", follower(c)),
    "getSyncStateSet -b": lambda c: ("getSyncStateSet", "-a", c.controller_addrs, "-n", c.namesrv_addr, "-b", c.group),
    "getSyncStateSet -c": lambda c: ("getSyncStateSet", "-a", c.controller_addrs, "-n", c.namesrv_addr,
                                     "-c", "DefaultCluster"),
    "getBrokerEpoch -b": lambda c: ("getBrokerEpoch", "-n", c.namesrv_addr, "-b", c.group),
    "getBrokerEpoch -c": lambda c: ("getBrokerEpoch", "-n", c.namesrv_addr, "-c", "DefaultCluster"),
    "haStatus master": lambda c: ("haStatus", "-n", c.namesrv_addr, "-b", str(c.sync_state().master_address)),
    "haStatus slave": lambda c: ("haStatus", "-n", c.namesrv_addr, "-b", slave(c)),
    "haStatus -c": lambda c: ("haStatus", "-n", c.namesrv_addr, "-c", "DefaultCluster"),
    "getControllerConfig": lambda c: ("getControllerConfig", "-a", c.controller_addrs),
}


@dataclass(frozen=True)
class Answers:
    """What real mqadmin (``theirs``) and mqctl --format mqadmin (``ours``) printed, by question."""

    theirs: dict[str, str]
    ours: dict[str, str]


def ask_both(cluster: RocketMQCluster, args: tuple[str, ...]) -> tuple[str, str]:
    """One question to both tools at once (an mqadmin JVM takes about 5 s to exit after it answers)."""
    with ThreadPoolExecutor(2) as pool:
        theirs = pool.submit(mqadmin_ok, cluster, *args)
        done = mqctl(*args, "--format", "mqadmin")
        assert done.returncode == 0, f"mqctl {args}: {done.stderr}"
        return theirs.result(), done.stdout


@pytest.fixture(scope="package")
def answers(rocketmq: RocketMQCluster) -> Answers:
    """Every question asked of the same steady cluster (its SyncStateSet the same before and after), a few
    at a time: waiting on mqadmin's slow exits one after another would double the tier's time."""
    before = rocketmq.sync_state()
    questions = {name: make(rocketmq) for name, make in QUESTIONS.items()}
    with ThreadPoolExecutor(3) as pool:
        futures = {name: pool.submit(ask_both, rocketmq, args) for name, args in questions.items()}
        results = {name: future.result() for name, future in futures.items()}
    assert rocketmq.sync_state() == before, "the SyncStateSet changed while the tools were asked"
    return Answers({n: r[0] for n, r in results.items()}, {n: r[1] for n, r in results.items()})


# ------------------------------------------------------------------------------ our cluster beside RocketMQ's
# Real mqadmin (of the version under test) against our controllers, name-server role and brokers, laid out
# as RocketMQ's (tests/interop/ours.py); the scripted scenario run on both (tests/interop/scenario.py).


@pytest.fixture(scope="package")
def ours(rocketmq: RocketMQCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OurCluster]:
    cluster = OurCluster(tmp_path_factory.mktemp(f"ours-{rocketmq.version}"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="package")
def sides(rocketmq: RocketMQCluster, ours: OurCluster) -> tuple[Side, Side]:
    """RocketMQ's side and ours, both administered by the mqadmin of the version under test."""
    assert rocketmq.runtime is not None
    theirs = Side("rocketmq", tuple(rocketmq.controller_addrs.split(";")), rocketmq.namesrv_addr, rocketmq.runtime,
                  rocketmq.root / "admin")
    mine = Side("ours", tuple(ours.controller_addrs.split(";")), ours.controller_addrs, rocketmq.runtime,
                ours.root / "admin")
    return theirs, mine


@pytest.fixture(scope="package")
def ours_answers(answers: Answers, sides: tuple[Side, Side]) -> dict[str, str]:
    """What real mqadmin answers to the questions of ``answers``, asked of our steady cluster (after RocketMQ's
    were asked: the scenario below changes both)."""
    mine = sides[1]
    mine.steady()
    questions = {name: make(mine) for name, make in QUESTIONS.items()}
    with ThreadPoolExecutor(3) as pool:
        futures = {name: pool.submit(scenario.mqadmin_output, mine, args, True)
                   for name, args in questions.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.fixture(scope="package")
def transcripts(ours_answers: dict[str, str], sides: tuple[Side, Side]) -> tuple[Transcript, Transcript]:
    """The scenario on both sides at once: RocketMQ's with mqadmin and mqctl, ours with mqadmin alone."""
    theirs, mine = sides
    with ThreadPoolExecutor(2) as pool:
        rocketmq_run = pool.submit(scenario.run, theirs)
        ours_run = pool.submit(scenario.run, mine, scenario.STEPS, False)
        return rocketmq_run.result(), ours_run.result()
