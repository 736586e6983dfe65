"""Credentials and TLS options: where they come from, and that a password is never shown."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import pytest
import structlog

from events import BrokerError
from matchcast.transport.broker import free_port
from matchcast.transport.connection import BrokerURL, TLSOptions, broker_url_from
from matchcast.transport.mqtt import MqttClient
from tests._cli import run_cli

SECRET = "pa55-Word-never-shown"


def test_the_password_is_not_in_the_repr_or_str_of_a_url() -> None:
    url = BrokerURL.parse(f"mqtts://alice:{SECRET}@broker.local")
    assert SECRET not in repr(url)
    assert SECRET not in str(url)
    assert url.password == SECRET
    key = TLSOptions(key_password=SECRET)
    assert SECRET not in repr(key)


def test_credentials_come_from_the_environment() -> None:
    env = {
        "MATCHCAST_BROKER": "mqtt://broker.local:1884",
        "MATCHCAST_USERNAME": "scoreboard",
        "MATCHCAST_PASSWORD": SECRET,
    }
    urls = broker_url_from(None, env)
    assert urls is not None
    (url,) = urls  # one URL: a list of one
    assert (url.host, url.port, url.username, url.password) == (
        "broker.local",
        1884,
        "scoreboard",
        SECRET,
    )


def test_the_url_wins_and_the_environment_fills_in_what_it_leaves_out() -> None:
    env = {"MATCHCAST_USERNAME": "env-user", "MATCHCAST_PASSWORD": SECRET}
    both_list = broker_url_from("mqtt://alice:own@h", env)
    user_only_list = broker_url_from("mqtt://alice@h", env)
    assert both_list is not None and user_only_list is not None
    (both,), (user_only,) = both_list, user_only_list
    assert (both.username, both.password) == ("alice", "own")
    assert (user_only.username, user_only.password) == ("alice", SECRET)


def test_a_password_without_a_user_name_is_a_mistake() -> None:
    with pytest.raises(ValueError, match="no user name") as info:
        broker_url_from("mqtt://h", {"MATCHCAST_PASSWORD": SECRET})
    assert SECRET not in str(info.value)


def test_tls_files_come_from_the_environment(tmp_path: Path) -> None:
    env = {
        "MATCHCAST_CA_FILE": str(tmp_path / "ca.pem"),
        "MATCHCAST_CERT_FILE": str(tmp_path / "c.pem"),
        "MATCHCAST_KEY_FILE": str(tmp_path / "c.key"),
    }
    urls = broker_url_from("mqtts://h", env)
    assert urls is not None
    (url,) = urls
    assert url.tls_options == TLSOptions(
        ca_file=tmp_path / "ca.pem", cert_file=tmp_path / "c.pem", key_file=tmp_path / "c.key"
    )
    # and the command line's options go on top
    flags = TLSOptions(ca_file=tmp_path / "other.pem", insecure=True)
    assert url.with_tls(flags).tls_options.ca_file == tmp_path / "other.pem"
    assert url.with_tls(flags).tls_options.key_file == tmp_path / "c.key"


def test_tls_files_for_a_plain_broker_are_refused_rather_than_ignored() -> None:
    with pytest.raises(ValueError, match="not TLS: use mqtts://"):
        broker_url_from("mqtt://h", {"MATCHCAST_CA_FILE": "/ca.pem"})
    with pytest.raises(ValueError, match="not TLS: use mqtts://"):
        BrokerURL.parse("mqtt://h").with_tls(TLSOptions(insecure=True))


def test_the_default_context_checks_the_certificate_and_the_name() -> None:
    ctx = BrokerURL.parse("mqtts://h").context()
    assert ctx is not None
    assert (ctx.verify_mode, ctx.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert BrokerURL.parse("mqtt://h").context() is None
    insecure = TLSOptions(insecure=True).context()
    assert (insecure.verify_mode, insecure.check_hostname) == (ssl.CERT_NONE, False)


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--ca-file", "/no/such/ca.pem"], "CA file /no/such/ca.pem: No such file"),
        (["--ca-file", "{garbage}"], "expected PEM certificates"),
        (["--cert-file", "/no/such/c.pem"], "certificate file /no/such/c.pem"),
        (["--key-file", "/k.pem"], "without a certificate file"),
    ],
)
def test_bad_tls_files_are_one_line_and_exit_2(
    flags: list[str], needle: str, tmp_path: Path
) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    args = [f.replace("{garbage}", str(garbage)) for f in flags]
    result = run_cli("replay", "--broker", "mqtts://127.0.0.1:1", *args)
    assert result.code == 2
    assert result.stderr.startswith("error: ")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert needle in result.stderr


@pytest.mark.parametrize("command", ["replay", "watch", "consume", "web"])
def test_every_broker_command_takes_the_tls_options(command: str) -> None:
    args = [command, "--broker", "mqtt://127.0.0.1:1", "--ca-file", "/ca.pem"]
    if command == "consume":
        args.insert(1, "scoreboard")
    result = run_cli(*args)
    assert result.code == 2
    assert "not TLS: use mqtts://" in result.stderr


def test_tls_options_without_a_broker_are_refused() -> None:
    result = run_cli("replay", "--tls-insecure", "--port", str(free_port()))
    assert result.code == 2
    assert "need --broker mqtts://" in result.stderr


def test_a_password_on_the_command_line_is_warned_about_and_never_logged() -> None:
    """The CLI points at $MATCHCAST_PASSWORD (ps shows arguments) and the failed connect's
    log lines and error line carry no password."""
    port = free_port()
    result = run_cli(
        "replay",
        "--broker",
        f"mqtt://alice:{SECRET}@127.0.0.1:{port}",
        "--speed",
        "max",
        "--log-format",
        "json",
        "-vv",
    )
    assert result.code == 1
    assert '"event": "credentials.in_arguments"' in result.stderr
    assert "MATCHCAST_PASSWORD" in result.stderr
    assert f"error: broker mqtt://alice:***@127.0.0.1:{port}: cannot connect" in result.stderr
    assert SECRET not in result.stderr + result.stdout


async def test_a_failed_connect_logs_and_raises_without_the_password() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
    url = BrokerURL("127.0.0.1", port, username="alice", password=SECRET)
    with structlog.testing.capture_logs() as logs, pytest.raises(BrokerError) as info:
        async with MqttClient(url, connect_timeout=2):
            pass
    assert SECRET not in str(info.value)
    assert SECRET not in repr(info.value.__cause__)
    assert SECRET not in repr(logs)


async def test_an_unusable_tls_file_in_the_library_is_a_broker_error() -> None:
    url = BrokerURL.parse("mqtts://127.0.0.1:1").with_tls(TLSOptions(ca_file=Path("/no/ca")))
    with pytest.raises(BrokerError, match="CA file /no/ca"):
        MqttClient(url)
