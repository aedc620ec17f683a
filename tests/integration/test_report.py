"""``mqctl report`` end to end: on a real Spark standalone cluster started from the installed pyspark
(same summary.json as local[*], and through spark-submit too), and on a dataset collected live from a
running controller group and broker group after a failover.

Every process is started on 127.0.0.1 on free ports and stopped afterwards; waits poll with deadlines.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mqctl.cluster import LocalCluster, wait_until
from mqctl.cluster.processes import free_port_span
from services.broker import contract as bc
from services.common.broker_client import BrokerClient
from tests.integration.conftest import run_cli
from tests.spark.builders import alter, elect, entry, failed, other

pytestmark = [pytest.mark.slow, pytest.mark.spark,
              pytest.mark.skipif(not shutil.which("java") and not os.environ.get("JAVA_HOME")
                                 and not os.environ.get("CI"),
                                 reason="no Java runtime on this developer machine: Spark needs Java 17 or 21 "
                                        "(in CI, where .ci/run checks Java, these tests always run)")]

AS_OF = 1_732_200_000_000
T0 = AS_OF - 86_400_000


# ---------------------------------------------------------------------- a standalone cluster
def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    """A free port below the kernel's ephemeral range (which an outgoing connection may take meanwhile)."""
    return free_port_span(1)


def spark_env() -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            # the REST submission server (port 6066 by default) is not needed and could collide
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}


@dataclass
class Standalone:
    directory: Path
    port: int = field(default_factory=free_port)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def work_dir(self) -> Path:
        return self.directory / "work"

    def _daemon(self, name: str, *args: str) -> Path:
        log = self.directory / f"{name}.log"
        with open(log, "wb") as out:
            self.processes.append(subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=spark_env(), start_new_session=True))
        return log

    def start(self, timeout: float = 60) -> None:
        master_log = self._daemon("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", str(self.port), "--webui-port", str(free_port()))
        self._wait_for(master_log, "I have been elected leader", timeout)
        worker_log = self._daemon("worker", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                                  "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", "2",
                                  "--memory", "2g", "--work-dir", str(self.work_dir))
        self._wait_for(worker_log, "Successfully registered with master", timeout)

    def _wait_for(self, log: Path, line: str, timeout: float) -> None:
        def ready() -> bool:
            if any(p.poll() is not None for p in self.processes):
                raise AssertionError(f"a Spark daemon exited:\n{log.read_text(errors='replace')[-3000:]}")
            return line in log.read_text(errors="replace")
        wait_until(ready, timeout, f"'{line}' in {log.name}", interval=0.2)

    def stop(self) -> None:
        for process in reversed(self.processes):  # spark-class execs the JVM: the pid is the JVM's
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    cluster = Standalone(tmp_path_factory.mktemp("spark-standalone"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


# ---------------------------------------------------------------------- a dataset with some history
def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def history_dataset(root: Path) -> Path:
    """Three groups in two clusters, in several files, with every kind of event."""
    a = [other(0, T0), elect(1, T0 + 1_000, 1, 1, "INITIAL"), alter(2, T0 + 2_000, [1, 2]),
         alter(3, T0 + 3_000, [1, 2, 3]), alter(4, T0 + 600_000, [1, 3]), elect(5, T0 + 900_000, 3, 2),
         alter(6, T0 + 901_000, [3, 2]), elect(7, T0 + 3_600_000, 2, 3, "ADMIN"), failed(8, T0 + 7_200_000, 4),
         elect(9, T0 + 7_260_000, 1, 5, "UNCLEAN"), alter(10, T0 + 7_300_000, [1, 2])]
    b = [elect(11, T0 + 5_000, 1, 1, "INITIAL", group="broker-b"), alter(12, T0 + 6_000, [1, 2], group="broker-b"),
         elect(13, T0 + 50_000_000, 2, 2, group="broker-b")]
    z = [elect(0, T0 + 10, 1, 1, "INITIAL", group="broker-z", cluster="Other"),
         other(1, T0 + 20, "CLEAN_BROKER_DATA", group="broker-z", cluster="Other")]
    epochs = [entry(i, 1, 0, 500) for i in (1, 2, 3)] + [entry(3, 2, 500, 900), entry(2, 2, 510, 900),
                                                         entry(1, 5, 900, 950), entry(2, 5, 900, 950)]
    epochs += [entry(1, 1, 0, 10, group="broker-b"), entry(2, 2, 10, 20, group="broker-b")]
    write_jsonl(root / "events" / "part-a.jsonl", a)
    write_jsonl(root / "events" / "part-b.jsonl", b + z)
    write_jsonl(root / "epochs" / "epochs.jsonl", epochs)
    return root


def report(*args: str, timeout: float = 240) -> dict[str, Any]:
    result = run_cli("report", "--format", "json", *args, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    summary: dict[str, Any] = json.loads(result.stdout)
    return summary


@dataclass(frozen=True)
class LocalRun:
    dataset: Path
    summary: dict[str, Any]


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> LocalRun:
    """The reference: the dataset reported on local[*]."""
    root = tmp_path_factory.mktemp("local")
    dataset = history_dataset(root / "dataset")
    summary = report("--input", str(dataset), "--output", str(root / "out"), "--as-of", str(AS_OF))
    groups = {g["brokerName"]: g for g in summary["groups"]}
    assert (groups["broker-a"]["failovers"], groups["broker-a"]["divergentEpochs"]) == (2, [2])
    assert summary["cluster"]["clusterNames"] == ["DefaultCluster", "Other"]
    return LocalRun(dataset, summary)


def test_malformed_dataset_is_one_line(tmp_path: Path) -> None:
    dataset = history_dataset(tmp_path / "dataset")
    with open(dataset / "epochs" / "epochs.jsonl", "a", encoding="utf-8") as out:
        out.write("{oops\n")
    result = run_cli("report", "--input", str(dataset), "--output", str(tmp_path / "out"), timeout=240)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "Error" in line or "Traceback" in line]
    assert errors == [result.stderr.strip().splitlines()[-1]], result.stderr
    assert errors[0].startswith(f"Error: malformed dataset {dataset}: {dataset}/epochs/epochs.jsonl: ")


@pytest.mark.timeout(600)  # two reports and the archive check, each a JVM: minutes on a loaded machine
def test_the_class_archive_is_written_once_then_used(local_run: LocalRun, tmp_path: Path) -> None:
    """The first run's JVM writes the archive as it exits; a detached process checks it and moves it into
    place; the next run's JVM loads Spark's classes from it, and the report is the same."""
    cache = tmp_path / "cache"
    env = {"MQCTL_SPARK_CDS": "1", "MQCTL_CACHE_DIR": str(cache)}
    args = ["report", "--format", "json", "--input", str(local_run.dataset), "--as-of", str(AS_OF)]
    first = run_cli(*args, "--output", str(tmp_path / "first"), env=env, timeout=240)
    assert first.returncode == 0, first.stderr[-3000:]
    archives = wait_until(lambda: not list(cache.glob("*.tmp-*")) and list(cache.glob("spark-*.jsa")), 180,
                          "the class archive to be checked and moved into place", interval=0.5)
    assert len(archives) == 1 and sorted(cache.iterdir()) == archives
    loaded = tmp_path / "classes.txt"
    second = run_cli(*args, "--output", str(tmp_path / "second"), "--conf",
                     f"spark.driver.extraJavaOptions=-Xlog:class+load=info:file={loaded}", env=env, timeout=240)
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads(second.stdout) == json.loads(first.stdout) == local_run.summary
    spark_classes = [line for line in loaded.read_text().splitlines() if " org.apache.spark." in line]
    archived = sum("source: shared objects file (top)" in line for line in spark_classes)
    from_jars = sum("source: file:" in line for line in spark_classes)  # (lambdas are made at run time)
    # nearly all: only a class the first run never loaded still comes from its jar
    assert archived >= 0.9 * (archived + from_jars) > 0, (archived, from_jars)


# ---------------------------------------------------------------------- live, after a failover
@pytest.fixture
def live_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / "cluster")
    cluster.configure()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def epoch_entries(address: str) -> list[dict[str, Any]]:
    with BrokerClient(2.0) as client:
        entries: list[dict[str, Any]] = client.request(address, "GET", bc.EPOCH_CACHE).data["epochEntries"]
    return entries


def test_live_report_after_a_failover(live_cluster: LocalCluster, tmp_path: Path) -> None:
    old = live_cluster.master_of("broker-a")
    assert old is not None
    old_id = live_cluster.sync_state("broker-a")["masterBrokerId"]
    old.kill()
    state = wait_until(lambda: (s := live_cluster.sync_state("broker-a")).get("masterBrokerId") not in (None, old_id)
                       and s, 60, "a new master")
    new = live_cluster.master_of("broker-a")
    assert new is not None and state["masterEpoch"] == 2
    wait_until(lambda: [e["epoch"] for e in epoch_entries(new.address)][-1:] == [2], 30,
               "the new master to start epoch 2")

    started = time.monotonic()
    summary = report("-a", live_cluster.controller_addresses, "-c", "DefaultCluster", "--output",
                     str(tmp_path / "report"))
    elapsed = time.monotonic() - started
    group = summary["groups"][0]
    assert [g["brokerName"] for g in summary["groups"]] == ["broker-a"]
    assert (group["masterEpochs"], group["failovers"], group["uncleanElections"], group["adminElections"],
            group["failedElections"]) == (2, 1, 0, 0, 0)
    assert (group["currentMasterBrokerId"], group["currentMasterEpoch"]) == (state["masterBrokerId"], 2)
    assert group["maxTenureMs"] is not None and group["currentTenureMs"] is not None
    assert group["replicas"] == 2  # the killed master cannot report its epoch file
    assert group["divergentEpochs"] == []

    dataset = tmp_path / "report" / "dataset"
    events = [json.loads(line) for line in (dataset / "events" / "events.jsonl").read_text().splitlines()]
    elections = [(e["electReason"], e["masterEpoch"], e["masterBrokerId"]) for e in events
                 if e["eventType"] == "ELECT_MASTER" and e["elected"]]
    assert elections == [("INITIAL", 1, old_id), ("FAILOVER", 2, state["masterBrokerId"])]
    epochs = [json.loads(line) for line in (dataset / "epochs" / "epochs.jsonl").read_text().splitlines()]
    assert sorted({(e["brokerId"], e["epoch"]) for e in epochs if e["brokerId"] == state["masterBrokerId"]}) == [
        (state["masterBrokerId"], 1), (state["masterBrokerId"], 2)]
    manifest = json.loads((dataset / "manifest.json").read_text())
    assert len(manifest["brokersUnreachable"]) == 1 and old.address in manifest["brokersUnreachable"][0]
    for name in ("summary.json", "groups.csv", "groups.parquet", "report.html", "timeline.png"):
        assert (tmp_path / "report" / name).exists()
    assert "FAILOVER at" in (tmp_path / "report" / "report.html").read_text()
    assert elapsed < 120


def test_a_jvm_that_cannot_start_is_one_line(tmp_path: Path) -> None:
    dataset = history_dataset(tmp_path / "dataset")
    result = run_cli("report", "--input", str(dataset), "--output", str(tmp_path / "out"),
                     "--conf", "spark.driver.memory=lots", timeout=120)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: Spark did not start: ") and "Invalid maximum heap size: -Xmxlots" in last
    assert last.endswith(f"(JVM log: {tmp_path / 'out' / 'spark-driver.log'})")


# ---------------------------------------------------------------------- on the standalone cluster (last: its
# module-scoped master and worker JVMs then start after the tests above and stop with the module)
def test_standalone_cluster_gives_the_same_summary_as_local(standalone: Standalone, local_run: LocalRun,
                                                            tmp_path: Path) -> None:
    remote = report("--input", str(local_run.dataset), "--output", str(tmp_path / "remote"), "--as-of", str(AS_OF),
                    "--spark-master", standalone.url, "--conf", "spark.executor.memory=1g")
    assert list(standalone.work_dir.glob("app-*")), "no application ran on the standalone worker"
    assert remote == local_run.summary
    assert json.loads((tmp_path / "remote" / "summary.json").read_text()) == local_run.summary


def test_spark_submit_on_the_standalone_cluster(standalone: Standalone, local_run: LocalRun, tmp_path: Path) -> None:
    """The job file under spark-submit, with the package shipped as --py-files."""
    from spark_reports.submit import job_file

    subprocess.run([sys.executable, "-m", "spark_reports.submit", str(tmp_path / "zip")], check=True,
                   capture_output=True, timeout=60)
    submitted = subprocess.run(
        [str(spark_home() / "bin" / "spark-submit"), "--master", standalone.url,
         "--py-files", str(tmp_path / "zip" / "spark_reports.zip"), str(job_file()),
         "--input", str(local_run.dataset), "--output", str(tmp_path / "submitted"), "--as-of", str(AS_OF)],
        capture_output=True, text=True, timeout=240, env=spark_env(), check=False)
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    assert f"3 group(s) as of {AS_OF}; wrote {tmp_path / 'submitted'}" in submitted.stdout
    assert json.loads((tmp_path / "submitted" / "summary.json").read_text()) == local_run.summary
