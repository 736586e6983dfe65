"""Events and states to bytes and back.

The wire format is UTF-8 JSON, one message per MQTT payload. Decoding checks the schema
version first, so a payload from a newer major version gets an error that says so rather than
a wall of validation errors.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from events._errors import DecodeError, UnsupportedVersionError
from events._models import SCHEMA_VERSION, Event, EventAdapter
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


def encode_event(event: Event) -> bytes:
    """The wire bytes of ``event``."""
    return event.model_dump_json(exclude_none=True).encode()


def encode_state(state: MatchState) -> bytes:
    """The wire bytes of a retained state snapshot."""
    return state.model_dump_json(exclude_none=True).encode()


def format_validation_error(err: ValidationError) -> str:
    """One readable line per problem: ``field.path: what was expected``."""
    parts = []
    for e in err.errors(include_url=False):
        loc = ".".join(str(p) for p in e["loc"]) or "(root)"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)


def _check_version(data: Any, topic: str, payload: bytes) -> None:
    if not isinstance(data, dict):
        raise DecodeError(
            f"expected a JSON object, got {type(data).__name__}", topic=topic, payload=payload
        )
    version = data.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, str):
        raise DecodeError(
            "schema_version must be a string like '1.0'", topic=topic, payload=payload
        )
    try:
        major, minor = (int(p) for p in version.split("."))
    except ValueError:
        raise DecodeError(
            f"schema_version {version!r} is not MAJOR.MINOR", topic=topic, payload=payload
        ) from None
    if major != _MAJOR or minor > _MINOR:
        raise UnsupportedVersionError(
            version, f"{_MAJOR}.0-{SCHEMA_VERSION}", topic=topic, payload=payload
        )


def _load(payload: bytes, topic: str) -> Any:
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise DecodeError(
            f"payload of {len(payload)} bytes exceeds the {MAX_PAYLOAD_BYTES}-byte limit",
            topic=topic,
            payload=payload,
        )
    try:
        data = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DecodeError(f"not JSON: {err}", topic=topic, payload=payload) from None
    _check_version(data, topic, payload)
    return data


def _fast_version_ok(version: str) -> bool:
    return version == SCHEMA_VERSION


def decode_event(payload: bytes, *, topic: str = "") -> Event:
    """The event in ``payload``.

    Raises:
        DecodeError: the bytes are not JSON, not an event, or fail validation; the message
            names the topic and the field at fault.
        UnsupportedVersionError: the payload is from a schema version this build cannot read.
    """
    if len(payload) <= MAX_PAYLOAD_BYTES:
        # Fast path: one pass in pydantic-core; diagnose slowly only when it fails.
        try:
            event = EventAdapter.validate_json(payload)
        except ValidationError:
            pass
        else:
            if _fast_version_ok(event.schema_version):
                return event
    data = _load(payload, topic)
    try:
        return EventAdapter.validate_python(data)
    except ValidationError as err:
        raise DecodeError(format_validation_error(err), topic=topic, payload=payload) from None


def decode_state(payload: bytes, *, topic: str = "") -> MatchState:
    """The state snapshot in ``payload``; raises like :func:`decode_event`."""
    data = _load(payload, topic)
    try:
        return MatchState.model_validate(data)
    except ValidationError as err:
        raise DecodeError(format_validation_error(err), topic=topic, payload=payload) from None
