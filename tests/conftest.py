"""Settings for the whole suite: the tiers, the default run, ports per worker, and the times on record.

Every test belongs to exactly one tier, named by what it starts:

* ``unit``: nothing (no process, no socket beyond an in-memory one): ``tests/unit``, ``tests/property``;
* ``component``: one process, or real sockets on loopback: files of ``tests/integration`` marked so;
* ``integration``: clusters of real processes: the rest of ``tests/integration``;
* ``slow``: chaos runs, hosts in network namespaces, Spark, the browser, the wheel install, the
  benchmarks' smoke runs, the fuzzers and RocketMQ's own servers; each such test also carries the marker
  of what it starts (``chaos``, ``netns``, ``spark``, ``browser``, ``wheel``, ``bench``, ``fuzz``,
  ``rocketmq``), by its folder or its own marker.

``python3 -m pytest`` runs the default set: unit, component, and the integration tests marked ``smoke``
(a real 3-controller group and a replicated broker group, failed over). ``python3 -m pytest --full`` runs
every tier. Naming tests yourself (paths, ``-m`` or ``-k``) runs what you named, whatever its tier.
"""

from __future__ import annotations

import os
import resource
import time
from collections import Counter
from collections.abc import Generator
from pathlib import Path

import pytest
from _pytest.config import ExitCode

import tests.support.examples  # noqa: F401  (chooses the Hypothesis profile: quick, or thorough under CI)
from tests.rocketmq import SECOND

# The report's class archive (spark_reports.cds) is written after a JVM exits and checked by a detached
# process, which would outlive the test that started the JVM. Off by default here; the tests of the
# archive turn it on with their own cache directory and wait for that process to finish.
os.environ.setdefault("MQCTL_SPARK_CDS", "0")

TIERS = ("unit", "component", "integration", "slow")
#: What a slow test starts: each slow test carries at least one of these.
SLOW_KINDS = ("chaos", "netns", "spark", "browser", "wheel", "bench", "fuzz", "rocketmq")
#: The tier (and, for slow folders, the kind) of a folder's tests unless a test says otherwise.
FOLDER_TIERS = {"unit": ("unit",), "property": ("unit",), "integration": ("integration",),
                "chaos": ("slow", "chaos"), "netns": ("slow", "netns"), "spark": ("slow", "spark"),
                "browser": ("slow", "browser"), "bench": ("slow", "bench"), "fuzz": ("slow", "fuzz"),
                "interop": ("slow", "rocketmq")}
#: Tests that share an expensive session or module fixture run on one worker (pytest-xdist's loadgroup):
#: a SparkSession, a Spark standalone cluster, the rocketmq tier's shared clusters (the admin tests). The
#: tier's scenarios start clusters of their own, so they run beside the admin tests: the Java clients'
#: failover on one worker, the other scenarios (mixed clusters, the consumers' life cycle, retries,
#: transactions, deleteTopic) one after the other on another. By folder, or by file. The admin tests of the second
#: RocketMQ version (SECOND_LEG) run after the Java clients' failover on its worker (the shortest of the
#: three: about 5 minutes of a full run, against 10-14 for the others): each version's shared cluster on
#: a worker of its own, and never more than three JVM clusters at once on two cores.
SHARED_FIXTURE_GROUPS = {"spark": "spark", "interop": "rocketmq", "integration/test_report.py": "spark-standalone",
                         "interop/test_java_clients.py": "rocketmq-java",
                         **{f"interop/test_{name}.py": "rocketmq-scenarios" for name in (
                             "java_brokers_failover", "our_brokers_under_rocketmq", "java_lifecycle", "java_retries",
                             "java_transactions", "mixed_group", "mqadmin_topic_delete")}}
SECOND_LEG = ("rocketmq", "rocketmq-java")
#: The benchmarks side by side with RocketMQ each start a cluster of both: one after the other, on one worker.
BENCH_SIDE_BY_SIDE = "rocketmq-bench"
#: Where each run writes its times (git-ignored).
TIMES_DIR = Path(__file__).resolve().parent.parent / ".test-times"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true",
                     help="run every tier (without it: unit, component and the integration smoke set)")


def pytest_configure(config: pytest.Config) -> None:
    _ports_for_this_worker()


def _ports_for_this_worker() -> None:
    """Parallel workers pick the ports of their clusters from slices of their own (mqctl/cluster reads
    MQCTL_PORT_RANGE), so two workers never choose the same free port at once."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count < 2 or "MQCTL_PORT_RANGE" in os.environ:
        return
    from mqctl.cluster.processes import ephemeral_port_start

    low, high = 10_000, max(ephemeral_port_start() - 2, 12_000)
    width = (high - low) // count
    start = low + int(worker[2:]) * width
    os.environ["MQCTL_PORT_RANGE"] = f"{start}-{start + width - 1}"


# ------------------------------------------------------------------------------ tiers
def tier_of(item: pytest.Item, folder: str) -> str:
    """The one tier of a test: slow if it carries a slow kind, else its own tier marker, else its folder's."""
    own = {m.name for m in item.iter_markers() if m.name in TIERS}
    if any(m.name in SLOW_KINDS for m in item.iter_markers()):
        own.add("slow")
    if len(own) > 1:
        raise pytest.UsageError(f"{item.nodeid} is marked with several tiers: {sorted(own)} (a marker of what "
                                f"a slow test starts, {', '.join(SLOW_KINDS)}, puts it in the slow tier)")
    return next(iter(own)) if own else FOLDER_TIERS.get(folder, ("unit",))[0]


@pytest.hookimpl(tryfirst=True)  # before -m selects and before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test its tier marker (and a slow one its kind), refuse a unit test that claims to start
    something, then keep the default set unless the run is --full or names its tests."""
    root = config.rootpath / "tests"
    for item in items:
        try:
            parts = item.path.relative_to(root).parts
        except ValueError:
            continue
        folder = parts[0]
        group = SHARED_FIXTURE_GROUPS.get("/".join(parts)) or SHARED_FIXTURE_GROUPS.get(folder)
        if folder == "bench" and item.get_closest_marker("rocketmq") is not None:
            group = BENCH_SIDE_BY_SIDE
        if group == SECOND_LEG[0] and _rocketmq_version(item) == SECOND:
            group = SECOND_LEG[1]
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        tier = tier_of(item, folder)
        if folder in ("unit", "property") and tier != "unit":
            raise pytest.UsageError(f"{item.nodeid} is marked as starting processes or a JVM but lives in "
                                    f"tests/{folder}, whose tests start nothing: move it")
        item.add_marker(tier)
        if tier == "slow" and not any(item.get_closest_marker(k) for k in SLOW_KINDS):
            kind = FOLDER_TIERS.get(folder, ("", ""))[-1]
            if kind not in SLOW_KINDS:
                raise pytest.UsageError(f"{item.nodeid} is slow but says not what it starts: mark it with one "
                                        f"of {', '.join(SLOW_KINDS)}")
            item.add_marker(kind)
        # for the times on record (a report carries it across workers): the tier, and a slow test's kind
        kinds = [k for k in SLOW_KINDS if item.get_closest_marker(k)] if tier == "slow" else []
        item.user_properties.append(("tier", f"slow:{kinds[0]}" if kinds else tier))
    # The tests on RocketMQ's shared clusters last (a stable sort): a shared cluster, kept up until its package
    # ends, then starts only once the scenarios on its worker are done.
    items.sort(key=lambda i: _rocketmq_version(i) is not None)
    if not _chosen_by_hand(config):
        keep = [i for i in items if _in_default_set(i)]
        config.hook.pytest_deselected(items=[i for i in items if not _in_default_set(i)])
        items[:] = keep


def _rocketmq_version(item: pytest.Item) -> str | None:
    """The RocketMQ version of the shared cluster a test uses (the ``rocketmq`` fixture's parameter)."""
    callspec = getattr(item, "callspec", None)
    version = callspec.params.get("rocketmq") if callspec is not None else None
    return version if isinstance(version, str) else None


def _chosen_by_hand(config: pytest.Config) -> bool:
    explicit_paths = config.args_source == pytest.Config.ArgsSource.ARGS
    return bool(config.getoption("--full") or config.option.markexpr or config.option.keyword or explicit_paths)


def _in_default_set(item: pytest.Item) -> bool:
    tier = next(m.name for m in item.iter_markers() if m.name in TIERS)
    return tier in ("unit", "component") or (tier == "integration" and item.get_closest_marker("smoke") is not None)


# ------------------------------------------------------------------------------ times on record
class Times:
    """Each test's time (setup, call and teardown) by tier, gathered where the reports arrive (the
    controlling process under xdist)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.wall_started = time.time()  # the origin of the tests' start and stop times (wall clock)
        self.machine_started = machine_cpu()
        self.tests: Counter[str] = Counter()
        self.cpu: dict[str, float] = {}
        self.tier: dict[str, str] = {}
        self.worker: dict[str, str] = {}
        self.span: dict[str, tuple[float, float]] = {}  # first start and last stop, wall clock

    def add(self, report: pytest.TestReport) -> None:
        self.tests[report.nodeid] += report.duration
        node = getattr(report, "node", None)
        self.worker[report.nodeid] = str(getattr(getattr(node, "gateway", None), "id", "") or "main")
        first, _ = self.span.get(report.nodeid, (report.start, report.stop))
        self.span[report.nodeid] = (first, report.stop)
        spent = sum(v for k, v in report.user_properties if k == "cpu" and isinstance(v, (int, float)))
        self.cpu[report.nodeid] = self.cpu.get(report.nodeid, 0.0) + spent
        self.tier[report.nodeid] = next((str(v) for k, v in report.user_properties if k == "tier"), "unknown")

    def lines(self, slowest: int = 20) -> list[str]:
        totals: Counter[str] = Counter()
        counts: Counter[str] = Counter()
        for nodeid, seconds in self.tests.items():
            totals[self.tier[nodeid]] += seconds
            counts[self.tier[nodeid]] += 1
        wall = time.monotonic() - self.started
        labels = (*TIERS[:-1], *(f"slow:{k}" for k in SLOW_KINDS), "unknown")
        summary = ", ".join(f"{t} {counts[t]} tests {totals[t]:.0f} s" for t in labels if counts[t])
        out = [f"test times: wall {wall:.0f} s; by tier (test seconds, summed over workers): {summary}",
               (f"CPU: {busy_share(self.machine_started, machine_cpu()):.0%} of the machine's cores busy over the "
                f"run; {sum(self.cpu.values()):.0f} CPU seconds counted in the tests and the processes they started "
                f"and waited for"),
               f"the {slowest} slowest:"]
        out += [f"  {seconds:7.1f} s  {self.tier[n]:<14} {n}" for n, seconds in self.tests.most_common(slowest)]
        out.append("each worker: " + "; ".join(self._workers()))
        return out

    def _workers(self) -> list[str]:
        """Each worker's tests, busy seconds and when its last test ended (seconds from the run's start):
        which worker's share of the tests sets the wall time."""
        busy: Counter[str] = Counter()
        counts: Counter[str] = Counter()
        ended: dict[str, float] = {}
        for nodeid, seconds in self.tests.items():
            worker = self.worker.get(nodeid, "main")
            busy[worker] += seconds
            counts[worker] += 1
            ended[worker] = max(ended.get(worker, 0.0), self.span.get(nodeid, (0.0, self.wall_started))[1] - self.wall_started)
        return [f"{w} {counts[w]} tests, busy {busy[w]:.0f} s, done at {ended[w]:.0f} s" for w in sorted(counts)]

    def write(self) -> None:
        TIMES_DIR.mkdir(exist_ok=True)
        (TIMES_DIR / "summary.txt").write_text("\n".join(self.lines()) + "\n")
        (TIMES_DIR / "durations.txt").write_text("".join(
            f"{seconds:.3f}\t{self.cpu.get(n, 0.0):.3f}\t{self.tier[n]}\t{self.worker.get(n, 'main')}\t"
            f"{self.span.get(n, (self.wall_started, 0.0))[0] - self.wall_started:.1f}\t{n}\n"
            for n, seconds in self.tests.most_common()))


def machine_cpu() -> tuple[int, int]:
    """The machine's busy and total CPU ticks since boot (/proc/stat's first line), or zeros off Linux."""
    try:
        fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
    return sum(fields) - idle, sum(fields)


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def _cpu_seconds() -> float:
    """CPU time of this process and of the children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


_last_cpu = _cpu_seconds()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Each phase's report carries the CPU spent since the last one (in the worker that ran it), so a test's
    own processes count towards it once reaped (a shared fixture's, towards the test whose end stops it)."""
    global _last_cpu
    report = yield
    now = _cpu_seconds()
    report.user_properties.append(("cpu", round(now - _last_cpu, 3)))
    _last_cpu = now
    return report


_TIMES = Times()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _TIMES.add(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: ExitCode,
                            config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not _TIMES.tests:
        return
    try:
        _TIMES.write()
    except OSError as exc:
        terminalreporter.write_line(f"test times not written to {TIMES_DIR}: {exc}")
    for line in _TIMES.lines():
        terminalreporter.write_line(line)
