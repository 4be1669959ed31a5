"""Certificates for TLS tests, generated with the ``cryptography`` package: a CA, a server certificate for
127.0.0.1/localhost and a client certificate it signed, and a second CA with its own client (which the first CA
does not trust)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Certs:
    """Paths of PEM files.

    Attributes:
        ca: the CA that signed the server and the client certificate.
        server_cert, server_key: the server's (SAN: 127.0.0.1, localhost).
        client_cert, client_key: a client signed by ``ca``.
        rogue_cert, rogue_key: a client signed by another CA.
    """

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_cert: Path
    rogue_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, issuer_key: ec.EllipticCurvePrivateKey,
                 *, ca: bool = False, server: bool = False, client: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
            decipher_only=False), critical=True)
        builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(IPv4Address("127.0.0.1"))]), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    if client:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, cert: x509.Certificate | None = None, key: ec.EllipticCurvePrivateKey | None = None) -> Path:
    if cert is not None:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return path


def make_certs(directory: Path) -> Certs:
    """Generate every certificate into ``directory``."""
    ca_key, other_ca_key = _key(), _key()
    ca = _certificate("loopguard test CA", ca_key, "loopguard test CA", ca_key, ca=True)
    server_key, client_key, rogue_key = _key(), _key(), _key()
    server = _certificate("127.0.0.1", server_key, "loopguard test CA", ca_key, server=True)
    client = _certificate("agent", client_key, "loopguard test CA", ca_key, client=True)
    rogue = _certificate("intruder", rogue_key, "another CA", other_ca_key, client=True)
    return Certs(
        ca=_write(directory / "ca.pem", ca),
        server_cert=_write(directory / "server.pem", server),
        server_key=_write(directory / "server.key", key=server_key),
        client_cert=_write(directory / "client.pem", client),
        client_key=_write(directory / "client.key", key=client_key),
        rogue_cert=_write(directory / "rogue.pem", rogue),
        rogue_key=_write(directory / "rogue.key", key=rogue_key),
    )
