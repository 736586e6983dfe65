"""Controlling a running replayer: commands, replies and playback state, as wire models.

An operator publishes a :class:`ControlCommand` on ``{root}/replayers/{replayer_id}/control``
(see :class:`events.Topics`). MQTT 3.1.1 has no response topic, so the command names the
topic to answer on in ``reply_to``; the replayer answers there with a :class:`ControlReply`,
and its retained status (:class:`ReplayerStatus`, on ``{root}/replayers/{replayer_id}/status``)
carries the same :class:`MatchPlayback` of each match.

These messages are outside the versioned event schema (like the replayer status): they carry no
``schema_version``. :func:`decode_command` is the one boundary a command crosses: its size is
checked first, then pydantic-core parses it (refusing deep nesting instead of recursing), then
the model validates it; every failure is a :class:`ControlCommandError` that keeps what could
be read of the request id and reply topic, so the replayer can still answer.

Four modules are named control, one per layer a command crosses, so each is read with its
folder: this one is the wire form; simulator/_control.py the playhead a replay moves when it
obeys one; matchcast/app/control.py the sender that waits for the reply; matchcast/cli/control.py
the command line.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError, from_json

from events._clock import END_OF_PLAY, MatchClock, MinutePastPlayError, parse_minute
from events._errors import ControlCommandError, DecodeError
from events._models import MatchId, RunId
from events._numbers import decimal_number
from events._quote import format_validation_error, quote
from events._topics import MAX_REPLAYER_ID, replayer_id_problem

__all__ = [
    "MAX_COMMAND_BYTES",
    "MAX_SPEED",
    "MIN_SPEED",
    "SPEED_RANGE",
    "ControlAction",
    "ControlCommand",
    "ControlReply",
    "MatchPlayback",
    "PlaybackState",
    "ReplayerStatus",
    "RequestId",
    "Speed",
    "check_speed",
    "decode_command",
    "decode_reply",
    "decode_status",
    "encode_control",
    "parse_speed",
]

#: Commands past this size are refused before parsing; a real one is under 300 bytes.
MAX_COMMAND_BYTES = 4096
#: A status past this size is refused before parsing (a replay day of 64 matches with their
#: playback is about 20 kB).
MAX_STATUS_BYTES = 1024 * 1024

ControlAction = Literal["pause", "resume", "seek", "speed", "stop", "status"]
PlaybackState = Literal["playing", "paused", "stopped"]
RequestId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="Chosen by the sender; repeated in the reply. Letters, digits, '_.-'",
    ),
]


def _one_level(value: str) -> str:
    problem = replayer_id_problem(value)
    if problem is not None:
        raise ValueError(f"replayer id {problem}")
    return value


#: A replayer's id: one topic level (``events.replayer_id_problem``), or its topics would be
#: another's or a wildcard.
ReplayerId = Annotated[
    str, Field(min_length=1, max_length=MAX_REPLAYER_ID), AfterValidator(_one_level)
]
#: The slowest speed: a 90-minute match in 150 hours. A slower one never ends in practice
#: (``1e-300``), and a subnormal one (``5e-324``) turned the schedule into NaN.
MIN_SPEED = 0.01
#: The fastest timed speed; faster is ``max``, as fast as the broker takes it.
MAX_SPEED = 1_000_000
#: The one range of a speed, as every error about one says it.
SPEED_RANGE = "'max' or a number from 0.01 to 1,000,000"


#: Match seconds per wall second, or ``"max"``: as fast as the broker takes it. A number on
#: the wire is a JSON number (not a string), finite, from :data:`MIN_SPEED` to
#: :data:`MAX_SPEED`.
def _in_the_range(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """One error naming the range, instead of one per branch of the union."""
    try:
        return handler(value)
    except ValidationError:
        raise PydanticCustomError("speed_range", f"speed must be {SPEED_RANGE}") from None


Speed = Annotated[
    Annotated[
        float,
        Field(
            ge=MIN_SPEED,
            le=MAX_SPEED,
            allow_inf_nan=False,
            strict=True,
            description="Match seconds per wall second",
        ),
    ]
    | Literal["max"],
    WrapValidator(_in_the_range),
]


def check_speed(value: float | None) -> float | None:
    """``value`` if it is a speed (None: ``max``); the one range check of a number.

    Raises:
        ValueError: not a finite number from :data:`MIN_SPEED` to :data:`MAX_SPEED`.
    """
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not MIN_SPEED <= value <= MAX_SPEED  # NaN fails this too
    ):
        raise ValueError(f"speed must be {SPEED_RANGE}, not {quote(value)}")
    return float(value)


def parse_speed(text: str) -> float | None:
    """The speed a person typed: ``max`` (None), or a number in ASCII digits in the range
    (:func:`events.decimal_number`); the one parser of every speed given as text.

    Raises:
        ValueError: anything else, with :data:`SPEED_RANGE` in the message.
    """
    if text.strip().lower() == "max":
        return None
    try:
        return check_speed(decimal_number(text.strip()))
    except ValueError:
        raise ValueError(f"speed must be {SPEED_RANGE}, not {quote(text)}") from None


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ControlCommand(_Frozen):
    """A command to a replayer, on ``{root}/replayers/{replayer_id}/control``.

    ``seek`` needs ``minute``; ``speed`` needs ``speed``. Without ``match`` a command applies
    to every match of the replayer (and to the matches it starts later).
    """

    request_id: RequestId
    command: ControlAction
    reply_to: str | None = Field(
        default=None,
        max_length=512,
        description="Topic to answer on: {root}/replayers/{replayer_id}/replies/{request_id}; "
        "the replayer answers nowhere else",
    )
    match: MatchId | None = Field(default=None, description="Only this match; all when absent")
    minute: str | None = Field(
        default=None, max_length=16, description="seek: the minute to go to, such as 80 or 90+2"
    )
    speed: Speed | None = Field(default=None, description="speed: the new speed")

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.command == "seek":
            if self.minute is None:
                raise ValueError("seek needs a minute, such as 80 or 90+2")
            _seek_target(self.minute)
        if self.command == "speed" and self.speed is None:
            raise ValueError(f"speed needs a speed: {SPEED_RANGE}")
        return self

    @property
    def target(self) -> MatchClock | None:
        """The clock a ``seek`` goes to (:data:`END_OF_PLAY` for a minute past any match's
        end: the replayer answers with the last minute its match played)."""
        return _seek_target(self.minute) if self.minute is not None else None


def _seek_target(minute: str) -> MatchClock:
    try:
        return parse_minute(minute)
    except MinutePastPlayError:
        return END_OF_PLAY


class MatchPlayback(_Frozen):
    """Where one match of a replayer is."""

    match_id: MatchId
    state: PlaybackState
    speed: Speed
    clock: MatchClock | None = Field(
        default=None, description="Clock of the last event published; absent before the first"
    )
    run: RunId
    last_seq: int = Field(ge=0, description="Seq of the last event published in the run")
    since: AwareDatetime = Field(description="When the match entered its state (UTC)")


class ControlReply(_Frozen):
    """A replayer's answer to a command, on the command's ``reply_to``."""

    request_id: str = Field(max_length=64, description="The command's; empty if unreadable")
    ok: bool
    error: str | None = Field(default=None, description="Why the command was refused")
    replayer_id: str
    state: PlaybackState = Field(description="The replayer's state after the command")
    speed: Speed
    matches: list[MatchPlayback] = Field(default_factory=list)


class ReplayerStatus(_Frozen):
    """Whether a replayer is running, retained on its status topic.

    ``online`` when it connects; removed (an empty retained message) when it ends, so nothing
    of it is left behind; ``offline`` from its last will when the connection dies without a
    goodbye (with a day's MQTT 5 message expiry). While online it is published again on every
    change of playback (pause, seek, speed, ...; see docs/control.md), with ``state``,
    ``speed``, ``since`` and each match's ``playback``. It lists the ids of its matches, which
    is how a consumer finds their state topics where wildcards get no retained messages
    (RabbitMQ 3.10).
    """

    status: Literal["online", "offline"]
    replayer_id: ReplayerId = Field(description="Names the status topic")
    matches: list[MatchId] = Field(description="Match ids the replayer is replaying")
    at: AwareDatetime = Field(
        description="When the replayer wrote the message (UTC); for a last will, when it "
        "connected, since the broker publishes the will unchanged"
    )
    state: PlaybackState | None = Field(
        default=None, description="Playback of the replayer as a whole; absent before control"
    )
    speed: Speed | None = Field(default=None, description="Speed of the replayer as a whole")
    since: AwareDatetime | None = Field(default=None, description="When it entered its state")
    playback: list[MatchPlayback] = Field(
        default_factory=list, description="Where each match started is"
    )


def decode_status(payload: bytes, *, topic: str = "") -> ReplayerStatus:
    """The replayer status in ``payload``: the one boundary a status crosses.

    Its size is checked first, pydantic-core parses it (refusing deep nesting), and fields a
    newer replayer adds are ignored (docs/wire-format.md, the compatibility rule).

    Raises:
        DecodeError: too large, not JSON, or not a status.
    """
    if len(payload) > MAX_STATUS_BYTES:
        raise DecodeError(
            f"status of {len(payload)} bytes exceeds the {MAX_STATUS_BYTES}-byte limit",
            topic=topic,
            payload=payload,
        )
    try:
        return ReplayerStatus.model_validate_json(payload, extra="ignore")
    except ValidationError as err:
        raise DecodeError(
            f"not a replayer status: {format_validation_error(err)}", topic=topic, payload=payload
        ) from None


def encode_control(message: ControlCommand | ControlReply) -> bytes:
    """The wire bytes of a command or a reply."""
    return message.model_dump_json(exclude_none=True).encode()


def _salvage(data: Any, key: str) -> str | None:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, str) and 0 < len(value) <= 512 else None


def decode_command(payload: bytes, *, topic: str = "") -> ControlCommand:
    """The command in ``payload``.

    Raises:
        ControlCommandError: too large, not JSON (or nested too deep), or not a valid command;
            it keeps the request id and reply topic when they could be read.
    """
    if len(payload) > MAX_COMMAND_BYTES:
        raise ControlCommandError(
            f"command of {len(payload)} bytes exceeds the {MAX_COMMAND_BYTES}-byte limit",
            topic=topic,
        )
    try:
        data = from_json(payload, allow_inf_nan=False)
    except ValueError as err:  # bad UTF-8, bad JSON, or nested too deep: never recursion
        raise ControlCommandError(f"not JSON: {err}", topic=topic) from None
    try:
        return ControlCommand.model_validate(data)
    except ValidationError as err:
        raise ControlCommandError(
            format_validation_error(err),
            topic=topic,
            request_id=_salvage(data, "request_id"),
            reply_to=_salvage(data, "reply_to"),
        ) from None


def decode_reply(payload: bytes) -> ControlReply:
    """The reply in ``payload``; raises :class:`ControlCommandError` when it is not one."""
    if len(payload) > 64 * MAX_COMMAND_BYTES:
        raise ControlCommandError(f"reply of {len(payload)} bytes is too large")
    try:
        return ControlReply.model_validate_json(payload)
    except ValidationError as err:
        raise ControlCommandError(f"not a control reply: {err.error_count()} problems") from None
