"""Process entry point of a broker: config → logging → store recovery → HTTP server → clean shutdown."""

from __future__ import annotations

import logging
from pathlib import Path

from services.broker.api import create_app
from services.broker.broker import Broker
from services.broker.config import BrokerConfig, config_from_properties
from services.common.addresses import address_key
from services.common.conncap import KnownPeers
from services.common.errors import ConfigError
from services.common.httpserver import GracefulServer, make_server
from services.common.logsetup import CONTEXT
from services.common.logsetup import setup_logging as _setup_logging
from services.common.ports import check_port_free
from services.common.props import load_properties

log = logging.getLogger("mqctl.broker")


def build_config(config_file: str | None, overrides: dict[str, str],
                 warnings: list[str] | None = None) -> BrokerConfig:
    config = BrokerConfig()
    if config_file:
        config = config_from_properties(load_properties(config_file), config, warnings)
    config = config_from_properties(overrides, config, warnings)
    config.validate()
    return config


def setup_logging(config: BrokerConfig) -> Path:
    CONTEXT.update(broker=config.brokerName, id=None, role="FENCED", epoch=None)
    return _setup_logging(config.store_dir / "logs" / "broker.log", config.logLevel)


def known_peers(broker: Broker) -> KnownPeers:
    """Whose connections get the half of the cap strangers cannot take: the controllers, the group's master
    (for a slave) and the slaves that proved their identity on the HA port (for a master)."""
    def group() -> set[str]:
        master = address_key(broker.replicas.state.master_address or "")
        return broker.replication.slave_hosts() | ({master[0]} if master else set())
    controllers = [key[0] for key in map(address_key, broker.api.addresses) if key is not None]
    return KnownPeers(controllers, group)


def run(config: BrokerConfig, warnings: list[str] | None = None) -> int:
    """Run one broker until SIGTERM/SIGINT; returns the process exit code."""
    host = config.listen_host()
    check_port_free(host, config.listenPort, "broker API")
    check_port_free(host, config.ha_port, "broker HA port")
    log_file = setup_logging(config)
    for warning in warnings or []:
        log.warning(warning)
    log.info("starting broker %s/%s at %s (HA %s), store %s, controllers %s (over %s), log %s",
             config.brokerClusterName, config.brokerName, config.address, config.ha_address, config.store_dir,
             config.controllerAddr, config.controllerProtocol, log_file)
    fatal: list[str] = []
    server: GracefulServer | None = None

    def on_fatal(message: str) -> None:
        fatal.append(message)
        if server is not None:
            server.should_exit = True

    log.info("API, remoting and HA ports: %s", config.tls_summary())
    config.use_as_client()
    broker = Broker(config, on_fatal=on_fatal)
    broker.open_store()

    async def started() -> None:
        await broker.start()
        log.info("broker %s serving HTTP on %s:%d", config.brokerName, host, config.listenPort)

    server = make_server(create_app(broker), host, config.listenPort, started, broker.stop,
                         binary=broker.remoting.connection, limits=config.http_limits(),
                         tls=config.server_tls(), known=known_peers(broker))
    server.run()
    log.info("broker %s stopped", config.brokerName)
    if fatal:
        raise ConfigError(fatal[0])
    return 0
