"""One boundary per command: no command, valid or not, ends the replayer; a speed has one range.

``matchcast control speed 5e-324`` was accepted and the replayer then died (a NaN deadline,
``ValueError: cannot convert float NaN to integer``); ``speed 1e-300`` played for ever, and the
page took both. Every speed is now ``max`` or a number from 0.01 to 1,000,000, checked wherever
one enters; and whatever fails while a command is handled costs that command only.

The replayer runs in-process at speed 60 on a clock the test moves by hand, its control
service on an in-memory connection: the listener's real loop, no broker, no wall-clock waits.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from structlog.testing import capture_logs

import events
from events import SPEED_RANGE, ControlReply, Message, MessageProps, Topics, decode_event
from matchcast.app.control import ControlError, make_command
from matchcast.app.replay import ControlService
from matchcast.web._server import _check_command
from simulator import Replayer, ReplayOptions, expand, resolve_matches
from tests._cli import run_cli
from tests._fakes import ManualClock, RecordingPublisher

SEMI = resolve_matches("semifinal")[0]
EVENTS = len(expand(SEMI))
TOPICS = Topics()
EPOCH = dt.datetime(2026, 7, 14, 19, 0, tzinfo=dt.UTC)

#: Speeds out of the range, not finite, subnormal, or not in ASCII digits (as typed).
BAD_SPEEDS = [
    "5e-324",
    "1e-300",
    "0",
    "-0",
    "-1",
    "0.009",
    "1000000.5",
    "1e7",
    "nan",
    "inf",
    "-inf",
    "1e309",
    "\uff14\uff15",  # fullwidth 45
    "\u0664\u0665",  # Arabic-Indic 45
    "\u0967\u0968",  # Devanagari 12
    "1_000",
    "0x10",
    " ",
    "9" * 5000,
]
GOOD_SPEEDS = {"max": None, "MAX": None, "0.01": 0.01, "60": 60.0, "1e6": 1e6, "1000000": 1e6}


@pytest.mark.parametrize("text", BAD_SPEEDS)
def test_a_bad_speed_is_refused_where_it_enters_naming_the_range(text: str) -> None:
    """The text parser (--speed, control speed), the command line, ReplayOptions."""
    with pytest.raises(
        ValueError, match=r"speed must be 'max' or a number from 0\.01 to 1,000,000"
    ):
        events.parse_speed(text)
    with pytest.raises(ControlError) as info:
        make_command("speed", text, None, "r1", "x")
    assert info.value.code == 2
    assert SPEED_RANGE in str(info.value)
    assert len(str(info.value)) < 400  # a long value is quoted cut
    result = run_cli("replay", "--speed", text, "--broker", "mqtt://127.0.0.1:1")
    assert result.code == 2
    assert "--speed must be 'max' or a number from 0.01 to 1,000,000" in result.stderr


@pytest.mark.parametrize(
    "number", [5e-324, 1e-300, 0.0, -1.0, 0.009, 1_000_000.5, float("nan"), float("inf"), True]
)
def test_a_bad_speed_number_is_refused_by_the_page_the_wire_and_the_options(number: Any) -> None:
    """The page's POST /api/control, the command on the control topic, ReplayOptions."""
    problem = _check_command({"command": "speed", "speed": number})
    assert isinstance(problem, str) and SPEED_RANGE in problem
    payload = json.dumps({"request_id": "r1", "command": "speed", "speed": number}).encode()
    with pytest.raises(events.ControlCommandError):
        events.decode_command(payload)
    with pytest.raises(ValueError, match="speed must be"):
        ReplayOptions(speed=number)


@pytest.mark.parametrize(("text", "speed"), list(GOOD_SPEEDS.items()))
def test_the_edges_of_the_range_and_max_are_taken(text: str, speed: float | None) -> None:
    assert events.parse_speed(text) == speed
    assert ReplayOptions(speed=speed).speed == speed
    assert not isinstance(_check_command({"command": "speed", "speed": speed or "max"}), str)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--break-seconds", "nan"),
        ("--break-seconds", "inf"),
        ("--break-seconds", "1e308"),
        ("--break-seconds", "3601"),
        ("--break-seconds", "-1"),
        ("--break-seconds", "\uff12"),
        ("--resend-window", "nan"),
        ("--resend-window", "86401"),
    ],
)
def test_the_other_numbers_of_a_replay_are_finite_and_in_range(option: str, value: str) -> None:
    """``replay --break-seconds nan`` ended the replay with the same NaN deadline."""
    result = run_cli("replay", option, value, "--broker", "mqtt://127.0.0.1:1")
    assert result.code == 2
    assert f"Invalid value for '{option}': must be a number from 0 to" in result.stderr
    field = "break_seconds" if option == "--break-seconds" else "resend_window"
    number = float(value) if value.isascii() else 2.0 * 10**9
    with pytest.raises(ValueError, match="must be a number from 0 to"):
        ReplayOptions(**{field: number})


@pytest.mark.parametrize(
    "minute",
    ["\uff14\uff15", "\u0664\u0665", "\u0967\u0968", "4_5", "45\u0301", "\uff19\uff10+\uff12"],
)
def test_a_minute_in_other_digits_is_refused(minute: str) -> None:
    """``control seek`` with fullwidth digits was accepted: int() reads every digit set."""
    with pytest.raises(ValueError, match="in the digits 0-9"):
        events.parse_minute(minute)
    with pytest.raises(ControlError) as info:
        make_command("seek", minute, None, "r1", "x")
    assert info.value.code == 2
    assert isinstance(_check_command({"command": "seek", "minute": minute}), str)
    payload = json.dumps({"request_id": "r1", "command": "seek", "minute": minute}).encode()
    with pytest.raises(events.ControlCommandError):
        events.decode_command(payload)
    result = run_cli("replay", "--from", minute, "--broker", "mqtt://127.0.0.1:1")
    assert result.code == 2
    assert "--from must be a minute such as 60 or 90+2 in the digits 0-9" in result.stderr


# ---------------------------------------------------------------- the replayer's boundary


class _Connection:
    """The replayer's connection as its control service uses it, in memory."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.replies: list[ControlReply] = []

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        self.replies.append(ControlReply.model_validate_json(payload))

    async def messages(self) -> AsyncIterator[Message]:
        while True:
            yield await self.inbox.get()


class _Replay:
    """The semi-final replaying at speed 60 on a hand-moved clock, with its control service."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.pub = RecordingPublisher(self.clock)  # type: ignore[arg-type]
        self.replayer = Replayer(
            self.pub,
            ReplayOptions(speed=60.0, break_seconds=2.0),
            clock=self.clock,
            wall_now=lambda: EPOCH + dt.timedelta(seconds=self.clock.t),
        )
        self.connection = _Connection()
        self.service = ControlService(
            self.connection,  # type: ignore[arg-type]
            self.replayer,
            "rp",
            TOPICS,
        )
        self.task = asyncio.ensure_future(self.replayer.run(SEMI))
        self.serving = asyncio.ensure_future(self.service.serve())

    def published(self) -> list[int]:
        return [decode_event(p.payload).seq for p in self.pub.sent if p.topic.endswith("/events")]

    async def step(self) -> bool:
        """Let the replay run to its next sleep and move the clock there; False once over."""
        sleeper = asyncio.ensure_future(self.clock.sleeper())
        await asyncio.wait({sleeper, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if not sleeper.done():
            sleeper.cancel()
            return False
        self.clock.advance(sleeper.result())
        return True

    async def until_seq(self, seq: int) -> None:
        async with asyncio.timeout(30):
            while not self.published() or self.published()[-1] < seq:
                assert await self.step()

    async def command(self, request_id: str, **fields: Any) -> ControlReply:
        """Send a command on the control topic; its reply."""
        body = {"request_id": request_id, "reply_to": TOPICS.reply("rp", request_id), **fields}
        self.connection.inbox.put_nowait(
            Message(TOPICS.control("rp"), json.dumps(body).encode(), qos=1)
        )
        async with asyncio.timeout(10):
            while not any(r.request_id == request_id for r in self.connection.replies):
                await asyncio.sleep(0)
        reply = next(r for r in self.connection.replies if r.request_id == request_id)
        if reply.ok and fields["command"] != "status":
            self.clock.mark()  # an applied command wakes the replay: wait for its next sleep
        return reply

    async def finish(self) -> None:
        async with asyncio.timeout(60):
            while await self.step():
                pass
        await self.task
        assert not self.serving.done(), "the control service ended"
        self.serving.cancel()


@pytest.mark.parametrize("speed", [5e-324, 1e-300, 2.2250738585072014e-308, 0.0099])
async def test_a_subnormal_or_tiny_speed_is_refused_and_the_replay_goes_on(speed: float) -> None:
    replay = _Replay()
    await replay.until_seq(5)
    reply = await replay.command("slow", command="speed", speed=speed)
    assert not reply.ok
    assert reply.error is not None and SPEED_RANGE in reply.error
    assert (await replay.command("then", command="status")).ok
    await replay.finish()
    assert replay.published() == list(range(1, EVENTS + 1))
    assert replay.replayer.speed == 60.0


async def test_a_command_that_fails_inside_the_handler_costs_that_command_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failure applying a command, and one building its reply: each is answered with an
    error, logged as control.failed, and the replay plays on to full time."""
    replay = _Replay()
    await replay.until_seq(5)
    real_control = replay.replayer.control
    real_reply = replay.service.reply

    def explode(command: events.ControlCommand) -> str | None:
        if command.request_id == "boom":
            raise RuntimeError("injected")
        return real_control(command)

    def reply_explodes(request_id: str, error: str | None) -> ControlReply:
        if request_id == "no-reply":
            raise RuntimeError("injected in the reply")
        return real_reply(request_id, error)

    monkeypatch.setattr(replay.replayer, "control", explode)
    monkeypatch.setattr(replay.service, "reply", reply_explodes)
    with capture_logs() as logs:
        failed = await replay.command("boom", command="pause")
        unanswered = await replay.command("no-reply", command="status")
        fine = await replay.command("fine", command="speed", speed=120)
    assert (failed.ok, failed.error) == (False, "internal error: RuntimeError")
    assert not unanswered.ok
    assert unanswered.error is not None and "internal error" in unanswered.error
    assert fine.ok and fine.speed == 120.0
    assert len([e for e in logs if e["event"] == "control.failed"]) == 2
    await replay.finish()
    assert replay.published() == list(range(1, EVENTS + 1))


async def test_a_message_on_another_topic_is_not_taken_for_a_command() -> None:
    """A broker that hands the replayer's connection a message it did not subscribe to (amqtt
    gave it another client's retained status) gets no reply and no ``control.rejected``."""
    replay = _Replay()
    await replay.until_seq(3)
    status = b'{"status": "online", "replayer_id": "tv", "matches": [], "at": "2026-01-01T00:00Z"}'
    with capture_logs() as logs:
        replay.connection.inbox.put_nowait(Message(TOPICS.status("tv"), status, qos=0))
        assert (await replay.command("after", command="status")).ok
    assert [r.request_id for r in replay.connection.replies] == ["after"]
    assert not [e for e in logs if e["event"] == "control.rejected"]
    replay.replayer.control(events.ControlCommand(request_id="s", command="stop"))
    await replay.finish()


@pytest.mark.parametrize("minute", ["200", 200, "120+40"])
def test_a_minute_past_play_goes_to_the_replayer_which_knows_the_last_one(
    minute: str | int,
) -> None:
    """The page and ``control`` pass ``seek 200`` on: the replayer answers with its match's
    last minute played, instead of a "written like 60 or 90+2" that reads as a typo."""
    assert _check_command({"command": "seek", "minute": minute}) == ("seek", str(minute), None)
    command = make_command("seek", str(minute), None, "r1", "x")
    assert command.minute == str(minute)
