"""Process entry point of a controller node: config → logging → Raft → HTTP server → clean shutdown."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from services.common.addresses import address_key
from services.common.conncap import KnownPeers
from services.common.controller_client import ControllerClient
from services.common.errors import ConfigError, MqctlError
from services.common.httpserver import make_server
from services.common.logsetup import CONTEXT, add_secret
from services.common.logsetup import setup_logging as _setup_logging
from services.common.ports import check_port_free
from services.common.props import load_properties
from services.common.remoting_conn import RemotingConnection
from services.controller.api import create_app
from services.controller.config import ControllerConfig, config_from_properties
from services.controller.controller import ControllerManager
from services.controller.raft import RaftNode, RaftSettings
from services.controller.raft_secret import resolve_password
from services.controller.remoting import ControllerRemoting
from services.controller.store_identity import (
    StoreIdentity,
    StoreStamp,
    identity_of,
    open_stamp,
    peer_verdict,
    valid_cluster_id,
)

log = logging.getLogger("mqctl.controller")

#: How long the start-up check waits for each peer's answer (a peer that is down only delays the start).
PEER_CHECK_TIMEOUT_S = 1.0


def build_config(config_file: str | None, overrides: dict[str, str],
                 warnings: list[str] | None = None) -> ControllerConfig:
    """defaults < config file < runtime updates persisted in configStorePath < flags."""
    config = ControllerConfig()
    if config_file:
        config = config_from_properties(load_properties(config_file), config, warnings)
    config = config_from_properties(overrides, config, warnings)
    store = config.config_store_file
    if store.exists():
        config = config_from_properties(load_properties(store), config, warnings)
        config = config_from_properties(overrides, config, warnings)
    config.validate()
    return config


def check_store(config: ControllerConfig) -> tuple[StoreIdentity, str | None]:
    """The store's stamp (services/controller/store_identity.py), refused with a ConfigError if it is another
    group's: by the stamp itself, or by a peer that answers for another cluster id. Also what to log."""
    identity, note = open_stamp(config.store_dir / "raft", identity_of(config))
    if identity.cluster_id and len(config.peers()) > 1:
        answers = {p.id: (p.address, _peer_cluster_id(p.address)) for p in config.peers()
                   if p.id != config.controllerDLegerSelfId}
        refusal = peer_verdict(identity, config.store_dir, answers)
        if refusal is not None:
            raise ConfigError(refusal)
    return identity, note


def _peer_cluster_id(address: str) -> str | None:
    """The cluster id a peer answers for; None if it is down, does not say (an older version, an empty store)
    or answers nonsense."""
    try:
        with ControllerClient([address], timeout=PEER_CHECK_TIMEOUT_S) as client:
            value = client.metadata(address).clusterId
    except MqctlError:
        return None
    return value if valid_cluster_id(value) else None


def _stop_on_foreign_state(reason: str) -> None:
    """This node's Raft state turned out to be another group's: stop (cleanly) rather than serve it."""
    log.critical("%s", reason)
    os.kill(os.getpid(), signal.SIGTERM)


def setup_logging(config: ControllerConfig) -> Path:
    CONTEXT["node"] = config.controllerDLegerSelfId
    return _setup_logging(config.store_dir / "logs" / "controller.log", config.logLevel)


def known_peers(config: ControllerConfig, manager: ControllerManager) -> KnownPeers:
    """Whose connections get the half of the cap strangers cannot take: the controllers of the group and
    every registered broker (by the address it registered)."""
    def registered() -> set[str]:
        if manager.raft is None:
            return set()
        addresses: set[str] = manager.raft.read(
            lambda s: {e.address for bs in s.broker_sets.values() for e in bs.brokers.values()})
        return {key[0] for key in map(address_key, addresses) if key is not None}
    return KnownPeers([p.host for p in config.peers()], registered)


def start_raft(config: ControllerConfig, password: str, manager: ControllerManager) -> RaftNode:
    """This node's Raft, on its store; a store it cannot write (a full disk) stops the start with the reason."""
    me, host = config.self_peer(), config.listen_host()
    store = config.store_dir / "raft"
    try:
        return RaftNode(RaftSettings(
            self_address=me.raft_address,
            peer_addresses=[p.raft_address for p in config.peers() if p.id != me.id],
            bind_address=f"{host}:{me.raft_port}",
            store_dir=store,
            password=password,
            election_timeout_min_s=config.raftElectionTimeoutMinMillis / 1000,
            election_timeout_max_s=config.raftElectionTimeoutMaxMillis / 1000,
            heartbeat_period_s=config.raftHeartbeatIntervalMillis / 1000,
            leader_fallback_timeout_s=config.raftLeaderFallbackTimeoutMillis / 1000,
            log_compaction_min_entries=config.raftLogCompactionMinEntries,
            log_compaction_min_time_s=config.raftLogCompactionMinTimeSecs,
        ), on_state_changed=manager.on_raft_state_changed)
    except OSError as exc:
        raise ConfigError(f"cannot write the controller's Raft store {store} ({exc.strerror or exc}): free space on "
                          "its filesystem (or fix its permissions), then start the controller again") from exc


def run(config: ControllerConfig) -> None:
    """Run one controller node until SIGTERM/SIGINT. Must be called on the main thread."""
    me = config.self_peer()
    host = config.listen_host()
    check_port_free(host, me.port, "controller API")
    check_port_free(host, me.raft_port, "Raft peer port")
    config.use_as_client()
    identity, note = check_store(config)  # before anything is written to the store
    password, password_source = resolve_password(config)
    add_secret(password)  # masked in every log line, like the auth token
    log_file = setup_logging(config)
    log.info("starting controller %s (group %s) api=%s raft=%s peers=%s store=%s log=%s", me.id,
             config.controllerDLegerGroup, me.address, me.raft_address, config.controllerDLegerPeers,
             config.store_dir, log_file)
    if note:
        log.warning("%s", note)
    log.info("Raft port %s:%d%s: encrypted and authenticated with the password from %s", host,
             me.raft_port, " (every interface)" if host in ("0.0.0.0", "::") else "", password_source)
    log.info("API and remoting port %s:%d: %s", host, me.port, config.tls_summary())
    manager = ControllerManager(config)
    manager.attach_store_stamp(StoreStamp(config.store_dir / "raft", identity), _stop_on_foreign_state)
    raft = start_raft(config, password, manager)
    manager.attach_raft(raft)

    async def started() -> None:
        await manager.start()
        log.info("controller %s serving HTTP on %s:%d", me.id, host, me.port)

    remoting = ControllerRemoting(manager)

    limits = config.http_limits()
    code_limits = remoting.limits()

    def remoting_connection(server_state: object) -> RemotingConnection:
        return RemotingConnection(remoting.handle, on_closed=remoting.on_closed, server_state=server_state,
                                  head_timeout_s=limits.header_timeout_s, frame_timeout_s=limits.body_timeout_s,
                                  limits=code_limits)

    server = make_server(create_app(manager), host, me.port, started, manager.stop, binary=remoting_connection,
                         limits=limits, tls=config.server_tls(), known=known_peers(config, manager))
    try:
        server.run()
    finally:
        remoting.offload.close()
        log.info("controller %s shutting down Raft", me.id)
        raft.destroy()
        log.info("controller %s stopped", me.id)
