"""mqtts:// against mosquitto with a TLS listener and a throwaway CA made in the test."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from events import BrokerError
from matchcast.app import mqtt_client
from matchcast.testbroker import Mosquitto, mosquitto_binary
from matchcast.transport.connection import BrokerURL, TLSOptions
from tests._cli import run_cli
from tests._factories import SEMIFINAL_EVENTS
from tests._secure import Certs, make_certs, tls_mosquitto

pytestmark = pytest.mark.mosquitto


@pytest.fixture(scope="module")
def certs() -> Iterator[Certs]:
    # Not tmp_path: its parents are private to root, and mosquitto reads as its own user.
    directory = Path(tempfile.mkdtemp(prefix="mc-certs-"))
    directory.chmod(0o755)
    yield make_certs(directory)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_broker(certs: Certs) -> Iterator[Mosquitto]:
    binary = mosquitto_binary()
    assert binary is not None
    broker = tls_mosquitto(binary, certs)
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def mtls_broker(certs: Certs) -> Iterator[Mosquitto]:
    """Wants a client certificate signed by the CA as well."""
    binary = mosquitto_binary()
    assert binary is not None
    broker = tls_mosquitto(binary, certs, require_certificate=True)
    yield broker
    broker.stop()


def _replay(broker: Mosquitto, *args: str) -> tuple[int, str, str]:
    result = run_cli(
        "replay",
        "--broker",
        f"mqtts://127.0.0.1:{broker.port}",
        "--speed",
        "max",
        "--log-format",
        "json",
        *args,
    )
    return result.code, result.stdout, result.stderr


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith("{")]


def test_replay_over_tls_with_the_ca_file(tls_broker: Mosquitto, certs: Certs) -> None:
    code, out, err = _replay(tls_broker, "--ca-file", str(certs.ca))
    assert code == 0, err
    assert "wc2026-sf-arg-eng: ARG 2-1 ENG" in out


def test_the_ca_file_may_come_from_the_environment(
    tls_broker: Mosquitto, certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MATCHCAST_CA_FILE", str(certs.ca))
    code, out, err = _replay(tls_broker)
    assert code == 0, err


def test_without_the_ca_the_broker_is_not_trusted_in_one_line(tls_broker: Mosquitto) -> None:
    code, _, err = _replay(tls_broker)
    assert code == 1
    lines = _error_lines(err)
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: broker mqtts://127.0.0.1:{tls_broker.port}: ")
    assert "certificate verify failed" in lines[0]
    assert "--ca-file" in lines[0]


def test_tls_insecure_connects_and_warns_loudly(tls_broker: Mosquitto) -> None:
    code, out, err = _replay(tls_broker, "--tls-insecure")
    assert code == 0, err
    assert '"event": "tls.insecure"' in err
    assert '"level": "warning"' in err
    assert any(line.startswith("warning: --tls-insecure") for line in err.splitlines())


def test_tls_to_a_plain_port_is_one_line_with_a_hint(mosquitto: Mosquitto) -> None:
    result = run_cli("replay", "--broker", f"mqtts://127.0.0.1:{mosquitto.port}", "--speed", "max")
    assert result.code == 1
    lines = _error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert "is this port TLS?" in lines[0]


async def test_a_client_certificate_is_presented_where_the_broker_wants_one(
    mtls_broker: Mosquitto, certs: Certs, client_kind: str
) -> None:
    base = BrokerURL.parse(f"mqtts://127.0.0.1:{mtls_broker.port}")
    with_cert = base.with_tls(
        TLSOptions(ca_file=certs.ca, cert_file=certs.client_cert, key_file=certs.client_key)
    )
    async with mqtt_client(client_kind, with_cert) as client:
        await client.publish("mctest/tls", b"{}", qos=1)
    without = base.with_tls(TLSOptions(ca_file=certs.ca))
    with pytest.raises(BrokerError):
        # TLS 1.3 finishes the handshake before the broker checks: it then hangs up.
        async with mqtt_client(client_kind, without, connect_timeout=2):
            pass


def test_the_cli_takes_the_client_certificate(mtls_broker: Mosquitto, certs: Certs) -> None:
    code, out, err = _replay(
        mtls_broker,
        "--ca-file",
        str(certs.ca),
        "--cert-file",
        str(certs.client_cert),
        "--key-file",
        str(certs.client_key),
    )
    assert code == 0, err


@pytest.mark.parametrize("client", ["fast", "aiomqtt"])
def test_load_over_tls_with_the_ca_file(
    tls_broker: Mosquitto, certs: Certs, tmp_path: Path, client: str
) -> None:
    import json

    report = tmp_path / "r.json"
    result = run_cli(
        "load", "--broker", f"mqtts://127.0.0.1:{tls_broker.port}", "--ca-file", str(certs.ca),
        "--client", client, "--matches", "2", "--subscribers", "1", "--speed", "max",
        "--report", str(report), "--log-format", "json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    figures = json.loads(report.read_text())
    assert figures["parameters"]["client"] == client
    assert figures["delivery"]["expected"] == 2 * SEMIFINAL_EVENTS
    assert figures["delivery"]["received"] == figures["delivery"]["expected"]
    assert figures["delivery"]["lost"] == 0


def test_load_without_the_ca_is_one_clear_line(tls_broker: Mosquitto) -> None:
    result = run_cli(
        "load", "--broker", f"mqtts://127.0.0.1:{tls_broker.port}", "--matches", "1",
        "--subscribers", "1", "--speed", "max", "--log-format", "json",
    )  # fmt: skip
    assert result.code != 0
    assert "Traceback" not in result.stderr
