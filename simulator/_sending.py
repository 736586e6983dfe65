"""What both of the replayer's senders (simulator/_run.py, simulator/_chaos_sender.py) and
the replayer itself put on a message or read from a lost connection: the MQTT properties of
an event and of a state, and the first reason in a group of connection errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from events import CONTENT_TYPE, BrokerError, Event, MatchState, MessageProps

if TYPE_CHECKING:
    from simulator._replay import ReplayOptions


def _first(group: BaseExceptionGroup[BrokerError]) -> str:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return str(exc)


def _event_props(options: ReplayOptions, event: Event) -> MessageProps:
    return MessageProps(
        content_type=CONTENT_TYPE,
        message_expiry=options.event_expiry,
        user=(("seq", str(event.seq)), ("type", event.type)),
    )


def _state_props(state: MatchState) -> MessageProps:
    return MessageProps(content_type=CONTENT_TYPE, user=(("seq", str(state.last_seq)),))
