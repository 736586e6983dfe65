"""The compose broker's password file and ACL: only the replayer publishes the stream.

mosquitto runs with deploy/mosquitto/mosquitto.conf and deploy/mosquitto/acl, and a password
file written by the compose ``mosquitto-passwd`` step itself.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import paho.mqtt.client as paho
import pytest
import structlog

from events import BrokerError, Topics, decode_event
from matchcast.app import run_replay
from matchcast.testbroker import Mosquitto, mosquitto_binary
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import ReplayOptions, resolve_matches
from tests._cli import run_cli
from tests._secure import PASSWORDS, compose_mosquitto

pytestmark = pytest.mark.mosquitto

MATCH = resolve_matches("semifinal")[0]
FAKE = b'{"type": "goal", "scorer": "Nobody", "fake": true}'
NOT_AUTHORIZED = 0x87
NO_SUBSCRIBERS = 0x10


@pytest.fixture(scope="module")
def secured() -> Iterator[Mosquitto]:
    binary = mosquitto_binary()
    assert binary is not None
    broker = compose_mosquitto(binary)
    yield broker
    broker.stop()


def _url(broker: Mosquitto, user: str | None, password: str | None = None) -> BrokerURL:
    return BrokerURL("127.0.0.1", broker.port, username=user, password=password)


def _puback_reason(broker: Mosquitto, user: str, topic: str, payload: bytes) -> int:
    """Publish at QoS 1 over MQTT 5 and return the PUBACK's reason code (paho, blocking)."""
    done = threading.Event()
    codes: list[int] = []
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
    client.username_pw_set(user, PASSWORDS[user])

    def on_publish(_c: object, _u: object, _mid: int, reason: object, _p: object) -> None:
        codes.append(int(reason.value))  # type: ignore[attr-defined]
        done.set()

    client.on_publish = on_publish
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    try:
        client.publish(topic, payload, qos=1).wait_for_publish(timeout=5)
        assert done.wait(5), "no PUBACK"
    finally:
        client.disconnect()
        client.loop_stop()
    return codes[0]


async def test_a_consumers_fake_goal_is_refused_and_never_reaches_other_consumers(
    secured: Mosquitto,
) -> None:
    """A scoreboard publishing a goal gets 0x87 Not authorized and nobody receives it, while
    the replayer's events of the same match all arrive."""
    topics = Topics("matchcast")
    events_topic = topics.events(MATCH.match_id)
    seen: list[bytes] = []
    watcher = MqttClient(_url(secured, "scoreboard", PASSWORDS["scoreboard"]))
    async with watcher:
        await watcher.subscribe(topics.events("+"))

        async def collect() -> None:
            async for message in watcher.messages():
                seen.append(message.payload)
                if b'"full_time"' in message.payload:
                    return

        async with asyncio.TaskGroup() as tg:
            reader = tg.create_task(collect())
            # QoS 1 over MQTT 5: the broker says no in the PUBACK.
            code = await asyncio.to_thread(
                _puback_reason, secured, "scoreboard", events_topic, FAKE
            )
            assert code == NOT_AUTHORIZED
            # QoS 0 and the 3.1.1 path through matchcast's own client: silently dropped.
            async with MqttClient(
                _url(secured, "scoreboard", PASSWORDS["scoreboard"]), protocol="3.1.1"
            ) as intruder:
                await intruder.publish(events_topic, FAKE, qos=0)
                await intruder.publish(events_topic, FAKE, qos=1)
            # Both fakes were handled by the broker before the replay starts: had either been
            # delivered, it would be ahead of the real events in the watcher's queue.
            reports = await run_replay(
                [MATCH],
                _url(secured, "replayer", PASSWORDS["replayer"]),
                ReplayOptions(speed=None, topics=topics),
                replayer_id="acl-test",
            )
            async with asyncio.timeout(20):
                await reader
    assert FAKE not in seen
    assert [decode_event(p).seq for p in seen] == list(range(1, reports[0].last_seq + 1))


def test_a_consumer_may_write_only_under_its_own_consumers_topic(secured: Mosquitto) -> None:
    own = _puback_reason(secured, "scoreboard", "matchcast/consumers/scoreboard/state", b"{}")
    other = _puback_reason(secured, "scoreboard", "matchcast/consumers/replayer/state", b"{}")
    status = _puback_reason(secured, "scoreboard", "matchcast/replayers/x/status", b"{}")
    assert own in (0x00, NO_SUBSCRIBERS)  # accepted: success, or success with nobody listening
    assert (other, status) == (NOT_AUTHORIZED, NOT_AUTHORIZED)


@pytest.mark.parametrize(
    ("user", "password"),
    [(None, None), ("scoreboard", "wrong-password"), ("nobody", "sb-Secret-0815")],
)
async def test_anonymous_and_wrong_passwords_are_refused_at_connect(
    secured: Mosquitto, user: str | None, password: str | None
) -> None:
    with structlog.testing.capture_logs() as logs, pytest.raises(BrokerError) as info:
        async with MqttClient(_url(secured, user, password)):
            pass
    assert "connection refused" in info.value.reason
    assert "authori" in info.value.reason.lower() or "password" in info.value.reason.lower()
    if password:
        assert password not in str(info.value)
        assert password not in repr(logs)


def test_the_cli_reports_a_refused_login_in_one_line_without_the_password(
    secured: Mosquitto, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MATCHCAST_USERNAME", "replayer")
    monkeypatch.setenv("MATCHCAST_PASSWORD", "not-the-Secret-99")
    url = f"mqtt://127.0.0.1:{secured.port}"
    result = run_cli("replay", "--broker", url, "--speed", "max", "--log-format", "json", "-vv")
    assert result.code == 1
    first, *rest = [line for line in result.stderr.splitlines() if not line.startswith("{")]
    assert not rest, result.stderr
    assert first.startswith("error: broker mqtt://replayer:***@127.0.0.1:")
    assert "connection refused" in first
    assert "not-the-Secret-99" not in result.stderr + result.stdout


def test_the_replayer_logs_in_from_the_environment(
    secured: Mosquitto, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the password in $MATCHCAST_PASSWORD, nothing secret is on the command line."""
    monkeypatch.setenv("MATCHCAST_USERNAME", "replayer")
    monkeypatch.setenv("MATCHCAST_PASSWORD", PASSWORDS["replayer"])
    monkeypatch.setenv("MATCHCAST_BROKER", f"mqtt://127.0.0.1:{secured.port}")
    result = run_cli("replay", "--speed", "max", "--root", "matchcast", "--log-format", "json")
    assert result.code == 0, result.stderr
    assert "ARG 2-1 ENG" in result.stdout
    assert PASSWORDS["replayer"] not in result.stderr
    assert os.environ["MATCHCAST_PASSWORD"] == PASSWORDS["replayer"]


def _start_replayer(broker: Mosquitto, replayer_id: str) -> subprocess.Popen[str]:
    """A real ``matchcast replay`` at real-time speed, logged in as the replayer."""
    env = {
        **os.environ,
        "MATCHCAST_USERNAME": "replayer",
        "MATCHCAST_PASSWORD": PASSWORDS["replayer"],
    }
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "matchcast", "replay"),
            *("--broker", f"mqtt://127.0.0.1:{broker.port}", "--speed", "1"),
            *("--replayer", replayer_id, "--log-format", "json"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # ends when the process does
        if "replay.started" in line:
            return proc
    proc.wait(timeout=10)
    raise AssertionError(f"the replayer did not start (exit {proc.returncode})")


def test_only_an_operator_controls_a_replayer_and_a_consumers_command_is_refused(
    secured: Mosquitto, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker refuses a scoreboard's command (PUBACK 0x87), so it never reaches the
    replayer; an operator's commands are answered, and ``stop`` ends the replay."""
    proc = _start_replayer(secured, "acl-control")
    url = f"mqtt://127.0.0.1:{secured.port}"
    try:
        monkeypatch.setenv("MATCHCAST_USERNAME", "scoreboard")
        monkeypatch.setenv("MATCHCAST_PASSWORD", PASSWORDS["scoreboard"])
        refused = run_cli("control", "pause", "--broker", url)
        assert refused.code == 1
        assert "refused the command: Not authorized (0x87)" in refused.stderr
        monkeypatch.setenv("MATCHCAST_USERNAME", "operator")
        monkeypatch.setenv("MATCHCAST_PASSWORD", PASSWORDS["operator"])
        status = run_cli("control", "status", "--broker", url)
        assert status.code == 0, status.stderr
        assert status.stdout.startswith("acl-control: playing at speed 1;")  # not paused
        outside = run_cli("control", "seek", "100", "--broker", url)
        assert outside.code == 1
        assert "minute 100 is past the end: the last minute played in" in outside.stderr
        bad = run_cli("control", "seek", "soon", "--broker", url)
        assert (bad.code, "written like 60 or 90+2" in bad.stderr) == (2, True)
        paused = run_cli("control", "pause", "--replayer", "acl-control", "--broker", url)
        assert paused.code == 0, paused.stderr
        assert "acl-control: paused at speed 1; wc2026-sf-arg-eng " in paused.stdout
        stopped = run_cli("control", "stop", "--broker", url)
        assert stopped.code == 0, stopped.stderr
        assert proc.wait(timeout=20) == 0  # stop ended the replay, cleanly
        missing = run_cli("control", "status", "--broker", url)
        assert (missing.code, "no replayer is online" in missing.stderr) == (1, True)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)  # and close the pipes
