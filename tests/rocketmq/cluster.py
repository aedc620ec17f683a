"""A whole RocketMQ cluster in controller mode under one folder: a name server, a DLedger controller
group and the brokers of one group; started in stages, each stage waited on by asking, always stopped.

Layout of the folder (``root``)::

    state.json            what was started (pids, ports, addresses): ``down`` and ``status`` read it
    home/                 the empty ROCKETMQ_HOME every JVM is given
    namesrv/              the name server's conf, console.log and logs/rocketmqlogs/
    controllers/n0..n2/   each controller's conf, DLedger store, console.log and logs
    brokers/b0..bN/       each broker's conf, store, console.log and logs
    admin/                mqadmin's user.home (its logs)
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from services.remoting.bodies import ReplicasInfo
from tests.rocketmq.classdata import archive_use
from tests.rocketmq.fetch import RocketMQ, cache_root, require_java
from tests.rocketmq.jvm import JavaProcess, java_command, stop_all
from tests.rocketmq.launcher import MAIN_CLASS as LAUNCHER_MAIN
from tests.rocketmq.launcher import launcher_jar
from tests.rocketmq.ports import Ports, free_block
from tests.rocketmq.servers import Broker, ControllerGroup, NameServer, Props, Runtime, wait_master

STATE = "state.json"
MQADMIN_TIMEOUT_S = 120.0
#: The niceness mqadmin runs at where it may be raised (as root): each of its requests has a fixed 3 s
#: budget that also pays for the JVM's own start-up work (sendMessage's route lookup and connection
#: included), which on two cores busy with other tests could use up all but a few hundred milliseconds.
MQADMIN_NICENESS = -5
#: How long a cluster's start waits for another's to end (one_start_at_a_time).
START_LOCK_WAIT_S = 180.0


@contextmanager
def one_start_at_a_time(root: Path, wait_s: float = START_LOCK_WAIT_S) -> Iterator[None]:
    """Held while a cluster starts, machine-wide (a lock file in the kit's cache): a cluster's JVMs load and
    compile most of their classes as they start, and several clusters starting at once on two cores (the
    full run's workers, each beginning with a cluster) leave each JVM too little CPU to answer within
    RocketMQ's 3 s timeouts. A start that finds the lock held longer than ``wait_s`` goes ahead without it."""
    path = cache_root() / "starting.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock:
        deadline = time.monotonic() + wait_s
        held = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.2)
        try:
            yield
        finally:
            if held:
                fcntl.flock(lock, fcntl.LOCK_UN)


class RocketMQCluster:
    """``with RocketMQCluster(root, "5.3.3") as cluster:`` starts everything and stops it on the way out.
    Its JVMs get SIGTERM if this Python process dies first, unless ``outlive_parent`` (what ``up`` uses)."""

    def __init__(self, root: Path, version: str, brokers: int = 3, controllers: int = 3, group: str = "broker-a",
                 broker_props: Props | None = None, controller_props: Props | None = None,
                 outlive_parent: bool = False) -> None:
        self.root = root.resolve()
        self.outlive_parent = outlive_parent
        self.version = version
        self.group = group
        self.size = (controllers, brokers)
        self.props = (dict(controller_props or {}), dict(broker_props or {}))
        self.runtime: Runtime | None = None
        #: Seconds from the start to each stage (controllers_ready, brokers_answering, group_ready), and stop.
        self.ports: Ports | None = None
        self.namesrv: NameServer | None = None
        self.controllers: ControllerGroup | None = None
        self.brokers: list[Broker] = []
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------------------------- start/stop

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        try:
            with one_start_at_a_time(self.root):
                self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        began = time.monotonic()
        self.runtime = Runtime(require_java(), RocketMQ(self.version).fetch(), self.root / "home",
                               self.outlive_parent)
        self.ports = free_block(*self.size)
        self.namesrv = NameServer(self.runtime, self.root / "namesrv", self.ports.namesrv)
        self.controllers = ControllerGroup(self.runtime, self.root / "controllers", self.ports.controllers,
                                           self.props[0])
        self._launch([self.namesrv.process, *self.controllers.processes])
        self.namesrv.wait_ready()
        self.controllers.wait_ready()
        self.timings["controllers_ready"] = time.monotonic() - began
        self._start_brokers(began)

    def _start_brokers(self, began: float) -> None:
        assert self.runtime and self.ports and self.namesrv and self.controllers
        self.brokers = [Broker(self.runtime, self.root / "brokers" / f"b{i}", self.group, port,
                               self.controllers.address_list, self.namesrv.address, self.props[1])
                        for i, port in enumerate(self.ports.brokers)]
        self._launch([broker.process for broker in self.brokers])
        for broker in self.brokers:
            broker.wait_ready()
        self.timings["brokers_answering"] = time.monotonic() - began
        wait_master(self.controllers, self.group, in_sync=len(self.brokers))
        self.timings["group_ready"] = time.monotonic() - began

    def _launch(self, processes: list[JavaProcess]) -> None:
        for process in processes:
            process.start()
        self.save()

    def processes(self) -> list[JavaProcess]:
        found = [self.namesrv.process] if self.namesrv else []
        found += self.controllers.processes if self.controllers else []
        return found + [broker.process for broker in self.brokers]

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM every JVM of the cluster, SIGKILL what outlives ``grace_s``."""
        began = time.monotonic()
        stop_all(list(reversed(self.processes())), grace_s)
        self.timings["stop"] = time.monotonic() - began

    # ------------------------------------------------------------------------------------- asking

    @property
    def controller_addrs(self) -> str:
        assert self.controllers is not None
        return self.controllers.address_list

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return self.namesrv.address

    def leader(self) -> str:
        assert self.controllers is not None
        return self.controllers.wait_ready(30.0)

    def sync_state(self, in_sync: int | None = None) -> ReplicasInfo:
        assert self.controllers is not None
        return wait_master(self.controllers, self.group, len(self.brokers) if in_sync is None else in_sync, 60.0)

    def mqadmin(self, *args: str, timeout_s: float = MQADMIN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """Real mqadmin with NAMESRV_ADDR set to this cluster's name server (exit code, stdout, stderr)."""
        assert self.runtime is not None
        return mqadmin(self.runtime, self.root / "admin", args, self.namesrv_addr if self.namesrv else None,
                       timeout_s)

    # ------------------------------------------------------------------------------------- state

    def save(self) -> None:
        state: dict[str, Any] = {  # written for `down`/`status`, read back by load_state only
            "version": self.version, "group": self.group,
            "namesrv": self.namesrv.address if self.namesrv else None,
            "controllers": self.controllers.addresses if self.controllers else [],
            "brokers": [broker.address for broker in self.brokers],
            "processes": [{"name": p.name, "role": p.role, "folder": str(p.folder), "pid": p.pid}
                          for p in self.processes()],
        }
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / STATE).write_text(json.dumps(state, indent=2) + "\n")


def mqadmin(runtime: Runtime, folder: Path, args: tuple[str, ...], namesrv: str | None = None,
            timeout_s: float = MQADMIN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """One run of RocketMQ's MQAdminStartup, through the launcher that exits once it returns (launcher.py),
    at MQADMIN_NICENESS when this process may raise a priority. Without a name server address mqadmin would look one up over HTTP at a fixed host name first (seconds
    lost), so NAMESRV_ADDR is always set when one is known."""
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if namesrv:
        env["NAMESRV_ADDR"] = namesrv
    classpath = f"{runtime.rocketmq.classpath}{os.pathsep}{launcher_jar(runtime.java, runtime.rocketmq)}"
    archive = archive_use(runtime.rocketmq.cache / runtime.rocketmq.version, runtime.java, "tools", classpath)
    command = java_command(runtime.java, classpath, "tools", folder, runtime.home, args, main=LAUNCHER_MAIN,
                           extra=archive.flags)
    if os.geteuid() == 0:
        command = ["nice", "-n", str(MQADMIN_NICENESS), *command]  # every thread of the JVM inherits it
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False, env=env,
                              cwd=folder)
    except subprocess.TimeoutExpired:
        archive.settle(None)
        raise
    archive.settle(done.returncode)
    return done


def load_state(root: Path) -> dict[str, Any]:
    """What ``save`` wrote (a plain dict: it only feeds ``down`` and ``status``)."""
    path = root / STATE
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: nothing was started with this folder")
    state: dict[str, Any] = json.loads(path.read_text())
    return state


def recorded_processes(state: dict[str, Any]) -> list[JavaProcess]:
    return [JavaProcess(p["name"], p["role"], Path(p["folder"]), [], p["pid"]) for p in state["processes"]]


def leftover_pids(root: Path) -> list[int]:
    """Every live process whose command line names a folder under ``root`` (what a stop missed)."""
    marker = f"-Duser.home={root.resolve()}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if marker in (entry / "cmdline").read_bytes() and stat[0] != "Z":
                found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


@contextmanager
def running(root: Path, version: str, **kwargs: Any) -> Iterator[RocketMQCluster]:
    """A started cluster that is stopped however the block ends."""
    with RocketMQCluster(root, version, **kwargs) as cluster:
        yield cluster
