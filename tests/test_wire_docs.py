"""docs/wire-format.md is generated from the code, and every payload in it decodes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from events import decode_command, decode_event, decode_reply, decode_state
from matchcast.contract.channels import CHANNELS
from matchcast.contract.status import ReplayerStatus
from matchcast.contract.wire_docs import (
    MATCH_FORMAT_PATH,
    PAYLOAD_MARK,
    REGENERATE,
    WIRE_FORMAT_PATH,
    main,
    render_match_format,
    render_wire_format,
)
from matchcast.contract.wire_examples import EVENT_TYPES

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^(?P<mark>[^\n]*)\n```json\n(?P<body>.*?)\n```$", re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def committed() -> str:
    return (REPO / WIRE_FORMAT_PATH).read_text()


def test_committed_doc_is_what_the_code_generates(committed: str) -> None:
    """The doc cannot drift: regenerated in memory, it equals the committed file."""
    assert committed == render_wire_format(), f"{WIRE_FORMAT_PATH} is stale: run `{REGENERATE}`"


def test_every_json_block_is_a_payload_the_codec_decodes(committed: str) -> None:
    """Each example is marked with its kind and decodes; together they cover every event type."""
    kinds = {
        PAYLOAD_MARK.format(kind=k): k for k in ("event", "state", "status", "control", "reply")
    }
    assert committed.count("```json") == len(BLOCK.findall(committed))
    seen: list[str] = []
    for block in BLOCK.finditer(committed):
        kind = kinds.get(block["mark"])
        assert kind is not None, f"unmarked JSON block: {block['body'][:80]!r}"
        payload = block["body"].encode()
        if kind == "event":
            seen.append(decode_event(payload).type)
        elif kind == "state":
            seen.append(f"state:{decode_state(payload).match_id}")
        elif kind == "control":
            seen.append(f"control:{decode_command(payload).command}")
        elif kind == "reply":
            seen.append(f"reply:{decode_reply(payload).state}")
        else:
            seen.append(f"status:{ReplayerStatus.model_validate_json(payload).status}")
    assert [s for s in seen if ":" not in s] == list(EVENT_TYPES)
    assert len(seen) == len(EVENT_TYPES) + 4


def test_doc_names_every_topic(committed: str) -> None:
    for spec in CHANNELS:
        assert f"`{spec.address}`" in committed


def test_check_mode_finds_nothing_stale(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m matchcast.contract.wire_docs --check` agrees that the committed files are current."""
    assert main(["--check"]) == 0, capsys.readouterr().err


def test_the_match_formats_table_of_incidents_is_generated() -> None:
    """docs/match-format.md lists every kind of incident, as their classes declare them."""
    from simulator import INCIDENT_MODELS

    text = (REPO / MATCH_FORMAT_PATH).read_text()
    assert text == render_match_format(text), f"{MATCH_FORMAT_PATH} is stale: run `{REGENERATE}`"
    for model in INCIDENT_MODELS:
        assert f"| `{model.model_fields['type'].default}`" in text
