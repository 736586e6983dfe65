"""Input quoted in a message is cut first, in one place (events.clip), before anything else.

Rejection reasons, excerpts, log values, dead letters, terminal lines and ``error:`` lines
quote at most 200 characters of a piece of input, then ``…[+N chars]``; the cut comes before
the redaction, so a secret a cut falls inside is still masked.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import structlog

from events import (
    MESSAGE_LIMIT,
    QUOTE_LIMIT,
    DecodeError,
    clip,
    clip_bytes,
    decode_command,
    decode_event,
    encode_event,
    quote,
)
from events import ControlCommandError as CommandError
from matchcast import redact
from matchcast.logs import configure_logging
from matchcast.testing import match_events
from tests._cli import run_cli

EVENTS = match_events()


@pytest.fixture
def secrets() -> Iterator[None]:
    yield
    redact.forget_all()


def test_clip_keeps_200_characters_and_counts_the_rest() -> None:
    assert clip("a" * 200) == "a" * 200
    assert clip("a" * 201) == "a" * 200 + "…[+1 chars]"
    assert clip("b" * 100_000) == "b" * 200 + "…[+99800 chars]"
    assert clip_bytes(b"\xff" * 300) == "\ufffd" * 200 + "…[+100 bytes]"
    assert quote("c" * 300) == repr("c" * 200 + "…[+100 chars]")
    assert len(quote(10**100)) <= QUOTE_LIMIT + 20


@pytest.mark.parametrize(
    "field", ["type", "match_id", "schema_version", "goal_id", "clock", "k" * 300]
)
def test_a_rejection_reason_and_excerpt_quote_at_most_200_characters(field: str) -> None:
    data = json.loads(encode_event(EVENTS[1]))
    data[field] = "x" * 100_000
    with pytest.raises(DecodeError) as info:
        decode_event(json.dumps(data).encode(), topic="t" * 70_000)
    err = info.value
    for text in (err.reason, err.excerpt, str(err)):
        assert "x" * (QUOTE_LIMIT + 1) not in text
        assert "t" * (QUOTE_LIMIT + 1) not in text
    assert len(err.reason) <= MESSAGE_LIMIT + 20
    assert err.excerpt.endswith("bytes]")


def test_a_command_with_many_problems_lists_ten_and_counts_the_rest() -> None:
    body = {"request_id": "r", "command": "status", **{f"k{i}": i for i in range(300)}}
    payload = json.dumps(body, separators=(",", ":")).encode()
    assert len(payload) < 4096
    with pytest.raises(CommandError) as info:
        decode_command(payload)
    assert info.value.reason.count("Extra inputs") <= 10
    assert "more problems" in info.value.reason


def test_a_log_value_is_cut_before_it_is_redacted(secrets: None) -> None:
    """The cut comes first: a secret past the first 200 characters is never in the line, and
    one the cut falls inside is masked (a URL's password, a remembered secret)."""
    redact.remember("hunter2-very-secret")
    stream = io.StringIO()
    configure_logging("json", "INFO", stream=stream)
    log = structlog.get_logger("test")
    log.warning("x.happened", topic="a" * 500 + "hunter2-very-secret")
    log.warning("x.happened", topic="a" * 190 + "hunter2-very-secret")
    log.warning("x.happened", topic="b" * 180 + "mqtt://bob:hunter2-very-secret@host")
    log.warning("x.happened", reason="r" * 10_000, hint="own words")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    topics = [line["topic"] for line in lines[:3]]
    assert topics[0] == "a" * 200 + "…[+319 chars]"
    assert topics[1] == "a" * 190 + "***…[+9 chars]"
    assert topics[2].startswith("b" * 180 + "mqtt://bob:***…[+")
    assert not any("hunt" in t for t in topics)
    assert lines[3]["reason"] == "r" * MESSAGE_LIMIT + "…[+8000 chars]"
    assert lines[3]["hint"] == "own words"


def test_an_error_line_quotes_at_most_200_characters_of_an_argument() -> None:
    result = run_cli("replay", "--speed", "7" * 100_000, "--broker", "mqtt://127.0.0.1:1")
    assert result.code == 2
    assert "7" * (QUOTE_LIMIT + 1) not in result.stderr
    assert "…[+99800 chars]" in result.stderr
    assert len(result.stderr) < 1000


def test_a_long_name_on_the_wire_is_cut_in_a_terminal_line() -> None:
    from consumers.ticker import Ticker
    from matchcast.testing import Harness

    async def go() -> list[str]:
        lines: list[str] = []
        goal = next(e for e in EVENTS if e.type == "goal")
        long = goal.model_copy(update={"scorer": "s" * 50_000})
        async with Harness(Ticker(echo=lines.append)) as h:
            for event in EVENTS[: goal.seq - 1]:
                await h.send(event)
            await h.send(long)
        return lines

    import asyncio

    from events import MAX_NAME

    lines = asyncio.run(go())
    [goal_line] = [line for line in lines if "GOAL" in line]
    # A name is cut to MAX_NAME where it is read off the wire (a field of wire 1.0-1.3 is
    # read whatever its length, then cut), before any view sees it.
    assert "s" * MAX_NAME in goal_line
    assert "s" * (MAX_NAME + 1) not in goal_line
    assert len(goal_line) < 300
