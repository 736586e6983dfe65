"""Brokers that check who connects: mosquitto with the compose password file and ACL, or with
a TLS listener, and the throwaway certificates for it."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from matchcast.testbroker import Mosquitto

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "mosquitto"

#: Passwords for the users of docker-compose.yml, as the test's .env would give them.
PASSWORDS = {
    "replayer": "rp-Secret-4711",
    "scoreboard": "sb-Secret-0815",
    "healthcheck": "hc-Secret-1234",
    "operator": "op-Secret-2468",
}


def compose_passwd_command() -> str:
    """The shell step of the compose ``mosquitto-passwd`` service."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    command: list[str] = compose["services"]["mosquitto-passwd"]["command"]
    return command[0].replace("$$", "$")


def write_password_file(path: Path, passwords: dict[str, str]) -> None:
    """Run the compose service's own step (printf + mosquitto_passwd -U) to write ``path``."""
    script = compose_passwd_command().replace("/mosquitto/auth/passwd", str(path))
    if os.geteuid() != 0:  # mosquitto then runs as us and reads its own file
        script = script.replace(" && chown mosquitto:mosquitto " + str(path), "")
    env = {
        **os.environ,
        "REPLAYER_PASSWORD": passwords["replayer"],
        "SCOREBOARD_PASSWORD": passwords["scoreboard"],
        "HEALTHCHECK_PASSWORD": passwords["healthcheck"],
        "OPERATOR_PASSWORD": passwords["operator"],
    }
    subprocess.run(["/bin/sh", "-c", script], env=env, check=True)


def compose_config(broker: Mosquitto, passwd: Path, acl: Path, extra: str = "") -> str:
    """deploy/mosquitto/mosquitto.conf with this broker's port, files and log."""
    conf = (DEPLOY / "mosquitto.conf").read_text()
    local = (
        conf.replace("listener 1883 0.0.0.0", f"listener {broker.port} 127.0.0.1")
        .replace("log_dest stdout", f"log_dest file {broker.log_path}")
        .replace("/mosquitto/auth/passwd", str(passwd))
        .replace("/mosquitto/config/acl", str(acl))
    )
    assert local != conf
    return local + extra


def compose_mosquitto(binary: str, passwords: dict[str, str] = PASSWORDS) -> Mosquitto:
    """mosquitto started with the compose config, ACL and a password file made like compose
    makes it, on a free loopback port."""
    broker = Mosquitto(binary)
    broker.workdir.chmod(0o777)
    passwd = broker.workdir / "passwd"
    write_password_file(passwd, passwords)
    acl = broker.workdir / "acl"
    acl.write_text((DEPLOY / "acl").read_text())
    acl.chmod(0o644)
    text = compose_config(broker, passwd, acl)
    broker.config = lambda: text  # type: ignore[method-assign]
    return broker.start()


@dataclass(frozen=True)
class Certs:
    """PEM files of a throwaway CA, a server certificate for 127.0.0.1/localhost, and a
    client certificate, all signed by the CA."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def make_certs(directory: Path) -> Certs:
    """Write a CA, a server and a client certificate into ``directory`` (readable by the
    mosquitto user, which the broker drops to)."""
    now = dt.datetime.now(dt.UTC)
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "matchcast test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(
        name: str, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = _key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(ca_key, hashes.SHA256()), key

    server, server_key = leaf(
        "127.0.0.1",
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")],
    )
    client, client_key = leaf("scoreboard", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    certs = Certs(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
    )
    for cert, path in ((ca, certs.ca), (server, certs.server_cert), (client, certs.client_cert)):
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(server_key, certs.server_key)
    _write_key(client_key, certs.client_key)
    for path in (
        certs.ca,
        certs.server_cert,
        certs.server_key,
        certs.client_cert,
        certs.client_key,
    ):
        path.chmod(0o644)  # throwaway test keys; mosquitto reads them as its own user
    return certs


def tls_mosquitto(binary: str, certs: Certs, *, require_certificate: bool = False) -> Mosquitto:
    """mosquitto whose only listener is TLS, with the server certificate of ``certs``."""
    broker = Mosquitto(binary)
    lines = [
        f"cafile {certs.ca}",
        f"certfile {certs.server_cert}",
        f"keyfile {certs.server_key}",
        f"require_certificate {'true' if require_certificate else 'false'}",
    ]
    text = broker.config()  # "listener PORT 127.0.0.1" first: the TLS lines apply to it
    head, _, rest = text.partition("\n")
    tls_text = "\n".join([head, *lines, rest])
    broker.config = lambda: tls_text  # type: ignore[method-assign]
    return broker.start()
