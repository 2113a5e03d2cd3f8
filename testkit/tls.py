"""A certificate authority made for one test, and the PEM files a TLS broker and its clients
need: the CA's certificate, the broker's key and certificate (for 127.0.0.1) and a client's."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path


def make_ca(folder: Path) -> dict[str, Path]:
    """``ca``, ``cert``/``key`` (the broker's) and ``client_cert``/``client_key`` in ``folder``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)

    def name(common: str):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def signed(subject: str, key, issuer_key, issuer: str, ca: bool, sans: list | None = None):
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    def write(path: Path, data: bytes) -> Path:
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def key_pem(key) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = signed("lakehouse test CA", ca_key, ca_key, "lakehouse test CA", ca=True)
    files = {"ca": write(folder / "ca.pem", ca.public_bytes(serialization.Encoding.PEM))}
    for role, subject, sans in (
        (
            "",
            "127.0.0.1",
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")],
        ),
        ("client_", "lakehouse client", None),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = signed(subject, key, ca_key, "lakehouse test CA", ca=False, sans=sans)
        files[f"{role}cert"] = write(
            folder / f"{role or 'broker_'}cert.pem", cert.public_bytes(serialization.Encoding.PEM)
        )
        files[f"{role}key"] = write(folder / f"{role or 'broker_'}key.pem", key_pem(key))
    return files
