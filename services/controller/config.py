"""Controller configuration: one frozen dataclass, RocketMQ property names, documented defaults.

Precedence: command-line flags > runtime updates persisted in ``configStorePath`` > the ``-c`` file >
defaults. ``docs/controller-config.md`` lists every property; keep it in sync with this class.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from services.common.auth import check_token
from services.common.durable import atomic_write
from services.common.errors import ConfigError
from services.common.httplimits import (
    DEFAULT_BODY_TIMEOUT_MS,
    DEFAULT_HEADER_TIMEOUT_MS,
    DEFAULT_MAX_CONNECTIONS,
    WILDCARDS,
    HttpLimits,
    parse_host_names,
)
from services.common.props import format_properties, load_properties, to_bool, to_int
from services.common.rocketmq_properties import CONTROLLER_PROPERTIES
from services.common.tls import SECRETS as TLS_SECRETS
from services.common.tls import TLS_NAMES, TlsProperties, undot
from services.controller.heartbeat import MAX_HEARTBEAT_TIMEOUT_MS

DEFAULT_STORE = "~/mqctl/controller"


@dataclass(frozen=True)
class Peer:
    id: str
    host: str
    port: int  # the client (HTTP) port: what `-a` takes
    raft_port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def raft_address(self) -> str:
        return f"{self.host}:{self.raft_port}"


@dataclass(frozen=True)
class ControllerConfig(TlsProperties):
    controllerDLegerGroup: str = "DefaultControllerGroup"
    controllerDLegerPeers: str = "n0-127.0.0.1:9878"
    controllerDLegerSelfId: str = "n0"
    controllerStorePath: str = DEFAULT_STORE
    configStorePath: str = ""
    controllerRaftPort: int = -1
    controllerRaftPassword: str = ""
    controllerRaftPasswordFile: str = ""
    authToken: str = ""
    #: Over remoting, also take requests signed in mqctl's older, malleable form (RocketMQ's ACL signature
    #: plus mqctlSigned, without mqctlSignature), for the time it takes to upgrade a cluster's brokers.
    acceptLegacySignatures: bool = False
    listenAddress: str = ""
    enableElectUncleanMaster: bool = False
    notifyBrokerRoleChanged: bool = True
    scanInactiveMasterInterval: int = 5000
    scanNotActiveBrokerInterval: int = 5000
    electMasterMaxRetryCount: int = 3
    controllerRequestTimeoutMillis: int = 5000
    raftElectionTimeoutMinMillis: int = 1000
    raftElectionTimeoutMaxMillis: int = 2000
    raftHeartbeatIntervalMillis: int = 100
    raftLeaderFallbackTimeoutMillis: int = 1000
    raftLogCompactionMinEntries: int = 5000
    raftLogCompactionMinTimeSecs: int = 300
    logLevel: str = "INFO"
    maxHeartbeatTimeoutMillis: int = MAX_HEARTBEAT_TIMEOUT_MS
    httpMaxConnections: int = DEFAULT_MAX_CONNECTIONS
    httpHeaderTimeoutMillis: int = DEFAULT_HEADER_TIMEOUT_MS
    httpBodyTimeoutMillis: int = DEFAULT_BODY_TIMEOUT_MS
    #: More names clients reach this node by (a reverse proxy's, a DNS alias), comma-separated: accepted in
    #: Host, and as the console's origin.
    httpAllowedHosts: str = ""
    #: Where ``mqctl report --output`` writes: the console links each group to its timeline there.
    consoleReportDir: str = ""
    #: Refuse to start on a property name neither mqctl nor RocketMQ knows (default: warn and start,
    #: as RocketMQ ignores what it does not use).
    strictConfig: bool = False
    #: The name server's (RocketMQ's NamesrvConfig): a route answer carries the topic's orderTopicConf from
    #: the KV config's ORDER_TOPIC_CONFIG namespace.
    orderMessageEnable: bool = False
    #: The name server's: GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) is served; false answers it "disable".
    enableAllTopicList: bool = True

    # ------------------------------------------------------------------ derived values
    @property
    def store_dir(self) -> Path:
        return Path(os.path.expanduser(self.controllerStorePath))

    @property
    def config_store_file(self) -> Path:
        if self.configStorePath:
            return Path(os.path.expanduser(self.configStorePath))
        return self.store_dir / "controller.properties"

    def peers(self) -> list[Peer]:
        return parse_peers(self.controllerDLegerPeers, self.controllerDLegerSelfId, self.controllerRaftPort)

    def self_peer(self) -> Peer:
        for peer in self.peers():
            if peer.id == self.controllerDLegerSelfId:
                return peer
        raise ConfigError(f"controllerDLegerSelfId {self.controllerDLegerSelfId!r} is not one of the peers "
                          f"in controllerDLegerPeers ({self.controllerDLegerPeers})")

    def listen_host(self) -> str:
        return self.listenAddress or self.self_peer().host

    def missing_password_message(self) -> str:
        return (f"this controller group has {len(self.peers())} nodes and no Raft password: set "
                "controllerRaftPasswordFile (or controllerRaftPassword) to the same secret on every node, e.g. "
                "python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > raft.password; chmod 600 "
                "raft.password, then copy it to each node. Without it anyone who reaches the Raft port could "
                "run code on the node")

    def http_limits(self) -> HttpLimits:
        own = {self.listenAddress, self.self_peer().host} - set(WILDCARDS)
        return HttpLimits(max_connections=self.httpMaxConnections,
                          header_timeout_s=self.httpHeaderTimeoutMillis / 1000,
                          body_timeout_s=self.httpBodyTimeoutMillis / 1000,
                          host_names=frozenset(h.lower().strip("[]") for h in own),
                          extra_hosts=parse_host_names(self.httpAllowedHosts, "httpAllowedHosts"))

    def validate(self) -> None:
        self.self_peer()
        self._validate_limits()
        if self.raftElectionTimeoutMinMillis <= 3 * self.raftHeartbeatIntervalMillis:
            raise ConfigError("raftElectionTimeoutMinMillis must be more than 3x raftHeartbeatIntervalMillis")
        if self.raftElectionTimeoutMaxMillis <= self.raftElectionTimeoutMinMillis:
            raise ConfigError("raftElectionTimeoutMaxMillis must be greater than raftElectionTimeoutMinMillis")
        if not (self.raftHeartbeatIntervalMillis < self.raftLeaderFallbackTimeoutMillis
                <= self.raftElectionTimeoutMinMillis):
            raise ConfigError("raftLeaderFallbackTimeoutMillis must be above raftHeartbeatIntervalMillis and "
                              "at most raftElectionTimeoutMinMillis")
        for name in ("scanInactiveMasterInterval", "scanNotActiveBrokerInterval",
                     "controllerRequestTimeoutMillis"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")
        if self.logLevel.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ConfigError(f"logLevel must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {self.logLevel!r}")
        if self.raftLogCompactionMinEntries < 2 or self.raftLogCompactionMinTimeSecs < 1:
            raise ConfigError("raftLogCompactionMinEntries must be at least 2 and raftLogCompactionMinTimeSecs "
                              "at least 1")
        if self.electMasterMaxRetryCount < 1:
            raise ConfigError("electMasterMaxRetryCount must be at least 1")
        self._validate_raft_password()
        self.validate_tls()

    def _validate_raft_password(self) -> None:
        """Every node has a Raft password (see raft_secret.py); only a lone node can make up its own."""
        if self.controllerRaftPassword and self.controllerRaftPasswordFile:
            raise ConfigError("set controllerRaftPassword or controllerRaftPasswordFile, not both")
        if not (self.controllerRaftPassword or self.controllerRaftPasswordFile) and len(self.peers()) > 1:
            raise ConfigError(self.missing_password_message())

    def _validate_limits(self) -> None:
        """Upper bounds too: a runtime update (POST /config) is input from the network."""
        check_token(self.authToken, "authToken")
        try:
            parse_host_names(self.httpAllowedHosts, "httpAllowedHosts")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        for name, low, high in _BOUNDS:
            value = getattr(self, name)
            if not low <= value <= high:
                raise ConfigError(f"{name} must be between {low} and {high}, got {value}")

    def as_properties(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for secret in ("controllerRaftPassword", "authToken", *TLS_SECRETS):
            if values[secret]:
                values[secret] = "******"
        return values


FIELD_NAMES = {f.name for f in fields(ControllerConfig)}

_HOUR_MS = 3_600_000
#: (property, lowest, highest) for numbers whose range is not checked with other properties in validate().
_BOUNDS = (
    ("scanInactiveMasterInterval", 1, _HOUR_MS), ("scanNotActiveBrokerInterval", 1, _HOUR_MS),
    ("controllerRequestTimeoutMillis", 1, _HOUR_MS), ("electMasterMaxRetryCount", 1, 100),
    ("maxHeartbeatTimeoutMillis", 1000, _HOUR_MS), ("httpMaxConnections", 1, 1_000_000),
    ("httpHeaderTimeoutMillis", 100, 600_000), ("httpBodyTimeoutMillis", 100, _HOUR_MS),
)

#: Settings an operator may change on a running controller (updateControllerConfig).
RUNTIME_UPDATABLE = frozenset({
    "enableElectUncleanMaster", "acceptLegacySignatures", "notifyBrokerRoleChanged", "scanInactiveMasterInterval",
    "scanNotActiveBrokerInterval", "electMasterMaxRetryCount", "controllerRequestTimeoutMillis", "logLevel",
    *("orderMessageEnable", "enableAllTopicList"),
})
#: What UPDATE_NAMESRV_CONFIG (318) may change: the name server's own properties that this node acts on.
NAMESRV_UPDATABLE = ("enableAllTopicList", "orderMessageEnable")
#: Never updatable remotely (RocketMQ's black list plus our own path and secret settings).
BLACK_LIST = frozenset({"configBlackList", "configStorePath", "rocketmqHome", "controllerStorePath",
                        "controllerRaftPassword", "controllerRaftPasswordFile", "authToken",
                        *TLS_NAMES, *TLS_NAMES.values()})

#: Properties RocketMQ's controller has that we accept and ignore (with a warning); every other property
#: of RocketMQ's controller or name server (rocketmq_properties.py) is ignored the same way.
IGNORED = frozenset({"controllerType", "mappedFileSize", "controllerThreadPoolNums",
                     "controllerRequestThreadPoolQueueCapacity", "isProcessReadEvent", "rocketmqHome",
                     "metricsExporterType", "configBlackList", "jraftConfig"}) | (CONTROLLER_PROPERTIES - FIELD_NAMES)


def config_from_properties(props: dict[str, str], base: ControllerConfig | None = None,
                           warnings: list[str] | None = None) -> ControllerConfig:
    """Overlay ``props`` (strings, RocketMQ names) on ``base``.

    With a ``warnings`` list (a configuration read at start), a property RocketMQ defines but mqctl does not
    use is accepted with a warning, and so is a name nobody knows (RocketMQ ignores what it does not use)
    unless ``strictConfig`` is true. Without one (a change to a running controller), both are errors."""
    cfg = base or ControllerConfig()
    props = undot(props, warnings)
    strict = warnings is None or to_bool(props.get("strictConfig", str(cfg.strictConfig).lower()), "strictConfig")
    updates: dict[str, Any] = {}
    types = {f.name: f.type for f in fields(ControllerConfig)}
    for key, raw in props.items():
        if key in IGNORED and key not in FIELD_NAMES:
            if warnings is not None:
                warnings.append(f"property {key} has no effect in mqctl's controller and is ignored")
            continue
        if key not in FIELD_NAMES:
            if strict:
                raise ConfigError(f"unknown controller property {key!r}")
            assert warnings is not None
            warnings.append(f"unknown controller property {key!r} is ignored (strictConfig=true refuses it)")
            continue
        updates[key] = convert_value(key, raw, str(types[key]))
    return replace(cfg, **updates)


def convert_value(key: str, raw: str, type_name: str) -> Any:
    if type_name == "bool":
        return to_bool(raw, key)
    if type_name == "int":
        return to_int(raw, key)
    return raw.strip()


def parse_peers(spec: str, self_id: str, self_raft_port: int) -> list[Peer]:
    """``n0-127.0.0.1:9878;n1-127.0.0.1:9868`` (Raft on port+1) or ``n0-host:9878@9900`` (explicit)."""
    peers: list[Peer] = []
    for item in (p.strip() for p in spec.split(";")):
        if not item:
            continue
        peer_id, sep, addr = item.partition("-")
        addr, _, raft = addr.partition("@")
        host, _, port_text = addr.rpartition(":")
        if not sep or not peer_id or not host or not port_text.isdigit():
            raise ConfigError(f"bad controllerDLegerPeers entry {item!r}: expected id-host:port, "
                              "e.g. n0-127.0.0.1:9878")
        port = int(port_text)
        if raft and not raft.isdigit():
            raise ConfigError(f"bad Raft port in controllerDLegerPeers entry {item!r}")
        raft_port = int(raft) if raft else port + 1
        if peer_id == self_id and self_raft_port > 0:
            raft_port = self_raft_port
        peers.append(Peer(peer_id, host, port, raft_port))
    if not peers:
        raise ConfigError("controllerDLegerPeers is empty")
    if len({p.id for p in peers}) != len(peers):
        raise ConfigError(f"duplicate peer id in controllerDLegerPeers ({spec})")
    return peers


def persist_runtime_update(store: Path, props: dict[str, str]) -> None:
    """Merge a runtime update into the node's config store (fsync and atomic rename), so that it survives a
    restart; the store holds only what was changed at run time."""
    persisted = load_properties(store) if store.exists() else {}
    persisted.update(props)
    atomic_write(store, format_properties(dict(persisted)))
