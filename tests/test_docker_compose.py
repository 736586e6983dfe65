"""docker-compose.yml is wired right. No Docker engine runs here, so the file is checked
statically: services, broker address, mounted config, and that the commands parse."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from matchcast.cli import app
from matchcast.testbroker import Mosquitto, mosquitto_binary

ROOT = Path(__file__).resolve().parent.parent


def _compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_broker_replayer_and_scoreboard() -> None:
    services = _compose()["services"]
    assert set(services) == {"mosquitto", "replayer", "scoreboard"}
    assert services["mosquitto"]["image"].startswith("eclipse-mosquitto:2")


def test_the_mosquitto_config_is_present_and_mounted() -> None:
    mosq = _compose()["services"]["mosquitto"]
    host_path, container_path, *_ = mosq["volumes"][0].split(":")
    assert (ROOT / host_path).is_file()
    assert container_path == "/mosquitto/config/mosquitto.conf"
    conf = (ROOT / host_path).read_text()
    assert "listener 1883" in conf
    assert "set_tcp_nodelay true" in conf
    assert mosq["ports"] == ["127.0.0.1:1883:1883"]


def test_clients_reach_the_broker_by_its_service_name_after_it_is_healthy() -> None:
    services = _compose()["services"]
    for name in ("replayer", "scoreboard"):
        svc = services[name]
        assert svc["environment"]["MATCHCAST_BROKER"] == "mqtt://mosquitto:1883"
        assert svc["depends_on"]["mosquitto"]["condition"] == "service_healthy"
        assert svc["build"] == "."


def test_the_dockerfile_installs_the_project_and_runs_the_cli() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for package in ("events", "simulator", "consumers", "matchcast"):
        assert f"COPY {package} ./{package}" in dockerfile
    assert 'ENTRYPOINT ["matchcast"]' in dockerfile
    assert "USER matchcast" in dockerfile


def test_the_service_commands_are_valid_matchcast_commands() -> None:
    runner = CliRunner()
    for name in ("replayer", "scoreboard"):
        command = _compose()["services"][name]["command"]
        # --help after the real arguments: typer parses them all, then prints help and exits 0
        result = runner.invoke(app, [*command, "--help"])
        assert result.exit_code == 0, (name, result.output)


@pytest.mark.mosquitto
def test_mosquitto_accepts_the_compose_config(tmp_path: Path) -> None:
    """The mounted config starts a real mosquitto (on a free loopback port instead of 1883)."""
    binary = mosquitto_binary()
    assert binary is not None
    conf = (ROOT / "deploy/mosquitto/mosquitto.conf").read_text()
    broker = Mosquitto(binary)
    local = conf.replace("listener 1883 0.0.0.0", f"listener {broker.port} 127.0.0.1").replace(
        "log_dest stdout", f"log_dest file {broker.log_path}"
    )
    assert local != conf
    broker.config = lambda: local  # type: ignore[method-assign]
    broker.start()
    try:
        assert broker.proc is not None and broker.proc.poll() is None
    finally:
        broker.stop()
    assert "Error" not in broker.log()
