"""RocketMQ's name server, a controller group (DLedger) and brokers in controller mode, each a JVM with
its own folder, conf file, store and logs; readiness is asked over the wire (probe.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from services.remoting.bodies import ReplicasInfo
from services.remoting.headers import GetMetaDataResponseHeader
from tests.rocketmq import probe
from tests.rocketmq.classdata import archive_use
from tests.rocketmq.fetch import RocketMQ
from tests.rocketmq.jvm import JavaProcess, java_command, poll
from tests.rocketmq.ports import free_ports

Props = Mapping[str, object]

#: A controller group that notices a dead broker within seconds (defaults: 5 s scans) and keeps its
#: DLedger data file small (the default mappedFileSize is 1 GiB).
CONTROLLER_DEFAULTS: dict[str, object] = {
    "controllerType": "DLedger", "mappedFileSize": 67108864, "scanNotActiveBrokerInterval": 2000,
    "scanInactiveMasterInterval": 2000, "notifyBrokerRoleChanged": "true", "enableElectUncleanMaster": "false",
}
#: Brokers with small files (a 64 MiB commitlog segment, a small index), all replicas acking
#: (allAckInSyncStateSet), quicker metadata sync than the defaults, and patience for a busy machine.
BROKER_DEFAULTS: dict[str, object] = {
    "brokerClusterName": "DefaultCluster", "brokerId": -1, "enableControllerMode": "true",
    "fetchControllerAddrByDnsLookup": "false", "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
    "allAckInSyncStateSet": "true", "totalReplicas": 3, "inSyncReplicas": 2, "minInSyncReplicas": 1,
    "flushDiskType": "ASYNC_FLUSH", "mappedFileSizeCommitLog": 67108864, "mappedFileSizeConsumeQueue": 600000,
    "maxHashSlotNum": 10000, "maxIndexNum": 40000, "timerWheelEnable": "false",
    "brokerHeartbeatInterval": 1000, "controllerHeartBeatTimeoutMills": 10000, "syncBrokerMetadataPeriod": 2000,
    "checkSyncStateSetPeriod": 2000, "syncControllerMetadataPeriod": 5000, "haSendHeartbeatInterval": 1000,
    "waitTimeMillsInSendQueue": 3000, "osPageCacheBusyTimeOutMills": 5000,
}


def write_properties(path: Path, props: Props) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
    return path


@dataclass(frozen=True)
class Runtime:
    """What every JVM of a cluster shares: java, the jars of one version, an empty ROCKETMQ_HOME."""

    java: str
    rocketmq: RocketMQ
    home: Path
    #: The servers keep running when the Python process that started them exits (``up``).
    outlive_parent: bool = False

    def process(self, name: str, role: str, folder: Path, args: tuple[str, ...]) -> JavaProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        archive = archive_use(self.rocketmq.cache / self.rocketmq.version, self.java, role, self.rocketmq.classpath)
        command = java_command(self.java, self.rocketmq.classpath, role, folder, self.home, args, extra=archive.flags)
        return JavaProcess(name, role, folder, command, outlive_parent=self.outlive_parent, archive=archive)

#: How long a name server or broker JVM may take to answer after its start: seconds when the machine is idle,
#: but a CI run's two cores are shared with several clusters and Spark, and one broker once took over 90 s.
READY_S = 180.0


class NameServer:
    def __init__(self, runtime: Runtime, folder: Path, port: int | None = None, props: Props | None = None) -> None:
        port = port or free_ports(1)[0]
        self.address = f"127.0.0.1:{port}"
        conf = {"listenPort": port, "kvConfigPath": folder / "namesrv" / "kvConfig.json", **(props or {})}
        path = write_properties(folder / "namesrv.conf", conf)
        self.process = runtime.process("namesrv", "namesrv", folder, ("-c", str(path)))

    def wait_ready(self, timeout_s: float = READY_S) -> None:
        poll(lambda: probe.cluster_info(self.address), timeout_s, f"name server {self.address}",
             self.process.check_alive)


class ControllerGroup:
    """Standalone controllers in one DLedger group, each on its own port (its peer address): ``ports``
    names them, or says how many to put on free ports."""

    def __init__(self, runtime: Runtime, folder: Path, ports: tuple[int, ...] | int = 3, props: Props | None = None,
                 group: str = "group1") -> None:
        ports = free_ports(ports) if isinstance(ports, int) else ports
        self.addresses = [f"127.0.0.1:{port}" for port in ports]
        peers = ";".join(f"n{i}-{address}" for i, address in enumerate(self.addresses))
        self.processes: list[JavaProcess] = []
        for i in range(len(ports)):
            node = folder / f"n{i}"
            conf = {**CONTROLLER_DEFAULTS, "controllerDLegerGroup": group, "controllerDLegerPeers": peers,
                    "controllerDLegerSelfId": f"n{i}", "controllerStorePath": node / "DLedgerController",
                    "configStorePath": node / "controller.properties", **(props or {})}
            path = write_properties(node / "controller.conf", conf)
            self.processes.append(runtime.process(f"controller-n{i}", "controller", node, ("-c", str(path))))

    @property
    def address_list(self) -> str:
        """The addresses as mqadmin's ``-a`` and a broker's ``controllerAddr`` take them."""
        return ";".join(self.addresses)

    def check_alive(self) -> None:
        for process in self.processes:
            process.check_alive()

    def leader(self) -> str | None:
        """The leader every node names, or None while they do not agree (or one does not answer)."""
        views = [probe.controller_metadata(address) for address in self.addresses]
        leaders = {view.controller_leader_address for view in views}
        leader = leaders.pop() if len(leaders) == 1 else None
        return leader if leader in self.addresses else None

    def metadata(self, address: str) -> GetMetaDataResponseHeader:
        return probe.controller_metadata(address)

    def wait_ready(self, timeout_s: float = READY_S) -> str:
        """Every node answers and names the same leader; returns its address."""
        return poll(self.leader, timeout_s, f"controller group {self.address_list}", self.check_alive)


class Broker:
    """A broker in controller mode: ``brokerId=-1``, its id assigned by the controllers."""

    def __init__(self, runtime: Runtime, folder: Path, group: str, port: int, controller_addrs: str,
                 namesrv: str, props: Props | None = None) -> None:
        self.group = group
        self.address = f"127.0.0.1:{port}"
        store = folder / "store"
        conf = {**BROKER_DEFAULTS, "brokerName": group, "controllerAddr": controller_addrs, "namesrvAddr": namesrv,
                "listenPort": port, "haListenPort": port + 1, "storePathRootDir": store,
                "storePathCommitLog": store / "commitlog", **(props or {})}
        path = write_properties(folder / "broker.conf", conf)
        self.process = runtime.process(f"broker-{folder.name}", "broker", folder, ("-c", str(path)))

    def wait_ready(self, timeout_s: float = READY_S) -> None:
        poll(lambda: probe.broker_answers(self.address), timeout_s, f"broker {self.address}",
             self.process.check_alive)


def wait_master(controllers: ControllerGroup, group: str, in_sync: int, timeout_s: float = 120.0) -> ReplicasInfo:
    """The group has a master and at least ``in_sync`` replicas in its SyncStateSet, as the leader says."""
    def elected() -> ReplicasInfo | None:
        leader = controllers.leader()
        info = probe.sync_state(leader, group) if leader else None
        if info is None or not info.master_address or len(info.in_sync_replicas) < in_sync:
            return None
        return info
    return poll(elected, timeout_s, f"a master of {group} with {in_sync} in sync", controllers.check_alive)
