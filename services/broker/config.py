"""Broker configuration: RocketMQ property names, documented defaults (docs/broker-config.md).

Precedence: flags > the ``-c`` file > defaults. Properties RocketMQ's controller mode overrides
(``brokerRole``, ``brokerId``, ...) are accepted but ignored with a loud warning: users were surprised
when RocketMQ overrode them silently.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from services.broker.contract import SEND_ROUTES
from services.broker.retention import parse_delete_when
from services.broker.schedule.levels import DEFAULT_LEVELS, DelayRules, parse_levels
from services.broker.transaction.half import CheckRules
from services.common.addresses import check_address
from services.common.auth import check_token
from services.common.errors import AddressError, ConfigError
from services.common.httplimits import (
    DEFAULT_BODY_TIMEOUT_MS,
    DEFAULT_HEADER_TIMEOUT_MS,
    DEFAULT_MAX_CONNECTIONS,
    MIB,
    WILDCARDS,
    HttpLimits,
    parse_host_names,
)
from services.common.props import to_bool, to_int
from services.common.remoting_conn import IDLE_TIMEOUT_S
from services.common.rocketmq_properties import BROKER_PROPERTIES
from services.common.tls import SECRETS as TLS_SECRETS
from services.common.tls import TlsProperties, undot

MAX_INT = 2**31 - 1
#: The longest heartbeat timeout a broker may ask the controllers for (their maxHeartbeatTimeoutMillis
#: may not be set higher either).
MAX_HEARTBEAT_TIMEOUT_MS = 3_600_000
#: The routes that carry messages, whose bodies may be as large as ``send_body_limit()``.


@dataclass(frozen=True)
class BrokerConfig(TlsProperties):
    brokerClusterName: str = "DefaultCluster"
    brokerName: str = "broker-a"
    brokerIP1: str = "127.0.0.1"
    listenPort: int = 10911
    haListenPort: int = 0  # 0: listenPort + 1, as RocketMQ's BrokerStartup sets it
    listenAddress: str = ""
    storePathRootDir: str = "~/mqctl/store"
    storePathCommitLog: str = ""
    storePathEpochFile: str = ""
    storePathBrokerIdentity: str = ""
    mappedFileSizeCommitLog: int = 64 * 2**20
    #: The key index (key_index.py): hash slots and entries of one index file.
    maxHashSlotNum: int = 100_000
    maxIndexNum: int = 400_000
    flushDiskType: str = "ASYNC_FLUSH"
    flushIntervalCommitLog: int = 500
    flushIntervalConsumeQueue: int = 1000
    syncFlushTimeout: int = 5000
    controllerAddr: str = "127.0.0.1:9878"
    controllerProtocol: str = "http"
    #: Name servers this broker registers with (``;``-separated) besides every controller of
    #: ``controllerAddr`` (mqctl's controllers are name servers; RocketMQ's are not).
    namesrvAddr: str = ""
    #: Where the key that proves this broker's id on the replication port comes from: ``file``
    #: (``brokerIdentity.key``, bound to the id by the controllers) or ``authToken`` (one key per group,
    #: derived from authToken, for controllers that hold no keys: RocketMQ's; ha/auth.py).
    brokerKeySource: str = "file"
    authToken: str = ""
    syncBrokerMetadataPeriod: int = 5000
    checkSyncStateSetPeriod: int = 5000
    syncControllerMetadataPeriod: int = 10000
    controllerHeartBeatTimeoutMills: int = 10000
    brokerHeartbeatInterval: int = 1000
    sendHeartbeatTimeoutMillis: int = 1000
    brokerElectionPriority: int = MAX_INT
    allAckInSyncStateSet: bool = False
    inSyncReplicas: int = 1
    minInSyncReplicas: int = 1
    totalReplicas: int = 1
    adaptiveInSyncReplicas: bool = False
    haMaxGapNotInSync: int = 256 * 2**20
    haMaxTimeSlaveNotCatchup: int = 15000
    haSendHeartbeatInterval: int = 5000
    haHousekeepingInterval: int = 20000
    haTransferBatchSize: int = 32 * 1024
    slaveTimeout: int = 3000
    asyncLearner: bool = False
    syncFromLastFile: bool = False
    #: Let RocketMQ's own brokers be replicas of this group (docs/security.md, "Mixed broker groups"): this
    #: broker writes RocketMQ's record layout, and its replication port serves (and, as a slave, speaks)
    #: RocketMQ's protocol without proof of identity to a member the controllers hold no key for, from the
    #: IP address they have for it. Off by default; every broker of such a group needs it.
    rocketmqHaPeers: bool = False
    maxMessageSize: int = 4 * 2**20
    defaultTopicQueueNums: int = 4
    #: Whether a send to a topic nobody created creates it (RocketMQ's default: true), with the queue count the
    #: producer asks for up to TBW102's (``defaultTopicQueueNums``); false refuses it with TOPIC_NOT_EXIST.
    autoCreateTopicEnable: bool = True
    #: The delay of each level of a delayed message (RocketMQ's messageStoreConfig.messageDelayLevel); units s, m,
    #: h, d; at most 64 levels. Every broker of a group should have the same levels.
    messageDelayLevel: str = DEFAULT_LEVELS
    #: How far ahead a timed message may be due (RocketMQ's timerMaxDelaySec, three days).
    timerMaxDelaySec: int = 3 * 86400
    rebalanceLockMaxLiveTime: int = 60000  # ms; RocketMQ's rocketmq.broker.rebalance.lockMaxLiveTime
    #: Transactional messages (transaction/): refuse half messages (NO_PERMISSION), as RocketMQ's option does.
    rejectTransactionMessage: bool = False
    #: How long (ms) after its birth a half message is left to its producer before the first check-back.
    transactionTimeOut: int = 6000
    #: How many check-backs a half message gets before it is discarded to TRANS_CHECK_MAX_TIME_TOPIC.
    transactionCheckMax: int = 15
    #: How often (ms) the master looks for half messages to check.
    transactionCheckInterval: int = 30000
    regionId: str = "DefaultRegion"
    traceOn: bool = True
    fileReservedTime: int = 72  # hours (retention.py has the rules; RocketMQ's defaults throughout)
    deleteWhen: str = "04"
    diskMaxUsedSpaceRatio: int = 75
    diskSpaceCleanForciblyRatio: int = 85
    diskSpaceWarningLevelRatio: int = 90
    cleanFileForciblyEnable: bool = True
    deleteFileBatchMax: int = 10
    cleanResourceInterval: int = 10000
    logLevel: str = "INFO"
    httpMaxConnections: int = DEFAULT_MAX_CONNECTIONS
    httpHeaderTimeoutMillis: int = DEFAULT_HEADER_TIMEOUT_MS
    httpBodyTimeoutMillis: int = DEFAULT_BODY_TIMEOUT_MS
    #: More names clients reach this broker by (a reverse proxy's, a DNS alias), comma-separated.
    httpAllowedHosts: str = ""
    strictConfig: bool = False

    @property
    def address(self) -> str:
        return f"{self.brokerIP1}:{self.listenPort}"

    @property
    def name_server_addresses(self) -> list[str]:
        """``namesrvAddr`` as a list (``;`` or ``,`` between addresses); empty when it is not set."""
        items = (item.strip() for item in self.namesrvAddr.replace(",", ";").split(";"))
        return [check_address(item, "name server") for item in items if item]

    @property
    def ha_address(self) -> str:
        return f"{self.brokerIP1}:{self.ha_port}"

    @property
    def ha_port(self) -> int:
        """The replication port: ``haListenPort``, or ``listenPort + 1`` when it is not set."""
        return self.haListenPort if self.haListenPort > 0 else self.listenPort + 1

    def listen_host(self) -> str:
        return self.listenAddress or self.brokerIP1

    @property
    def store_dir(self) -> Path:
        return Path(os.path.expanduser(self.storePathRootDir))

    @property
    def commitlog_dir(self) -> Path:
        return Path(os.path.expanduser(self.storePathCommitLog)) if self.storePathCommitLog \
            else self.store_dir / "commitlog"

    @property
    def epoch_file(self) -> Path:
        return Path(os.path.expanduser(self.storePathEpochFile)) if self.storePathEpochFile \
            else self.store_dir / "epochFileCheckpoint"

    @property
    def identity_file(self) -> Path:
        return Path(os.path.expanduser(self.storePathBrokerIdentity)) if self.storePathBrokerIdentity \
            else self.store_dir / "brokerIdentity"

    @property
    def key_file(self) -> Path:
        """This broker's signing key (services/broker/ha/auth.py), beside its identity file."""
        return self.identity_file.with_name(self.identity_file.name + ".key")

    @property
    def sync_flush(self) -> bool:
        return self.flushDiskType == "SYNC_FLUSH"

    def send_body_limit(self) -> int:
        """The largest sendMessage(s) request body: room for maxMessageSize of message bodies as JSON text or
        base64 (RocketMQ bounds a whole batch by maxMessageSize), twice over, plus 1 MiB of fields."""
        return 2 * self.maxMessageSize + MIB

    def http_limits(self) -> HttpLimits:
        send = self.send_body_limit()
        return HttpLimits(max_connections=self.httpMaxConnections,
                          header_timeout_s=self.httpHeaderTimeoutMillis / 1000,
                          body_timeout_s=self.httpBodyTimeoutMillis / 1000,
                          route_body_bytes=dict.fromkeys(SEND_ROUTES, send),
                          body_budget_bytes=max(64 * MIB, 4 * send),
                          host_names=frozenset(h.lower().strip("[]") for h in {self.listenAddress, self.brokerIP1}
                                               - set(WILDCARDS)),
                          extra_hosts=parse_host_names(self.httpAllowedHosts, "httpAllowedHosts"))

    def validate(self) -> None:
        self._validate_limits()
        self.validate_tls()
        if self.flushDiskType not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            raise ConfigError(f"flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, got {self.flushDiskType!r}")
        if not 0 < self.listenPort < 65536:
            raise ConfigError("listenPort must be a TCP port (1-65535)")
        if not 0 < self.ha_port < 65536:
            raise ConfigError("haListenPort must be a TCP port (1-65535; 0 or unset means listenPort + 1)")
        if self.listenPort == self.ha_port:
            raise ConfigError("listenPort and haListenPort must differ")
        if self.mappedFileSizeCommitLog < 4096:
            raise ConfigError("mappedFileSizeCommitLog must be at least 4096 bytes")
        if self.maxMessageSize + 1024 > self.mappedFileSizeCommitLog:
            raise ConfigError("maxMessageSize must be smaller than mappedFileSizeCommitLog")
        if not 100 <= self.maxHashSlotNum <= 2**26 or not 1000 <= self.maxIndexNum <= 2**28:
            raise ConfigError("maxHashSlotNum must be 100..67108864 and maxIndexNum 1000..268435456")
        self._validate_controller_links()
        if not self.minInSyncReplicas >= 1:
            raise ConfigError("minInSyncReplicas must be at least 1")
        if self.inSyncReplicas < 1 or self.totalReplicas < 1:
            raise ConfigError("inSyncReplicas and totalReplicas must be at least 1")
        if self.inSyncReplicas > self.totalReplicas or self.minInSyncReplicas > self.totalReplicas:
            raise ConfigError("inSyncReplicas and minInSyncReplicas cannot exceed totalReplicas "
                              f"({self.totalReplicas})")
        for name in ("syncBrokerMetadataPeriod", "checkSyncStateSetPeriod", "syncControllerMetadataPeriod",
                     "controllerHeartBeatTimeoutMills", "brokerHeartbeatInterval", "flushIntervalCommitLog",
                     "flushIntervalConsumeQueue", "syncFlushTimeout", "slaveTimeout", "haSendHeartbeatInterval",
                     "haHousekeepingInterval"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")
        if self.brokerHeartbeatInterval >= self.controllerHeartBeatTimeoutMills:
            raise ConfigError("brokerHeartbeatInterval must be shorter than controllerHeartBeatTimeoutMills")
        if not 1 <= self.defaultTopicQueueNums <= 1024:
            raise ConfigError("defaultTopicQueueNums must be between 1 and 1024")
        if self.rebalanceLockMaxLiveTime < 1:
            raise ConfigError("rebalanceLockMaxLiveTime must be at least 1 (ms)")
        try:
            parse_levels(self.messageDelayLevel)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        for name, low, high in (("transactionTimeOut", 0, 86_400_000), ("transactionCheckMax", 1, 10_000),
                                ("transactionCheckInterval", 100, 86_400_000)):
            if not low <= getattr(self, name) <= high:
                raise ConfigError(f"{name} must be between {low} and {high}, got {getattr(self, name)}")
        if not 0 < self.timerMaxDelaySec <= 10 * 365 * 86400:
            raise ConfigError("timerMaxDelaySec must be between 1 and 315360000 (ten years)")
        self._validate_retention()
        if self.logLevel.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ConfigError(f"logLevel must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {self.logLevel!r}")
        if not self.brokerName or "#" in self.brokerName or not self.brokerClusterName \
                or "#" in self.brokerClusterName:
            raise ConfigError("brokerName and brokerClusterName must be non-empty and must not contain '#'")

    def _validate_controller_links(self) -> None:
        if not self.controllerAddr.strip():
            raise ConfigError("controllerAddr is required: mqctl brokers run in controller mode")
        if self.controllerProtocol not in ("http", "remoting"):
            raise ConfigError(f"controllerProtocol must be http or remoting, got {self.controllerProtocol!r}")
        if self.controllerProtocol == "remoting" and self.brokerHeartbeatInterval >= IDLE_TIMEOUT_S * 1000:
            raise ConfigError(f"with controllerProtocol=remoting, brokerHeartbeatInterval must be under "
                              f"{int(IDLE_TIMEOUT_S * 1000)} ms: a controller closes a remoting connection that "
                              "quiet, which counts as the broker going away")
        try:
            self.name_server_addresses  # noqa: B018 - checked for its error
        except AddressError as exc:
            raise ConfigError(f"namesrvAddr: {exc}") from None
        if self.brokerKeySource not in ("file", "authToken"):
            raise ConfigError(f"brokerKeySource must be file or authToken, got {self.brokerKeySource!r}")
        if self.brokerKeySource == "authToken" and (not self.authToken or self.controllerProtocol != "remoting"):
            raise ConfigError("brokerKeySource=authToken needs authToken and controllerProtocol=remoting: it is "
                              "for controllers that hold no broker keys (RocketMQ's), which speak remoting only")

    def _validate_retention(self) -> None:
        try:
            parse_delete_when(self.deleteWhen)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        for name in ("diskMaxUsedSpaceRatio", "diskSpaceCleanForciblyRatio", "diskSpaceWarningLevelRatio"):
            if not 1 <= getattr(self, name) <= 100:
                raise ConfigError(f"{name} is a percentage of the disk (1-100), got {getattr(self, name)}")
        for name in ("fileReservedTime", "deleteFileBatchMax", "cleanResourceInterval"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")

    def _validate_limits(self) -> None:
        check_token(self.authToken, "authToken")
        try:
            parse_host_names(self.httpAllowedHosts, "httpAllowedHosts")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.controllerHeartBeatTimeoutMills > MAX_HEARTBEAT_TIMEOUT_MS:
            raise ConfigError(f"controllerHeartBeatTimeoutMills must be at most {MAX_HEARTBEAT_TIMEOUT_MS} ms, and "
                              "at most the controllers' maxHeartbeatTimeoutMillis (180000 unless changed)")
        if not 1 <= self.maxMessageSize <= 512 * MIB:
            raise ConfigError("maxMessageSize must be between 1 and 536870912 bytes (512 MiB)")
        for name, low, high in (("httpMaxConnections", 1, 1_000_000), ("httpHeaderTimeoutMillis", 100, 600_000),
                                ("httpBodyTimeoutMillis", 100, 3_600_000)):
            value = getattr(self, name)
            if not low <= value <= high:
                raise ConfigError(f"{name} must be between {low} and {high}, got {value}")

    def check_rules(self) -> CheckRules:
        """The rules of the transaction check-back this configuration gives."""
        return CheckRules(self.transactionTimeOut, self.transactionCheckMax, self.transactionCheckInterval,
                          self.fileReservedTime * 3_600_000)

    def delay_rules(self) -> DelayRules:
        """The rules of delayed and timed messages this configuration gives (validate() checked them)."""
        return DelayRules(parse_levels(self.messageDelayLevel), self.timerMaxDelaySec * 1000)

    def as_properties(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["haListenPort"] = self.ha_port
        for secret in ("authToken", *TLS_SECRETS):
            if values[secret]:
                values[secret] = "******"
        return values


FIELD_TYPES = {f.name: str(f.type) for f in fields(BrokerConfig)}

#: Why a RocketMQ property an operator may rely on does nothing here (added to its warning).
NOT_USED = {
    "aclEnable": ": use authToken for the controllers and the brokers' role notifications",
}

#: RocketMQ properties that controller mode decides for itself: accepted, ignored, warned about.
OVERRIDDEN_IN_CONTROLLER_MODE = {
    "brokerRole": "the controller decides who is master (SYNC_MASTER) and who is SLAVE",
    "brokerId": "the controller assigns a persistent broker id (see brokerIdentity)",
    "enableControllerMode": "mqctl brokers always run in controller mode",
    "enableSlaveActingMaster": "slave-acting-master mode does not exist in controller mode",
    "haMasterAddress": "a slave learns its master from the controller",
    "duplicationEnable": "not supported",
    "enableAutoInSyncReplicas": "RocketMQ uses it only in slave-acting-master mode; in controller mode the acks "
                                "needed are inSyncReplicas (or every SyncStateSet member with allAckInSyncStateSet). "
                                "mqctl's adaptive variant is adaptiveInSyncReplicas=true",
}


def config_from_properties(props: dict[str, str], base: BrokerConfig | None = None,
                           warnings: list[str] | None = None) -> BrokerConfig:
    """Overlay ``props`` (RocketMQ's property names) on ``base``.

    With a ``warnings`` list (a configuration read at start), a property RocketMQ's broker defines but
    mqctl does not use is accepted with a warning, and so is a name nobody knows (RocketMQ ignores what it
    does not use) unless ``strictConfig`` is true. Without one, both are errors."""
    cfg = base or BrokerConfig()
    props = undot(props, warnings)
    strict = warnings is None or to_bool(props.get("strictConfig", str(cfg.strictConfig).lower()), "strictConfig")
    updates: dict[str, Any] = {}
    for key, raw in props.items():
        if key in OVERRIDDEN_IN_CONTROLLER_MODE:
            if warnings is not None:
                warnings.append(f"{key}={raw} is IGNORED in controller mode: {OVERRIDDEN_IN_CONTROLLER_MODE[key]}")
            continue
        if key not in FIELD_TYPES:
            if key in BROKER_PROPERTIES and warnings is not None:
                warnings.append(f"property {key} has no effect in mqctl's broker and is ignored"
                                + NOT_USED.get(key, ""))
                continue
            if strict:
                raise ConfigError(f"unknown broker property {key!r}")
            assert warnings is not None
            warnings.append(f"unknown broker property {key!r} is ignored (strictConfig=true refuses it)")
            continue
        kind = FIELD_TYPES[key]
        updates[key] = to_bool(raw, key) if kind == "bool" else to_int(raw, key) if kind == "int" else raw.strip()
    return replace(cfg, **updates)
