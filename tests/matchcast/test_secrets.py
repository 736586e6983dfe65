"""No secret in any output: reports, CSV, charts, logs and error messages of a load run with
the broker password in its URL, files written owner-only; the redaction rules themselves."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from matchcast import redact
from matchcast.testbroker import REQUIRE_ENV, Mosquitto, mosquitto_binary
from tests._require import require
from tests._secure import PASSWORDS, compose_mosquitto

SECRET = PASSWORDS["replayer"]


@pytest.fixture
def remembered() -> Iterator[None]:
    yield
    redact.forget_all()


def test_argv_loses_secret_options_and_url_passwords(remembered: None) -> None:
    argv = [
        "load",
        "--broker",
        "mqtt://u:hunter22@h:1883",
        "--password",
        "p4ssw0rd!",
        "--key-password=kp-0815",
        "--matches",
        "5",
    ]
    assert redact.redact_argv(argv) == [
        "load",
        "--broker",
        "mqtt://u:***@h:1883",
        "--password",
        "***",
        "--key-password=***",
        "--matches",
        "5",
    ]


def test_remembered_secrets_are_masked_anywhere(remembered: None) -> None:
    redact.remember("s3cr3t-value")
    redact.remember("123")  # too short to search for in free text: figures would suffer
    assert redact.redact("auth failed for s3cr3t-value (123 ms)") == "auth failed for *** (123 ms)"
    assert redact.redact_data({"a": ["x s3cr3t-value"], "s3cr3t-value": 1}) == {
        "a": ["x ***"],
        "***": 1,
    }


def test_private_files_are_owner_only_even_if_they_existed(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("old")
    path.chmod(0o644)
    redact.write_private(path, "{}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == "{}"


@pytest.fixture(scope="module")
def secured() -> Iterator[Mosquitto]:
    binary = mosquitto_binary()
    require(binary, "mosquitto", REQUIRE_ENV, "apt-get install mosquitto")
    assert binary is not None
    broker = compose_mosquitto(binary)
    yield broker
    broker.stop()


def _load(
    broker: Mosquitto, out: Path, *extra: str, in_env: bool = False
) -> subprocess.CompletedProcess[str]:
    """``matchcast load`` as the replayer, the password in the URL or in the environment."""
    url = f"mqtt://replayer{'' if in_env else ':' + SECRET}@127.0.0.1:{broker.port}"
    return subprocess.run(
        [
            sys.executable,
            *("-m", "matchcast", "load", "--broker", url, "--root", "matchcast"),
            *("--matches", "2", "--subscribers", "1", "--speed", "max", "--no-progress"),
            *("--report", str(out / "r.json"), "--csv", str(out / "r.csv")),
            *("--chart", str(out / "r.png"), "-vv", "--log-format", "json", *extra),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "MATCHCAST_BROKER": "", "MATCHCAST_PASSWORD": SECRET if in_env else ""},
        timeout=180,
        check=False,
        cwd=out,
    )


@pytest.mark.mosquitto
@pytest.mark.slow
@pytest.mark.parametrize(("workers", "in_env"), [(1, False), (2, False), (2, True)])
def test_a_load_run_with_a_password_in_the_url_writes_it_nowhere(
    secured: Mosquitto, tmp_path: Path, workers: int, in_env: bool
) -> None:
    """Report, CSV, chart, standard output, the logs (-vv) and the broker's own log: the
    password (in the URL, or in $MATCHCAST_PASSWORD) is in none of them; files are 0600."""
    result = _load(secured, tmp_path, "--workers", str(workers), in_env=in_env)
    assert result.returncode == 0, result.stderr[-3000:]
    files = sorted(tmp_path.iterdir())
    assert {f.name for f in files} >= {"r.json", "r.csv", "r.png"}
    for f in files:
        assert SECRET.encode() not in f.read_bytes(), f.name
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f.name
    assert SECRET not in result.stdout + result.stderr
    assert "mqtt://replayer:***@127.0.0.1" in (tmp_path / "r.json").read_text()
    assert SECRET not in secured.log_path.read_text()


@pytest.mark.mosquitto
def test_a_refused_password_is_not_in_the_error(secured: Mosquitto, tmp_path: Path) -> None:
    url = f"mqtt://replayer:wrong-{SECRET}@127.0.0.1:{secured.port}"
    result = subprocess.run(
        [sys.executable, "-m", "matchcast", "load", "--broker", url, "--no-progress", "-vv"],
        capture_output=True,
        text=True,
        env={**os.environ, "MATCHCAST_BROKER": ""},
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "error" in result.stderr
    assert SECRET not in result.stdout + result.stderr


def _fail_with(message: str) -> None:
    raise RuntimeError(message)


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_log_lines_and_their_tracebacks_hold_no_secret(fmt: str, remembered: None) -> None:
    import io
    import logging

    import structlog

    from matchcast.logs import configure_logging

    redact.remember("tb-Secret-77")
    config, root = structlog.get_config(), logging.getLogger()
    handlers, level = root.handlers[:], root.level
    out = io.StringIO()
    try:
        configure_logging(fmt, "INFO", stream=out)  # type: ignore[arg-type]
        log = structlog.get_logger()
        log.warning("x.failed", url="mqtt://u:tb-Secret-77@h:1")
        try:
            _fail_with("cannot log in with tb-Secret-77")
        except RuntimeError:
            log.exception("y.failed")
    finally:
        structlog.configure(**config)
        root.handlers[:] = handlers
        root.setLevel(level)
    text = out.getvalue()
    assert "x.failed" in text and "y.failed" in text and "RuntimeError" in text
    assert "tb-Secret-77" not in text


def test_the_stdlib_filter_redacts_library_log_records(remembered: None) -> None:
    import io
    import logging

    redact.remember("lib-Secret-88")
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(redact.RedactFilter())
    logger = logging.getLogger("tests.redact.paho")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("login %s refused at %s", "lib-Secret-88", "mqtt://u:pw12345@h")
    finally:
        logger.removeHandler(handler)
    assert out.getvalue() == "login *** refused at mqtt://u:***@h\n"
