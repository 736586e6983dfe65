"""The matchcast domain: events, the wire codec, topic names, match state, the reducer.

Imports no MQTT client and does no I/O. The event types and their vocabulary are exported as
events/_models.py lists them (its ``__all__``), so adding a type needs no edit here.
"""

from events import _models
from events._clock import PERIOD_BOUNDS, MatchClock, Period
from events._codec import (
    CONTENT_TYPE,
    MAX_PAYLOAD_BYTES,
    decode_event,
    decode_state,
    encode_event,
    encode_state,
    format_validation_error,
)
from events._control import (
    MAX_COMMAND_BYTES,
    ControlAction,
    ControlCommand,
    ControlReply,
    MatchPlayback,
    PlaybackState,
    RequestId,
    Speed,
    decode_command,
    decode_reply,
    encode_control,
    parse_minute,
)
from events._errors import (
    BrokerError,
    ConnectionLostError,
    ControlCommandError,
    DecodeError,
    MatchcastError,
    MatchFileError,
    PublishRefusedError,
    UnknownEventTypeError,
    UnsupportedVersionError,
)
from events._models import *  # noqa: F403 - every event type and its vocabulary: see its __all__
from events._state import (
    CardRecord,
    GoalRecord,
    MatchState,
    MatchStatus,
    SequenceCheck,
    apply,
    check_sequence,
    replay_state,
)
from events._topics import DEFAULT_ROOT, TopicKind, Topics
from events._wire import (
    BatchSource,
    Message,
    MessageProps,
    MessageSource,
    Publisher,
    Reconnectable,
)

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_ROOT",
    "MAX_COMMAND_BYTES",
    "MAX_PAYLOAD_BYTES",
    "PERIOD_BOUNDS",
    "BatchSource",
    "BrokerError",
    "CardRecord",
    "ConnectionLostError",
    "ControlAction",
    "ControlCommand",
    "ControlCommandError",
    "ControlReply",
    "DecodeError",
    "GoalRecord",
    "MatchClock",
    "MatchFileError",
    "MatchPlayback",
    "MatchState",
    "MatchStatus",
    "MatchcastError",
    "Message",
    "MessageProps",
    "MessageSource",
    "Period",
    "PlaybackState",
    "PublishRefusedError",
    "Publisher",
    "Reconnectable",
    "RequestId",
    "SequenceCheck",
    "Speed",
    "TopicKind",
    "Topics",
    "UnknownEventTypeError",
    "UnsupportedVersionError",
    "apply",
    "check_sequence",
    "decode_command",
    "decode_event",
    "decode_reply",
    "decode_state",
    "encode_control",
    "encode_event",
    "encode_state",
    "format_validation_error",
    "parse_minute",
    "replay_state",
]
# Every event type is exported with no second list: a new type in events/_models.py is here too.
__all__ += _models.__all__
