"""docker-compose.yml is wired right. No Docker engine runs here, so the file is checked
statically: services, broker address, mounted config, credentials and ACL, and that the commands
parse. What the ACL allows is shown against a real mosquitto in tests/matchcast/test_broker_acl.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from matchcast.cli import app
from matchcast.testbroker import REQUIRE_ENV, Mosquitto, mosquitto_binary
from tests._require import MONITORING_ENV, require
from tests._secure import PASSWORDS, compose_config, compose_mosquitto, write_password_file

ROOT = Path(__file__).resolve().parent.parent


def _compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_broker_replayer_and_scoreboard() -> None:
    """Four services by default; Prometheus and Grafana only in the monitoring profile."""
    services = _compose()["services"]
    default = {name for name, svc in services.items() if "profiles" not in svc}
    assert default == {"mosquitto-passwd", "mosquitto", "replayer", "scoreboard"}
    assert set(services) - default == {"prometheus", "grafana"}
    assert services["mosquitto"]["image"].startswith("eclipse-mosquitto:2")
    assert services["mosquitto-passwd"]["image"] == services["mosquitto"]["image"]


def test_the_mosquitto_config_is_present_and_mounted() -> None:
    mosq = _compose()["services"]["mosquitto"]
    host_path, container_path, *_ = mosq["volumes"][0].split(":")
    assert (ROOT / host_path).is_file()
    assert container_path == "/mosquitto/config/mosquitto.conf"
    conf = (ROOT / host_path).read_text()
    assert "listener 1883" in conf
    assert "set_tcp_nodelay true" in conf
    assert mosq["ports"] == ["127.0.0.1:1883:1883"]


def test_the_broker_wants_a_password_and_applies_the_acl() -> None:
    """Anonymous clients are refused; the password file comes from the mosquitto-passwd
    service through a shared volume, the ACL from the repository."""
    services = _compose()["services"]
    mosq = services["mosquitto"]
    conf = (ROOT / "deploy/mosquitto/mosquitto.conf").read_text().splitlines()
    assert "allow_anonymous false" in conf
    assert "password_file /mosquitto/auth/passwd" in conf
    assert "acl_file /mosquitto/config/acl" in conf
    assert "./deploy/mosquitto/acl:/mosquitto/config/acl:ro" in mosq["volumes"]
    assert "mosquitto-auth:/mosquitto/auth:ro" in mosq["volumes"]
    assert "mosquitto-auth:/mosquitto/auth" in services["mosquitto-passwd"]["volumes"]
    assert mosq["depends_on"]["mosquitto-passwd"]["condition"] == "service_completed_successfully"
    assert "mosquitto-auth" in _compose()["volumes"]
    # The healthcheck logs in too (anonymous would be refused).
    assert "-u healthcheck" in " ".join(mosq["healthcheck"]["test"])


def test_the_password_file_is_written_without_a_password_in_any_arguments() -> None:
    """printf (a shell builtin) writes the plain file, mosquitto_passwd -U hashes it in place."""
    step = _compose()["services"]["mosquitto-passwd"]["command"][0]
    assert step.startswith("umask 077 && printf ")
    assert "mosquitto_passwd -U /mosquitto/auth/passwd" in step
    assert " -b " not in step


def test_the_acl_lets_only_the_replayer_publish_the_stream() -> None:
    """...and only an operator send a replayer commands (docs/control.md)."""
    acl = [
        line.strip()
        for line in (ROOT / "deploy/mosquitto/acl").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert acl[acl.index("user replayer") + 1] == "topic readwrite matchcast/#"
    operator = acl.index("user operator")
    assert acl[operator + 1 : operator + 3] == [
        "topic read matchcast/#",
        "topic write matchcast/replayers/+/control",
    ]
    writes = [line for line in acl if line.split()[1] in ("readwrite", "write")]
    assert writes == [
        "topic readwrite matchcast/#",
        "topic write matchcast/replayers/+/control",
        "pattern readwrite matchcast/consumers/%u/#",
        "pattern write matchcast/deadletter/%u",
    ]
    assert "pattern read matchcast/#" in acl


def test_clients_reach_the_broker_by_its_service_name_after_it_is_healthy() -> None:
    services = _compose()["services"]
    for name in ("replayer", "scoreboard"):
        svc = services[name]
        assert svc["environment"]["MATCHCAST_BROKER"] == "mqtt://mosquitto:1883"
        assert svc["depends_on"]["mosquitto"]["condition"] == "service_healthy"
        assert svc["build"] == "."


def test_clients_log_in_with_credentials_from_the_environment() -> None:
    """Each client has its own user, and its password is the one the password file gets."""
    services = _compose()["services"]
    passwd_env = services["mosquitto-passwd"]["environment"]
    for name in ("replayer", "scoreboard"):
        env = services[name]["environment"]
        assert env["MATCHCAST_USERNAME"] == name
        assert env["MATCHCAST_PASSWORD"] == passwd_env[f"{name.upper()}_PASSWORD"]
        assert env["MATCHCAST_PASSWORD"].startswith(f"${{MATCHCAST_{name.upper()}_PASSWORD:-")
        assert "@" not in env["MATCHCAST_BROKER"]  # no credentials in the URL
        assert "--broker" not in services[name]["command"]


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
    broker = Mosquitto(binary)
    broker.workdir.chmod(0o777)
    passwd, acl = broker.workdir / "passwd", broker.workdir / "acl"
    write_password_file(passwd, PASSWORDS)
    acl.write_text((ROOT / "deploy/mosquitto/acl").read_text())
    acl.chmod(0o644)
    local = compose_config(broker, passwd, acl)
    broker.config = lambda: local  # type: ignore[method-assign]
    broker.start()
    try:
        assert broker.proc is not None and broker.proc.poll() is None
    finally:
        broker.stop()
    assert "Error" not in broker.log()


@pytest.mark.mosquitto
@pytest.mark.parametrize(("password", "healthy"), [(PASSWORDS["healthcheck"], True), ("x", False)])
def test_the_healthcheck_logs_in_and_reads_the_uptime(password: str, healthy: bool) -> None:
    """The compose healthcheck, run against mosquitto with the compose config and ACL."""
    binary, sub = mosquitto_binary(), shutil.which("mosquitto_sub")
    assert binary is not None
    require(sub, "mosquitto_sub", REQUIRE_ENV, "apt-get install mosquitto-clients")
    check = _compose()["services"]["mosquitto"]["healthcheck"]["test"]
    assert check[0] == "CMD-SHELL"
    broker = compose_mosquitto(binary)
    try:
        script = (
            check[1]
            .replace("$$", "$")
            .replace("mosquitto_sub ", f"{sub} -h 127.0.0.1 -p {broker.port} ", 1)
        )
        env = {**os.environ, "HEALTHCHECK_PASSWORD": password}
        result = subprocess.run(
            ["/bin/sh", "-c", script],
            env=env,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    finally:
        broker.stop()
    assert (result.returncode == 0) is healthy, result.stderr


MONITORING = ("prometheus", "grafana")


def test_monitoring_is_a_profile_listening_on_loopback_only() -> None:
    """On the host's network (so the load process keeps /metrics on 127.0.0.1), each
    listening on 127.0.0.1, with Prometheus scraping the port docs/load.md uses."""
    services = _compose()["services"]
    for name in MONITORING:
        svc = services[name]
        assert svc["profiles"] == ["monitoring"], name
        assert svc["network_mode"] == "host", name
        assert "ports" not in svc, name
    assert "--web.listen-address=127.0.0.1:9090" in services["prometheus"]["command"]
    assert services["grafana"]["environment"]["GF_SERVER_HTTP_ADDR"] == "127.0.0.1"
    scrape = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    targets = {
        job["job_name"]: job["static_configs"][0]["targets"] for job in scrape["scrape_configs"]
    }
    assert targets["matchcast-load"] == ["127.0.0.1:9464"]
    assert "--metrics-port 9464" in (ROOT / "docs/load.md").read_text()
    datasource = (ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text()
    assert "url: http://127.0.0.1:9090" in datasource


def test_the_monitoring_files_mounted_exist() -> None:
    services = _compose()["services"]
    for name in MONITORING:
        for volume in services[name]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), (name, source)
    assert "prometheus-data" in _compose()["volumes"]
    assert (ROOT / "deploy/grafana/dashboards/matchcast-load.json").is_file()


def test_docker_compose_accepts_the_file_with_and_without_the_profile() -> None:
    """``docker-compose config`` (Debian's 1.29 reads profiles) where it is installed."""
    from tests._require import require

    binary = shutil.which("docker-compose")
    require(binary, "docker-compose", MONITORING_ENV, "apt-get install docker-compose")
    assert binary is not None
    for extra in ([], ["--profile", "monitoring"]):
        result = subprocess.run(
            [binary, *extra, "config", "--services"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert {"mosquitto", "prometheus", "grafana"} <= set(result.stdout.split())
