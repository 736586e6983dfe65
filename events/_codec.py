"""Events and states to bytes and back.

The wire format is UTF-8 JSON, one message per MQTT payload. Every payload crosses one
boundary here before anything recurses or allocates on it: its size is checked first, then it
is parsed by pydantic-core's JSON parser, which refuses nesting past a fixed depth instead of
recursing (the standard library's ``json`` recurses, and a 2 KB ``[[[[...]]]]`` ended a
consumer with ``RecursionError``). Every failure is a :class:`~events.DecodeError`.

The version rule (docs/wire-format.md, "Versioning"): a reader of ``1.x`` reads every ``1.y``.
A payload of an older or the same minor is validated strictly. One of a newer minor is read
with the fields this build does not know ignored, and an event type it does not know raises
:class:`~events.UnknownEventTypeError` (a consumer skips it, and counts it, rather than
reject it). Another major raises :class:`~events.UnsupportedVersionError`.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import ValidationError
from pydantic_core import from_json

from events._errors import DecodeError, UnknownEventTypeError, UnsupportedVersionError
from events._models import SCHEMA_VERSION, BaseEvent, Event, EventAdapter
from events._numbers import whole_number
from events._quote import format_validation_error, quote
from events._state import MatchState

__all__ = [
    "CONTENT_TYPE",
    "MAX_PAYLOAD_BYTES",
    "decode_event",
    "decode_state",
    "encode_event",
    "encode_state",
    "format_validation_error",
]

CONTENT_TYPE = "application/json"
#: Payloads past this size are refused before parsing; a real event is well under 2 KiB.
MAX_PAYLOAD_BYTES = 256 * 1024

_MAJOR, _MINOR = (int(p) for p in SCHEMA_VERSION.split("."))

#: The ``type`` of every event this build knows (derived from the union).
_KNOWN_TYPES = frozenset(cls.model_fields["type"].default for cls in get_args(get_args(Event)[0]))


def _readable_versions(major: int, minor: int) -> frozenset[str]:
    """The versions read strictly on the fast path: this major, this minor and older ones."""
    return frozenset(f"{major}.{m}" for m in range(minor + 1))


_STRICT_VERSIONS = _readable_versions(_MAJOR, _MINOR)


def encode_event(event: Event) -> bytes:
    """The wire bytes of ``event``."""
    return event.model_dump_json(exclude_none=True).encode()


def encode_state(state: MatchState) -> bytes:
    """The wire bytes of a retained state snapshot."""
    return state.model_dump_json(exclude_none=True).encode()


def _check_version(data: Any, topic: str, payload: bytes) -> bool:
    """Raise unless ``data`` is an object of a version this build reads; True if it is of a
    newer minor (read leniently)."""
    if not isinstance(data, dict):
        raise DecodeError(
            f"expected a JSON object, got {type(data).__name__}", topic=topic, payload=payload
        )
    version = data.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, str):
        raise DecodeError(
            "schema_version must be a string like '1.0'", topic=topic, payload=payload
        )
    head, _, tail = version.partition(".")
    try:  # ASCII digits only: an Arabic-Indic "1.3" is no version
        major, minor = whole_number(head), whole_number(tail)
    except ValueError:
        raise DecodeError(
            f"schema_version {quote(version)} is not MAJOR.MINOR", topic=topic, payload=payload
        ) from None
    if major != _MAJOR:
        raise UnsupportedVersionError(
            version, f"{_MAJOR}.x (any minor)", topic=topic, payload=payload
        )
    return minor > _MINOR


def _load(payload: bytes, topic: str) -> tuple[Any, bool]:
    """The parsed payload, and whether it is of a newer minor."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise DecodeError(
            f"payload of {len(payload)} bytes exceeds the {MAX_PAYLOAD_BYTES}-byte limit",
            topic=topic,
            payload=payload,
        )
    try:
        data = from_json(payload, allow_inf_nan=False)
    except ValueError as err:  # bad UTF-8, bad JSON, or nested too deep: never recursion
        raise DecodeError(f"not JSON: {err}", topic=topic, payload=payload) from None
    return data, _check_version(data, topic, payload)


def decode_event(payload: bytes, *, topic: str = "") -> Event:
    """The event in ``payload``.

    Raises:
        DecodeError: the bytes are not JSON, not an event, or fail validation; the message
            names the topic and the field at fault.
        UnsupportedVersionError: the payload is from another major version.
        UnknownEventTypeError: a newer minor's event of a type this build does not know.
    """
    if len(payload) <= MAX_PAYLOAD_BYTES:
        # Fast path: one pass in pydantic-core; diagnose slowly only when it fails.
        try:
            event = EventAdapter.validate_json(payload)
        except ValidationError:
            pass
        else:
            if event.schema_version in _STRICT_VERSIONS:
                return event
    data, newer = _load(payload, topic)
    try:
        if not newer:
            return EventAdapter.validate_python(data)
        kind = data.get("type")
        if isinstance(kind, str) and kind in _KNOWN_TYPES:
            return EventAdapter.validate_python(data, extra="ignore")
    except ValidationError as err:
        raise DecodeError(format_validation_error(err), topic=topic, payload=payload) from None
    return _unknown_type(data, topic, payload)


def _unknown_type(data: dict[str, Any], topic: str, payload: bytes) -> Event:
    """Raise what a newer minor's event of an unknown type means: skip it, or reject it."""
    kind = data.get("type")
    if not isinstance(kind, str) or not kind:
        raise DecodeError("type: a newer minor's event needs a type", topic=topic, payload=payload)
    try:
        envelope = BaseEvent.model_validate(data, extra="ignore")
    except ValidationError as err:
        raise DecodeError(format_validation_error(err), topic=topic, payload=payload) from None
    raise UnknownEventTypeError(
        kind,
        data["schema_version"],
        match_id=envelope.match_id,
        seq=envelope.seq,
        run=envelope.run,
        topic=topic,
        payload=payload,
    )


def decode_state(payload: bytes, *, topic: str = "") -> MatchState:
    """The state snapshot in ``payload``; raises like :func:`decode_event` (a snapshot of a
    newer minor is read with the fields this build does not know ignored)."""
    data, newer = _load(payload, topic)
    try:
        return MatchState.model_validate(data, extra="ignore" if newer else None)
    except ValidationError as err:
        raise DecodeError(format_validation_error(err), topic=topic, payload=payload) from None
