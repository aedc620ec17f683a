"""tls init / tls cert: a private CA and the certificates a cluster needs to run with TLS on
(docs/security.md). For tests and for clusters whose operators have no CA of their own."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import click
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mqctl.app import App, pass_app
from services.common.durable import atomic_write
from services.common.errors import UsageError

DEFAULT_HOSTS = ("127.0.0.1", "localhost", "::1")
#: What ``tls init`` writes, by role: (certificate, key).
SERVER, CLIENT, CA = ("server.pem", "server.key"), ("client.pem", "client.key"), ("ca.pem", "ca.key")


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mqctl"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _alt_names(hosts: list[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(h.strip().strip("[]") for h in hosts if h.strip()):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if not all(part and (part.isalnum() or "-" in part or part == "*") for part in host.split(".")):
                raise UsageError(f"--host {host!r} is neither an IP address nor a DNS name") from None
            names.append(x509.DNSName(host))
    return names


def _write(path: Path, data: bytes, private: bool = False) -> None:
    atomic_write(path, data, 0o600 if private else 0o644)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _issue(ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, common: str, days: int,
           hosts: list[str] | None, client: bool) -> tuple[bytes, bytes]:
    """A leaf certificate signed by the CA: a server's (for ``hosts``) or a client's."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (x509.CertificateBuilder().subject_name(_name(common)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName(_alt_names(hosts)), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _make_ca(days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = _name("mqctl test CA")
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def _load_ca(folder: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    try:
        cert = x509.load_pem_x509_certificate((folder / CA[0]).read_bytes())
        key = serialization.load_pem_private_key((folder / CA[1]).read_bytes(), password=None)
    except FileNotFoundError as exc:
        raise UsageError(f"no CA in {folder} ({exc.filename} is missing): run mqctl tls init {folder} first") from None
    except ValueError as exc:
        raise UsageError(f"the CA in {folder} cannot be read: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise UsageError(f"{folder / CA[1]} is not a key mqctl tls init made")
    return cert, key


def _properties(folder: Path, mutual: bool) -> str:
    d = folder.resolve()
    lines = ["# TLS for an mqctl node: tls.config.file=<this file> in a controller's or broker's .conf",
             "tls.server.mode=enforcing", f"tls.server.certPath={d / SERVER[0]}", f"tls.server.keyPath={d / SERVER[1]}",
             f"tls.server.trustCertPath={d / CA[0]}", f"tls.server.need.client.auth={'require' if mutual else 'none'}",
             f"tls.client.trustCertPath={d / CA[0]}"]
    if mutual:
        lines += [f"tls.client.certPath={d / CLIENT[0]}", f"tls.client.keyPath={d / CLIENT[1]}"]
    return "\n".join(lines) + "\n"


hosts_option = click.option("--host", "hosts", multiple=True, metavar="HOST",
                            help="An address or DNS name the servers are reached at (repeat; 127.0.0.1, localhost "
                                 "and ::1 are always included).")
days_option = click.option("--days", type=click.IntRange(1, 3650), default=365, show_default=True,
                           help="How long the certificates are valid.")


@click.group("tls")
def tls_group() -> None:
    """Make a private CA and certificates for a cluster with TLS on (docs/security.md)."""


@tls_group.command("init")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@hosts_option
@days_option
@click.option("--mutual/--no-mutual", default=False, show_default=True,
              help="Nodes require client certificates (mutual TLS) in the tls.properties written.")
@click.option("--force", is_flag=True, help="Replace a CA already in FOLDER.")
@pass_app
def tls_init(app: App, folder: Path, hosts: tuple[str, ...], days: int, mutual: bool, force: bool) -> None:
    """Write a new CA, a server certificate for every --host, a client certificate and a tls.properties
    for tls.config.file into FOLDER. Keys are written readable by their owner only.

    \b
    Examples:
      mqctl tls init ./tls --host 10.0.0.11 --host 10.0.0.12 --host 10.0.0.13
      mqctl --tls-ca ./tls/ca.pem getControllerMetaData -a 10.0.0.11:9878
    """
    if (folder / CA[1]).exists() and not force:
        raise UsageError(f"{folder / CA[1]} exists: a new CA would leave every certificate it signed untrusted "
                         "(--force replaces it; mqctl tls cert issues more certificates from it)")
    folder.mkdir(parents=True, exist_ok=True)
    alt = _alt_names([*DEFAULT_HOSTS, *hosts])  # checked before anything is written
    ca_cert, ca_key = _make_ca(days)
    _write(folder / CA[1], _key_pem(ca_key), private=True)
    _write(folder / CA[0], ca_cert.public_bytes(serialization.Encoding.PEM))
    for (cert_file, key_file), common, names, client in ((SERVER, "mqctl node", [*DEFAULT_HOSTS, *hosts], False),
                                                         (CLIENT, "mqctl client", None, True)):
        cert, key = _issue(ca_cert, ca_key, common, days, names, client)
        _write(folder / key_file, key, private=True)
        _write(folder / cert_file, cert)
    _write(folder / "tls.properties", _properties(folder, mutual).encode())
    app.info(f"wrote {CA[0]}, {SERVER[0]} ({len(alt)} names), {CLIENT[0]}, their keys and tls.properties "
             f"to {folder}; add tls.config.file={(folder / 'tls.properties').resolve()} to each node's .conf and "
             f"run mqctl with --tls-ca {folder / CA[0]}")


@tls_group.command("cert")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.argument("name")
@hosts_option
@days_option
@click.option("--client", is_flag=True, help="A client certificate (for mutual TLS) instead of a server's.")
@pass_app
def tls_cert(app: App, folder: Path, name: str, hosts: tuple[str, ...], days: int, client: bool) -> None:
    """Issue NAME.pem and NAME.key from the CA in FOLDER: a node's own server certificate for its
    --host addresses, or with --client a client certificate.

    \b
    Examples:
      mqctl tls cert ./tls n1 --host 10.0.0.11
      mqctl tls cert ./tls ops-laptop --client
    """
    if not name.replace("-", "").replace("_", "").isalnum():
        raise UsageError(f"NAME {name!r}: letters, digits, '-' and '_' only (it names the files)")
    if not client and not hosts:
        raise UsageError("a server certificate needs at least one --host (the address clients dial)")
    ca_cert, ca_key = _load_ca(folder)
    cert, key = _issue(ca_cert, ca_key, name, days, None if client else list(hosts), client)
    _write(folder / f"{name}.key", key, private=True)
    _write(folder / f"{name}.pem", cert)
    app.info(f"wrote {name}.pem and {name}.key to {folder}")


COMMANDS = [tls_group]
