"""A CA and certificates for one machine: what ``allot up --tls`` gives its NATS server,
so TLS can be tried without a certificate authority of one's own."""

import datetime
import ipaddress
import os
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from allot.bus.tls import ServerTls

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")  # what a one-machine server is reached as
_VALID = datetime.timedelta(days=825)  # the longest a TLS client accepts for a server
_RENEW = datetime.timedelta(days=30)  # a local certificate closer to its end is made anew
_SIGNS_CERTIFICATES = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


def local_ca(folder: Path) -> ServerTls:
    """A CA and a server certificate for this machine's names under ``folder``, made on
    first use and kept (clients keep trusting the same CA across restarts); the server
    certificate is made anew when it nears its end. Keys are readable by the owner only."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_cert, ca_key = folder / "ca.pem", folder / "ca-key.pem"
    if not ca_cert.exists():
        _write_pair(ca_cert, ca_key, *_authority("Allot local CA"))
    cert, key = folder / "server.pem", folder / "server-key.pem"
    if not cert.exists() or _ends_soon(cert):
        _write_pair(cert, key, *issue(ca_cert, ca_key, "nats-server", LOCAL_NAMES, server=True))
    return ServerTls(ca=str(ca_cert), cert=str(cert), key=str(key))


def issue(
    ca_cert: Path, ca_key: Path, name: str, hosts: tuple[str, ...] = (), *, server: bool
) -> tuple[bytes, bytes]:
    """(certificate, key) as PEM, signed by the CA: for a server reached as ``hosts``, or
    for a client of that ``name``."""
    authority = x509.load_pem_x509_certificate(ca_cert.read_bytes())
    signer = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
    assert isinstance(signer, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    # A server also connects as a client: to the other servers of its cluster, as a route.
    usage = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    usage.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        _builder(name, key.public_key(), issuer=authority.subject)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    )
    if hosts:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_host_name(host) for host in hosts]), critical=False
        )
    certificate = builder.sign(signer, hashes.SHA256())
    return certificate.public_bytes(serialization.Encoding.PEM), _pem(key)


def _authority(name: str) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        _builder(name, key.public_key(), issuer=None)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_SIGNS_CERTIFICATES, critical=True)
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM), _pem(key)


def _builder(name: str, public_key: Any, issuer: x509.Name | None) -> x509.CertificateBuilder:

    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer or subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # clocks a little apart
        .not_valid_after(now + _VALID)
    )


def _host_name(host: str) -> x509.GeneralName:

    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _ends_soon(cert: Path) -> bool:

    certificate = x509.load_pem_x509_certificate(cert.read_bytes())
    return certificate.not_valid_after_utc - datetime.datetime.now(datetime.UTC) < _RENEW


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_pair(cert: Path, key: Path, cert_pem: bytes, key_pem: bytes) -> None:
    """Write the key first, private from its first byte, then the certificate."""
    for path, data, mode in ((key, key_pem, 0o600), (cert, cert_pem, 0o644)):
        partial = path.with_suffix(".partial")
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
        partial.replace(path)
