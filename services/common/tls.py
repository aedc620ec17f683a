"""TLS on every link but Raft's: the HTTP API and the remoting protocol (one port), the HA link, and
every client (the brokers', the controllers' notifications, mqctl). docs/security.md has the set-up.

Configuration uses RocketMQ's names (``TlsSystemConfig``): ``tls.server.certPath``, ``tls.server.keyPath``,
``tls.server.keyPassword``, ``tls.server.trustCertPath``, ``tls.server.need.client.auth``, the same
``tls.client.*`` for a node's outgoing links, ``tls.config.file``, plus ``tls.server.mode`` and
``tls.enable``. A node is all TLS or all plain text: ``tls.server.mode=enforcing`` or ``tls.enable=true``
(also spelt ``tlsEnable``) turns TLS on for its listeners and its own connections. RocketMQ's
``permissive`` mode (both on one port) is not offered.

Where RocketMQ differs (``tls.client.authServer`` defaults to true here: a client checks the server's
certificate and name; no self-signed certificate is made up at start), docs/compatibility.md says why.

A process has one client side, set once at start (``use_client``) and read by every connection it
opens, as RocketMQ's ``TlsSystemConfig`` is one per JVM.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from services.common.errors import ConfigError
from services.common.props import load_properties

__all__ = ["CLIENT_AUTH", "TLS_NAMES", "TlsProperties", "client_context", "closed_hint", "client_tls", "httpx_verify",
           "handshake_reason", "scheme", "server_context", "server_hostname", "undot", "use_client", "ws_scheme"]

#: RocketMQ's property name → our field (the field names are TlsSystemConfig's own).
TLS_NAMES = {
    "tls.enable": "tlsEnable", "tls.server.mode": "tlsMode",
    "tls.server.need.client.auth": "tlsServerNeedClientAuth", "tls.server.keyPath": "tlsServerKeyPath",
    "tls.server.keyPassword": "tlsServerKeyPassword", "tls.server.certPath": "tlsServerCertPath",
    "tls.server.authClient": "tlsServerAuthClient", "tls.server.trustCertPath": "tlsServerTrustCertPath",
    "tls.client.keyPath": "tlsClientKeyPath", "tls.client.keyPassword": "tlsClientKeyPassword",
    "tls.client.certPath": "tlsClientCertPath", "tls.client.authServer": "tlsClientAuthServer",
    "tls.client.trustCertPath": "tlsClientTrustCertPath", "tls.config.file": "tlsConfigFile",
}
#: tls.server.need.client.auth → what the server asks of a client's certificate.
CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}
MODES = ("disabled", "enforcing")
#: Never shown and never changed over the network.
SECRETS = ("tlsServerKeyPassword", "tlsClientKeyPassword")


def undot(props: dict[str, str], warnings: list[str] | None = None) -> dict[str, str]:
    """``props`` with RocketMQ's dotted ``tls.*`` names turned into field names. A ``tls.config.file``
    is read in, and as in RocketMQ its values win over the same properties given directly."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if key == "tls.test.mode.enable":
            if warnings is not None:
                warnings.append("property tls.test.mode.enable has no effect: mqctl never makes up a self-signed "
                                "certificate (mqctl tls init makes a test CA)")
            continue
        out[TLS_NAMES.get(key, key)] = value
    file = out.get("tlsConfigFile", "").strip()
    if file:
        try:
            extra = load_properties(file)
        except OSError as exc:
            raise ConfigError(f"tls.config.file {file}: {exc.strerror or exc}") from None
        for key, value in extra.items():
            name = TLS_NAMES.get(key, key)
            if name not in TLS_NAMES.values() or name == "tlsConfigFile":
                raise ConfigError(f"tls.config.file {file}: {key!r} is not a TLS property")
            out[name] = value
    return out


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str, password: str, side: str) -> None:
    what = f"tls.{side}.certPath {cert}" + (f" / tls.{side}.keyPath {key}" if key else "")
    try:
        ctx.load_cert_chain(cert, key or None, password or None)
    except FileNotFoundError as exc:
        raise ConfigError(f"{what}: no such file {exc.filename or ''}".rstrip()) from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(f"{what}: cannot load the certificate and its key ({_ssl_reason(exc)}): the key must be "
                          f"the certificate's, in PEM, unencrypted or with tls.{side}.keyPassword") from None


def _load_trust(ctx: ssl.SSLContext, path: str, name: str) -> None:
    try:
        ctx.load_verify_locations(cafile=path)
    except FileNotFoundError:
        raise ConfigError(f"{name} {path}: no such file") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"{name} {path}: not a PEM certificate file ({_ssl_reason(exc)})") from None


def _ssl_reason(exc: BaseException) -> str:
    return getattr(exc, "reason", None) or str(exc) or type(exc).__name__


def server_context(cert: str, key: str, password: str = "", trust: str = "",
                   need_client_auth: str = "none") -> ssl.SSLContext:
    """A listener's context: its certificate chain, and with ``need_client_auth`` ``optional`` or
    ``require`` the CA file its clients' certificates must chain to. TLS 1.2 at least."""
    if not cert:
        raise ConfigError("TLS is on but tls.server.certPath is not set (the node's certificate, PEM)")
    if need_client_auth not in CLIENT_AUTH:
        raise ConfigError(f"tls.server.need.client.auth must be none, optional or require, got {need_client_auth!r}")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(ctx, cert, key, password, "server")
    if need_client_auth != "none":
        if not trust:
            raise ConfigError(f"tls.server.need.client.auth={need_client_auth} needs tls.server.trustCertPath "
                              "(the CA that signs client certificates)")
        _load_trust(ctx, trust, "tls.server.trustCertPath")
        ctx.verify_mode = CLIENT_AUTH[need_client_auth]
    return ctx


def client_context(trust: str = "", cert: str = "", key: str = "", password: str = "",
                   auth_server: bool = True) -> ssl.SSLContext:
    """An outgoing link's context: it checks the server's certificate against ``trust`` (else the system's
    CAs) and the name or IP address it dialled, unless ``auth_server`` is false; presents ``cert`` if given."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if auth_server:
        if trust:
            _load_trust(ctx, trust, "tls.client.trustCertPath")
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        _load_chain(ctx, cert, key, password, "client")
    elif key:
        raise ConfigError("tls.client.keyPath is set without tls.client.certPath")
    return ctx


@dataclass(frozen=True)
class TlsProperties:
    """The TLS fields of a node's configuration (a base of ControllerConfig and BrokerConfig)."""

    tlsEnable: bool = False
    tlsMode: str = "disabled"
    tlsServerNeedClientAuth: str = "none"
    tlsServerCertPath: str = ""
    tlsServerKeyPath: str = ""
    tlsServerKeyPassword: str = ""
    tlsServerTrustCertPath: str = ""
    tlsServerAuthClient: bool = False
    tlsClientCertPath: str = ""
    tlsClientKeyPath: str = ""
    tlsClientKeyPassword: str = ""
    tlsClientTrustCertPath: str = ""
    tlsClientAuthServer: bool = True
    tlsConfigFile: str = ""

    @property
    def tls_on(self) -> bool:
        return self.tlsEnable or self.tlsMode == "enforcing"

    def validate_tls(self) -> None:
        """ConfigError naming the property at fault; with TLS on, both contexts are built (so a missing
        file, a wrong key password or a key of another certificate stops the start, not the first link)."""
        if self.tlsMode == "permissive":
            raise ConfigError("tls.server.mode=permissive (TLS and plain text on one port) is not supported: "
                              "set enforcing (TLS only) or disabled")
        if self.tlsMode not in MODES:
            raise ConfigError(f"tls.server.mode must be disabled or enforcing, got {self.tlsMode!r}")
        if self.tls_on:
            self.server_tls()
            self.client_tls()

    def _client_auth(self) -> str:
        # RocketMQ's authClient=true means "check client certificates": require one unless told optional.
        if self.tlsServerAuthClient and self.tlsServerNeedClientAuth == "none":
            return "require"
        return self.tlsServerNeedClientAuth

    def server_tls(self) -> ssl.SSLContext | None:
        if not self.tls_on:
            return None
        return server_context(self.tlsServerCertPath, self.tlsServerKeyPath, self.tlsServerKeyPassword,
                              self.tlsServerTrustCertPath, self._client_auth())

    def use_as_client(self) -> None:
        """Make this node's client side the process's (every link it opens)."""
        use_client(self.client_tls(), bool(self.tlsClientCertPath))

    def client_tls(self) -> ssl.SSLContext | None:
        if not self.tls_on:
            return None
        return client_context(self.tlsClientTrustCertPath, self.tlsClientCertPath, self.tlsClientKeyPath,
                              self.tlsClientKeyPassword, self.tlsClientAuthServer)

    def tls_summary(self) -> str:
        if not self.tls_on:
            return "TLS off"
        auth = self._client_auth()
        return (f"TLS on (certificate {Path(self.tlsServerCertPath).name}; client certificates: {auth}; "
                f"servers checked: {'yes' if self.tlsClientAuthServer else 'NO'})")


_client: ssl.SSLContext | None = None
_client_cert = False


def use_client(ctx: ssl.SSLContext | None, with_cert: bool = False) -> None:
    """Set this process's client side (None: plain text); ``with_cert``: it presents a certificate."""
    global _client, _client_cert
    _client, _client_cert = ctx, with_cert and ctx is not None


def closed_hint() -> str:
    """What may explain a server that closed the connection without a word (a TLS mismatch looks so)."""
    if _client is None:
        return " (if TLS is on there, give its CA: mqctl --tls-ca FILE)"
    if not _client_cert:
        return " (if it requires client certificates, give one: mqctl --tls-cert FILE --tls-key FILE)"
    return " (is TLS on there, and does it trust this client's certificate?)"


def client_tls() -> ssl.SSLContext | None:
    return _client


def scheme() -> str:
    return "https" if _client is not None else "http"


def ws_scheme() -> str:
    return "wss" if _client is not None else "ws"


def httpx_verify() -> ssl.SSLContext | bool:
    """httpx's ``verify=``: the context when TLS is on (plain URLs never use it)."""
    return _client if _client is not None else True


def server_hostname(host: str) -> str | None:
    """What a client names in its handshake (checked against the certificate): the host it dialled."""
    return host.strip("[]") if _client is not None else None


def handshake_reason(exc: BaseException) -> str:
    """A failed handshake in words an operator can act on."""
    reason = _ssl_reason(exc)
    text = str(exc)
    if isinstance(exc, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in text:
        detail = getattr(exc, "verify_message", "") or reason
        return (f"the server's certificate was not accepted ({detail}): give the CA that signed it "
                "(mqctl --tls-ca, tls.client.trustCertPath)")
    if "WRONG_VERSION_NUMBER" in text or "wrong version number" in text or "record layer failure" in text:
        return "the server does not speak TLS (is TLS off there?)"
    if "CERTIFICATE_REQUIRED" in text or "certificate required" in text.lower():
        return "the server requires a client certificate (mqctl --tls-cert/--tls-key, tls.client.certPath)"
    return reason
