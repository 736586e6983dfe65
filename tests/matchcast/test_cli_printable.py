"""``clear`` and ``control`` print what a broker sent them (topics, replayer ids, replies,
reasons) through ``printable``: a terminal control or a bidi override in it is shown, never
obeyed."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from events import ControlReply, MatchPlayback, Topics
from matchcast.app.control import ControlError
from matchcast.app.retained import RetainedScan, RetainedTopic
from matchcast.testbroker import Mosquitto
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from tests._cli import run_cli

#: What a hostile publisher puts in: clear the screen, set the window title, ring the bell,
#: and turn the rest of the line around (U+202E, which a replayer id may hold).
HOSTILE = "\x1b[2J\x1b]0;pwned\x07\u202e"
SHOWN = "\\x1b[2J\\x1b]0;pwned\\x07\\u202e"


def _obeys_nothing(text: str) -> None:
    assert not any(c in text for c in "\x1b\x07\u202e"), repr(text)


def _status(replayer_id: str, status: str) -> bytes:
    return json.dumps(
        {
            "status": status,
            "replayer_id": replayer_id,
            "matches": ["m1"],
            "at": "2026-07-15T19:00:00Z",
        }
    ).encode()


async def _retain(url: BrokerURL, topic: str, payload: bytes) -> None:
    async with MqttClient(url) as client:
        await client.publish(topic, payload, qos=1, retain=True)


@pytest.fixture
def root() -> str:
    return f"mctest-{uuid.uuid4().hex[:10]}"


@pytest.mark.mosquitto
def test_clear_shows_a_bidi_override_in_a_replayer_status_as_an_escape(
    mosquitto: Mosquitto, root: str
) -> None:
    """The replayer id is one topic level without C0 controls, yet may hold U+202E: in the
    status topic clear lists and in the summary of it."""
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    rid = "r\u202eevil"
    asyncio.run(_retain(url, topics.status(rid), _status(rid, "offline")))
    result = run_cli("clear", "--broker", mosquitto.url, "--root", root, "--yes")
    assert result.code == 0, result.stderr
    _obeys_nothing(result.stdout)
    assert f"clear  {root}/replayers/r\\u202eevil/status  (replayer r\\u202eevil" in result.stdout


def test_clear_shows_controls_in_topics_and_reasons_as_escapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A topic a wildcard scan found and a node's reason for not answering, as they come."""
    node, down = BrokerURL("127.0.0.1", 1), BrokerURL("127.0.0.1", 2)
    found = [
        RetainedTopic(
            f"r/matches/{HOSTILE}/state", "state", HOSTILE, "state: unreadable", node=node
        ),
        RetainedTopic(
            f"r/replayers/{HOSTILE}/status",
            "status",
            None,
            f"replayer {HOSTILE} offline: m1",
            matches=("m1",),
            listed=5000,
            node=node,
        ),
    ]

    async def scan(*_args: object, **_kwargs: object) -> RetainedScan:
        return RetainedScan(found, {down: f"refused: {HOSTILE}"})

    monkeypatch.setattr("matchcast.app.retained.scan_retained", scan)
    result = run_cli("clear", "--broker", f"{node},{down}", "--root", "r")
    assert result.code == 2  # no --yes, no terminal: it lists and asks nothing
    _obeys_nothing(result.stdout)
    assert f"clear  r/matches/{SHOWN}/state  (state: unreadable)" in result.stdout
    assert f"r/replayers/{SHOWN}/status lists 5000 matches" in result.stdout
    assert f"not searched: {down} (refused: {SHOWN})" in result.stdout


@pytest.mark.mosquitto
def test_control_shows_the_online_replayers_it_lists_as_escapes(
    mosquitto: Mosquitto, root: str
) -> None:
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    for rid in ("a\u202e", "b\u202e"):
        asyncio.run(_retain(url, topics.status(rid), _status(rid, "online")))
    try:
        result = run_cli("control", "pause", "--broker", mosquitto.url, "--root", root)
    finally:
        for rid in ("a\u202e", "b\u202e"):
            asyncio.run(_retain(url, topics.status(rid), b""))
    assert result.code == 2
    _obeys_nothing(result.stderr)
    assert "pick one with --replayer: a\\u202e, b\\u202e" in " ".join(result.stderr.split())


def test_control_shows_a_hostile_reply_and_refusal_as_escapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reply's replayer id is any string the answering client wrote; so is its error."""
    playback = MatchPlayback.model_validate(
        {
            "match_id": "m1",
            "state": "paused",
            "speed": 60,
            "run": 1,
            "last_seq": 3,
            "since": "2026-07-15T19:00:00Z",
        }
    )
    reply = ControlReply(
        request_id="q1",
        ok=True,
        replayer_id=HOSTILE,
        state="paused",
        speed=60,
        matches=[playback],
    )
    answers: list[ControlReply | ControlError] = [
        reply,
        ControlError(f"replayer 'r1' refused pause: {HOSTILE}"),
    ]

    async def send(*_args: object, **_kwargs: object) -> ControlReply:
        answer = answers.pop(0)
        if isinstance(answer, ControlError):
            raise answer
        return answer

    monkeypatch.setattr("matchcast.cli.control.send_command", send)
    said = run_cli("control", "pause", "--broker", "mqtt://127.0.0.1:1")
    assert said.code == 0, said.stderr
    _obeys_nothing(said.stdout)
    assert f"{SHOWN}: paused at speed 60; m1 before kickoff paused" in said.stdout
    refused = run_cli("control", "pause", "--broker", "mqtt://127.0.0.1:1")
    assert refused.code == 1
    _obeys_nothing(refused.stderr)
    assert f"refused pause: {SHOWN}" in " ".join(refused.stderr.split())
