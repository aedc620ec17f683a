"""Both services' configurations refuse what would crash them or make a limit meaningless (issue 19,
items 9, 10, 12, 13): an auth token that cannot travel in an HTTP header, numbers beyond their bounds."""

from __future__ import annotations

import pytest

from services.broker import contract as bc
from services.broker.config import BrokerConfig
from services.broker.config import config_from_properties as broker_props
from services.common.errors import ConfigError
from services.controller import contract
from services.controller.config import ControllerConfig
from services.controller.config import config_from_properties as controller_props

BAD_TOKENS = ["jeton-é", "two words", "tab\there", "nul\x00", "emoji-\U0001f600", "ends-with-newline\n"]


@pytest.mark.parametrize("token", BAD_TOKENS, ids=repr)
def test_controller_auth_token_is_printable_ascii(token: str) -> None:
    with pytest.raises(ConfigError, match="authToken may hold only printable ASCII") as caught:
        ControllerConfig(authToken=token).validate()
    assert token not in caught.value.remark


@pytest.mark.parametrize("token", BAD_TOKENS, ids=repr)
def test_broker_auth_token_is_printable_ascii(token: str) -> None:
    with pytest.raises(ConfigError, match="authToken may hold only printable ASCII"):
        BrokerConfig(authToken=token).validate()


def test_every_printable_ascii_character_is_allowed_in_a_token() -> None:
    token = "".join(chr(c) for c in range(0x21, 0x7F))
    ControllerConfig(authToken=token).validate()
    BrokerConfig(authToken=token).validate()


@pytest.mark.parametrize("key, value", [
    ("maxHeartbeatTimeoutMillis", "999"), ("maxHeartbeatTimeoutMillis", "3600001"),
    ("scanInactiveMasterInterval", str(10**15)), ("scanNotActiveBrokerInterval", str(10**18)),
    ("controllerRequestTimeoutMillis", str(2**63)), ("electMasterMaxRetryCount", "1000000"),
    ("httpMaxConnections", "0"), ("httpHeaderTimeoutMillis", "10"), ("httpBodyTimeoutMillis", str(10**10)),
])
def test_controller_numbers_have_upper_and_lower_bounds(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        controller_props({key: value}).validate()


@pytest.mark.parametrize("key, value", [
    ("controllerHeartBeatTimeoutMills", str(10**18)), ("httpMaxConnections", "0"),
    ("httpHeaderTimeoutMillis", "99"), ("httpBodyTimeoutMillis", "3600001"),
])
def test_broker_numbers_have_bounds(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        broker_props({key: value}).validate()


def test_http_limits_follow_the_configuration() -> None:
    limits = controller_props({"httpMaxConnections": "100", "httpHeaderTimeoutMillis": "1500",
                               "httpBodyTimeoutMillis": "2500"}).http_limits()
    assert (limits.max_connections, limits.header_timeout_s, limits.body_timeout_s) == (100, 1.5, 2.5)
    assert limits.body_limit(contract.HEARTBEAT) == 64 * 1024


def test_the_broker_send_routes_take_a_batch_of_max_message_size() -> None:
    config = broker_props({"maxMessageSize": str(4 * 2**20)})
    limits = config.http_limits()
    assert limits.body_limit(bc.SEND_MESSAGES) == 9 * 2**20
    assert limits.body_limit(bc.SEND_MESSAGE) == 9 * 2**20
    assert limits.body_limit(bc.NOTIFY_ROLE_CHANGED) == 64 * 1024
    assert limits.body_budget_bytes >= 4 * limits.body_limit(bc.SEND_MESSAGES)


@pytest.mark.parametrize("value", ["https://mq.example.net", "mq.example.net:443", "two words", "a/b", "é.example"])
def test_allowed_hosts_are_host_names(value: str) -> None:
    for config in (ControllerConfig(httpAllowedHosts=value), BrokerConfig(httpAllowedHosts=value)):
        with pytest.raises(ConfigError, match="httpAllowedHosts takes host names"):
            config.validate()


def test_the_names_a_node_answers_to() -> None:
    controller = ControllerConfig(controllerDLegerPeers="n0-Ctrl-0.internal:9878;n1-ctrl-1.internal:9878",
                                  controllerDLegerSelfId="n0", listenAddress="0.0.0.0",
                                  httpAllowedHosts="mq.example.net, Alias.example.net")
    limits = controller.http_limits()
    assert limits.host_names == {"ctrl-0.internal"}
    assert limits.extra_hosts == {"mq.example.net", "alias.example.net"}
    broker = BrokerConfig(brokerIP1="10.0.0.11", listenAddress="broker-a.internal").http_limits()
    assert broker.host_names == {"10.0.0.11", "broker-a.internal"} and not broker.extra_hosts
