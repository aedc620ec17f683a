"""TLS settings (services/common/tls.py) and the test CA (mqctl tls): RocketMQ's property names, what is
refused at start and why, and handshakes between the contexts, run in memory (no socket)."""

from __future__ import annotations

import ssl
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography import x509

from mqctl.cli import cli
from services.broker.config import BrokerConfig
from services.broker.config import config_from_properties as broker_props
from services.common import tls
from services.common.errors import ConfigError
from services.controller.config import BLACK_LIST, ControllerConfig
from services.controller.config import config_from_properties as controller_props


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tls")
    result = CliRunner().invoke(cli, ["tls", "init", str(folder), "--host", "10.9.0.1", "--host", "node1.example",
                                      "--mutual"])
    assert result.exit_code == 0, result.output
    return folder


@pytest.fixture(autouse=True)
def plain_client() -> Iterator[None]:
    yield
    tls.use_client(None)


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, name: str | None = "127.0.0.1") -> None:
    """A whole TLS handshake between the two contexts through memory buffers (and one record each way, so a
    TLS 1.3 server's verdict on the client's certificate arrives); raises the first side's SSLError."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_side=False, server_hostname=name)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = [False, False]
    for _ in range(20):
        for i, side in enumerate((c, s)):
            if not done[i]:
                try:
                    side.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done):
            break
    c.write(b"ping")
    s_in.write(c_out.read())
    assert s.read(4) == b"ping"
    s.write(b"pong")
    c_in.write(s_out.read())
    assert c.read(4) == b"pong"


def node(ca: Path, **extra: str) -> dict[str, str]:
    return {"tls.config.file": str(ca / "tls.properties"), **extra}


def test_tls_init_writes_a_ca_certificates_for_every_host_and_private_keys(ca: Path) -> None:
    for name in ("ca.key", "server.key", "client.key"):
        assert stat.S_IMODE((ca / name).stat().st_mode) == 0o600
    cert = x509.load_pem_x509_certificate((ca / "server.pem").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1", "10.9.0.1"}
    assert set(names.get_values_for_type(x509.DNSName)) == {"localhost", "node1.example"}
    props = dict(line.split("=", 1) for line in (ca / "tls.properties").read_text().splitlines() if "=" in line)
    assert props["tls.server.mode"] == "enforcing" and props["tls.server.need.client.auth"] == "require"


def test_tls_init_refuses_to_replace_a_ca_and_names_bad_hosts(ca: Path, tmp_path: Path) -> None:
    again = CliRunner().invoke(cli, ["tls", "init", str(ca)])
    assert again.exit_code == 2 and "ca.key exists" in again.output
    bad = CliRunner().invoke(cli, ["tls", "init", str(tmp_path / "x"), "--host", "two words"])
    assert bad.exit_code == 2 and "neither an IP address nor a DNS name" in bad.output
    assert not (tmp_path / "x" / "ca.key").exists()  # checked before anything is written
    missing = CliRunner().invoke(cli, ["tls", "cert", str(tmp_path), "n1", "--host", "10.0.0.1"])
    assert missing.exit_code == 2 and "run mqctl tls init" in missing.output


def test_tls_cert_issues_a_node_certificate_that_a_client_checks_by_address(ca: Path) -> None:
    result = CliRunner().invoke(cli, ["tls", "cert", str(ca), "n2", "--host", "10.9.0.2"])
    assert result.exit_code == 0, result.output
    server = tls.server_context(str(ca / "n2.pem"), str(ca / "n2.key"))
    handshake(server, tls.client_context(str(ca / "ca.pem")), "10.9.0.2")
    with pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch"):
        handshake(server, tls.client_context(str(ca / "ca.pem")), "10.9.0.3")


def test_rocketmq_names_and_the_config_file_fill_the_fields(ca: Path) -> None:
    warnings: list[str] = []
    cfg = broker_props({**node(ca), "tls.test.mode.enable": "true", "tls.server.need.client.auth": "none"},
                       BrokerConfig(), warnings)
    assert cfg.tls_on and cfg.tlsServerCertPath.endswith("server.pem")
    assert cfg.tlsServerNeedClientAuth == "require"  # the file wins, as in RocketMQ
    assert any("tls.test.mode.enable" in w for w in warnings)
    cfg.validate()
    ctl = controller_props({"tls.enable": "true", "tls.server.certPath": str(ca / "server.pem"),
                            "tls.server.keyPath": str(ca / "server.key"),
                            "tls.client.trustCertPath": str(ca / "ca.pem")}, ControllerConfig(), [])
    ctl.validate()
    assert ctl.tls_on and ctl.server_tls() is not None and ctl.client_tls() is not None


def test_key_passwords_are_masked_and_tls_cannot_be_changed_at_run_time() -> None:
    cfg = BrokerConfig(tlsServerKeyPassword="s3cret", tlsClientKeyPassword="t0p")
    shown = cfg.as_properties()
    assert shown["tlsServerKeyPassword"] == shown["tlsClientKeyPassword"] == "******"
    assert ControllerConfig(tlsServerKeyPassword="s3cret").as_properties()["tlsServerKeyPassword"] == "******"
    assert set(tls.TLS_NAMES) | set(tls.TLS_NAMES.values()) <= BLACK_LIST


@pytest.mark.parametrize("props, message", [
    ({"tls.server.mode": "permissive"}, "permissive .* is not supported"),
    ({"tls.server.mode": "sometimes"}, "must be disabled or enforcing"),
    ({"tls.enable": "true"}, "tls.server.certPath is not set"),
    ({"tls.enable": "true", "tls.server.certPath": "/no/such.pem"}, "no such file"),
    ({"tls.enable": "true", "tls.server.need.client.auth": "always", "tls.server.certPath": "x"},
     "none, optional or require"),
])
def test_what_stops_a_start_is_named(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        broker_props(props, BrokerConfig(), []).validate()


def test_a_key_of_another_certificate_or_a_missing_trust_file_stops_the_start(ca: Path) -> None:
    wrong_key = node(ca, **{"tls.server.keyPath": str(ca / "client.key")})
    cfg = broker_props(wrong_key, BrokerConfig(), [])
    assert cfg.tlsServerKeyPath.endswith("server.key")  # the file wins...
    mixed = BrokerConfig(tlsEnable=True, tlsServerCertPath=str(ca / "server.pem"),
                         tlsServerKeyPath=str(ca / "client.key"))
    with pytest.raises(ConfigError, match="the key must be the certificate's"):
        mixed.validate()
    no_trust = BrokerConfig(tlsEnable=True, tlsServerCertPath=str(ca / "server.pem"),
                            tlsServerKeyPath=str(ca / "server.key"), tlsServerNeedClientAuth="require")
    with pytest.raises(ConfigError, match="needs tls.server.trustCertPath"):
        no_trust.validate()
    with pytest.raises(ConfigError, match="not a TLS property"):
        bad = ca / "bad.properties"
        bad.write_text("brokerName=x\n")
        broker_props({"tls.config.file": str(bad)}, BrokerConfig(), [])


def test_handshakes_succeed_only_with_the_right_ca_and_client_certificate(ca: Path, tmp_path: Path) -> None:
    cfg = broker_props(node(ca), BrokerConfig(), [])
    server, client = cfg.server_tls(), cfg.client_tls()
    assert server is not None and client is not None
    handshake(server, client)
    other = tmp_path / "other"
    assert CliRunner().invoke(cli, ["tls", "init", str(other)]).exit_code == 0
    with pytest.raises(ssl.SSLCertVerificationError) as caught:
        handshake(server, tls.client_context(str(other / "ca.pem"), str(ca / "client.pem"), str(ca / "client.key")))
    assert "give the CA that signed it" in tls.handshake_reason(caught.value)
    with pytest.raises(ssl.SSLError, match="PEER_DID_NOT_RETURN_A_CERTIFICATE|CERTIFICATE_REQUIRED"):
        handshake(server, tls.client_context(str(ca / "ca.pem")))  # no client certificate
    unchecked = tls.client_context(auth_server=False)  # RocketMQ's default: the server is not checked
    handshake(tls.server_context(str(ca / "server.pem"), str(ca / "server.key")), unchecked, "10.1.2.3")


def test_the_process_client_side_sets_the_scheme_and_the_hints(ca: Path) -> None:
    assert tls.scheme() == "http" and tls.ws_scheme() == "ws" and "--tls-ca" in tls.closed_hint()
    tls.use_client(tls.client_context(str(ca / "ca.pem")))
    assert tls.scheme() == "https" and tls.ws_scheme() == "wss" and "--tls-cert" in tls.closed_hint()
    assert tls.server_hostname("[::1]") == "::1"
    tls.use_client(tls.client_context(str(ca / "ca.pem"), str(ca / "client.pem"), str(ca / "client.key")), True)
    assert "trust this client's certificate" in tls.closed_hint()


def test_mqctl_flags_name_the_file_at_fault(ca: Path) -> None:
    result = CliRunner().invoke(cli, ["--tls-ca", "/no/ca.pem", "getControllerMetaData"])
    assert result.exit_code == 2 and "--tls-ca /no/ca.pem: no such file" in result.output
    result = CliRunner().invoke(cli, ["--tls-key", str(ca / "client.key"), "getControllerMetaData"])
    assert result.exit_code == 2 and "--tls-key needs --tls-cert" in result.output
