"""The goal alerts, tested with matchcast's harness: no broker needed."""

import pytest
from goal_alerts import sub

from events import Goal
from matchcast.testing import Harness, play


def test_one_line_per_goal_with_the_score_after_it(capsys: pytest.CaptureFixture[str]) -> None:
    h = play(sub, match="semifinal")
    assert capsys.readouterr().out.splitlines() == [
        "55' Anthony Gordon - now ARG 0-1 ENG",
        "86' Enzo Fernández - now ARG 1-1 ENG",
        "90+2' Lautaro Martínez - now ARG 2-1 ENG",
    ]
    assert len(h.seen(Goal)) == 3
    assert h.errors == []


async def test_joining_after_the_first_goal_alerts_only_the_later_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The async form, for tests that feed events themselves (needs pytest-asyncio)."""
    async with Harness(sub) as h:
        await h.play("semifinal", start=60)
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert h.state().score == {"ARG": 2, "ENG": 1}
