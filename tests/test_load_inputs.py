"""Hostile input to ``load merge`` and ``load --verify-state``: one clear error for a bad
report file, and a bad consumer-state report costs that report only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from events import Message, Topics, encode_state
from matchcast.load import MatchTemplate, MergeError, collect_reported_states, merge_reports
from simulator import resolve_matches
from tests._cli import run_cli

TEMPLATE = MatchTemplate.build(resolve_matches("semifinal")[0])


class _Retained:
    """A message source holding the given messages, as a broker holds retained ones."""

    def __init__(self, messages: list[Message]) -> None:
        self.queue: asyncio.Queue[Message] = asyncio.Queue()
        for m in messages:
            self.queue.put_nowait(m)

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        pass

    async def messages(self) -> AsyncIterator[Message]:
        while True:
            yield await self.queue.get()


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"[" * 1000 + b"]" * 1000, "recursion limit"),
        (b'{"match_id": "\xff"}', "not JSON"),
        (b'{"match_id": "a"}\x00', "not JSON"),
    ],
    ids=["deep", "invalid-utf8", "nul"],
)
async def test_a_hostile_consumer_state_report_is_rejected_and_the_others_still_count(
    payload: bytes, reason: str
) -> None:
    topics = Topics("mctest-verify-hostile")
    good = TEMPLATE.final_state("m1")
    source = _Retained(
        [
            Message(topics.consumer_state("bad", "m1"), payload),
            Message(topics.consumer_state("good", "m1"), encode_state(good)),
        ]
    )
    with capture_logs() as logs:
        async with asyncio.timeout(30):
            got = await collect_reported_states(
                source, topics, ["m1"], consumers=["good"], timeout_s=5
            )
    assert got["good"] == {"m1": good}
    [rejected] = [e for e in logs if e["event"] == "state.rejected"]
    assert rejected["topic"] == topics.consumer_state("bad", "m1")
    assert reason in rejected["reason"]


@pytest.mark.parametrize(
    "report",
    [
        [],
        "report",
        {"kind": "matchcast-load-report", "format": 1, "streams": {}},
        {"kind": "matchcast-load-report", "format": 1, "streams": {"c": []}, "delivery": 5},
    ],
    ids=["a-list", "a-string", "no-fields", "wrong-types"],
)
def test_a_damaged_report_is_a_merge_error_not_a_traceback(tmp_path: Path, report: object) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    result = run_cli("load", "merge", str(path))
    assert result.code == 2, result.stderr
    assert result.stderr.startswith("error: cannot merge: ")
    assert "Traceback" not in result.stderr
    if isinstance(report, dict):
        with pytest.raises(MergeError, match="damaged"):
            merge_reports([report])
