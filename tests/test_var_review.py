"""Schema 1.3's ``var_review``, end to end: declared once (its model, its match-file incident),
it reaches the codec, the wire examples and docs, the AsyncAPI document, both tickers, and a
match file's stream; a 1.2 reader skips it. Nothing else was edited to add it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import events._codec
from consumers import Ticker, commentary
from events import (
    EVENT_MODELS,
    MatchState,
    UnknownEventTypeError,
    VarReview,
    apply,
    decode_event,
    encode_event,
)
from matchcast.contract.asyncapi import asyncapi_document
from matchcast.contract.wire_docs import render_incidents, render_wire_format
from matchcast.contract.wire_examples import EVENT_TYPES, example_events
from matchcast.contract.wire_schema import FIXTURE_DIR
from matchcast.testing import play
from matchcast.web import Hub, WebServer
from matchcast.web._view import ticker_row
from simulator import INCIDENT_MODELS, expand, load_match
from tests._browser import wait_live, wait_text

REPO = Path(__file__).resolve().parents[1]
MATCH_FILE = REPO / "tests" / "fixtures" / "matches" / "var-review.yaml"
FIXTURE = REPO / FIXTURE_DIR / "1.3" / "var_review.json"


def _stream() -> list[Any]:
    return [s.event for s in expand(load_match(MATCH_FILE))]


def test_the_model_checks_its_fields() -> None:
    example = next(e for e in example_events() if e.type == "var_review")
    assert isinstance(example, VarReview) and VarReview.added_in == "1.3"
    data = example.model_dump()
    with pytest.raises(ValidationError, match="decision"):
        VarReview.model_validate({**data, "decision": "replay_the_match"})
    with pytest.raises(ValidationError, match="reviewed"):
        VarReview.model_validate({**data, "reviewed": "throw_in"})


def test_the_codec_round_trips_it_and_the_fixture_decodes() -> None:
    for event in _stream():
        if event.type == "var_review":
            assert decode_event(encode_event(event)) == event
    assert isinstance(decode_event(FIXTURE.read_bytes()), VarReview)


def test_a_12_reader_skips_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """This build's codec as 1.2 had it: ``var_review`` is a newer minor's unknown type."""
    monkeypatch.setattr(events._codec, "SCHEMA_VERSION", "1.2")
    monkeypatch.setattr(events._codec, "_MINOR", 2)
    monkeypatch.setattr(events._codec, "_STRICT_VERSIONS", frozenset({"1.0", "1.1", "1.2"}))
    monkeypatch.setattr(events._codec, "_KNOWN_TYPES", events._codec._KNOWN_TYPES - {"var_review"})
    with pytest.raises(UnknownEventTypeError) as caught:
        decode_event(FIXTURE.read_bytes(), topic="t")
    assert (caught.value.event_type, caught.value.version) == ("var_review", "1.3")


def test_it_is_in_the_registry_the_examples_the_docs_and_asyncapi() -> None:
    assert VarReview in EVENT_MODELS and "var_review" in EVENT_TYPES
    assert "\n### var_review\n" in render_wire_format()
    assert "\n### var_review\n" in (REPO / "docs" / "wire-format.md").read_text()
    assert "1.3: `var_review`" in render_wire_format()
    messages = asyncapi_document()["components"]["messages"]
    assert messages["var_review"]["payload"]["$ref"].endswith("/var_review")
    assert any("`var_review`" in line for line in render_incidents())


def test_the_match_file_becomes_var_review_events_where_the_incidents_are() -> None:
    """match file → incident → timeline → wire: each review is an event at its minute, between
    the goal and its retraction, and changes no score by itself."""
    assert any(m.__name__ == "VarReviewIncident" for m in INCIDENT_MODELS)
    stream = _stream()
    types = [e.type for e in stream if e.type not in ("clock",)]
    goal = types.index("goal")
    assert types[goal : goal + 3] == ["goal", "var_review", "goal_disallowed"]
    reviews = [e for e in stream if isinstance(e, VarReview)]
    assert [(r.clock.label, r.reviewed, r.decision) for r in reviews] == [
        ("24'", "goal", "goal_disallowed"),
        ("61'", "penalty", "no_change"),
        ("78'", "red_card", "red_card"),
    ]
    state = MatchState.new(stream[0].match_id)
    for event in stream:
        after = apply(state, event)
        if isinstance(event, VarReview):
            assert (after.score, after.goals, after.cards) == (
                state.score,
                state.goals,
                state.cards,
            )
        state = after
    assert state.scoreline == "RED 0-1 BLU"


def test_the_terminal_ticker_says_it() -> None:
    ticker = Ticker(echo=None)
    play(ticker, match=MATCH_FILE)
    assert "24'    VAR  Goal review, Tom Carter (RED): no goal (offside in the build-up)" in (
        ticker.lines
    )
    assert "61'    VAR  Penalty review, BLU: the decision stands" in ticker.lines


def test_the_page_gets_its_row_from_the_server() -> None:
    stream = _stream()
    state = MatchState.new(stream[0].match_id)
    rows = []
    for event in stream:
        state = apply(state, event)
        if isinstance(event, VarReview):
            rows.append(ticker_row(event, state))
            assert commentary(event, state) is not None
    assert rows[1] == {
        "minute": "61'",
        "kind": "VAR",
        "text": "Penalty review, BLU: the decision stands",
        "style": "var_review",
    }


@pytest.mark.browser
async def test_the_page_shows_it(browser: Any) -> None:
    stream = _stream()
    hub = Hub()
    state = MatchState.new(stream[0].match_id)
    async with WebServer(hub, port=0) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}?match={state.match_id}")
        await wait_live(page)
        for event in stream:
            state = apply(state, event)
            hub.publish(event, state)
        await wait_text(page, "status", "Full time", timeout_ms=10_000)
        rows = await page.evaluate(
            "[...document.querySelectorAll('#ticker li.var_review')].map(li => li.innerText)"
        )
        assert len(rows) == 3
        assert "VAR" in rows[-1] and "Goal review, Tom Carter (RED): no goal" in rows[-1]
