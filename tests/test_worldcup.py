"""The bundled 2022 World Cup: every match replays to its recorded result; match days run on
their real kickoff times."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import pytest

from events import Message, MessageProps, Topics, replay_state
from matchcast.app import run_replay
from matchcast.transport.connection import BrokerURL
from simulator import (
    Match,
    Replayer,
    ReplayOptions,
    expand,
    kickoff_delays,
    matches_on,
    resolve_matches,
)
from simulator._schemes import worldcup_path
from simulator._teams import FIFA_NAMES, code_for_name, worldcup_2022_record
from tests._brokers import Mosquitto
from tests._cli import run_cli
from tests._retained import retained_state

RAW = json.loads(worldcup_path("2022").read_text(encoding="utf-8"))["matches"]
MATCHES = resolve_matches("worldcup:2022")


def _expected(record: dict[str, Any]) -> dict[str, Any]:
    """The recorded result, read straight from the openfootball record."""
    codes = [code_for_name(record["team1"]), code_for_name(record["team2"])]
    score = record["score"]
    final = score.get("et", score["ft"])
    shootout = score.get("p")
    deciding = shootout or final
    winner = None if deciding[0] == deciding[1] else codes[0 if deciding[0] > deciding[1] else 1]
    goals = sorted(
        (g["minute"], g.get("offset", 0), codes[side], g["name"])
        for side, key in enumerate(("goals1", "goals2"))
        for g in record.get(key, [])
    )
    return {
        "score": dict(zip(codes, final, strict=True)),
        "shootout": dict(zip(codes, shootout, strict=True)) if shootout else None,
        "winner": winner,
        "goals": goals,
    }


def test_all_64_matches_are_bundled() -> None:
    assert len(MATCHES) == len(RAW) == 64
    assert len({m.match_id for m in MATCHES}) == 64
    assert {m.home.code for m in MATCHES} | {m.away.code for m in MATCHES} == set(FIFA_NAMES)


@pytest.mark.parametrize("index", range(64), ids=[m.match_id for m in MATCHES])
def test_every_match_replays_to_its_recorded_result(index: int) -> None:
    """Imported, expanded and folded: score, shoot-out, winner and goals as recorded."""
    match, expected = MATCHES[index], _expected(RAW[index])
    state = replay_state(match.match_id, [s.event for s in expand(match)])
    assert state.status == "finished"
    assert state.score == expected["score"]
    assert state.shootout == expected["shootout"]
    assert state.winner == expected["winner"]
    goals = sorted((g.clock.minute, g.clock.added, g.team, g.scorer) for g in state.goals)
    assert goals == expected["goals"]


def test_knockout_matches_that_were_level_went_to_extra_time() -> None:
    level = [m for m in MATCHES if m.competition.knockout and len(m.periods) > 2]
    assert [m.match_id for m in level] == [
        "wc2022-1205-jpn-cro",
        "wc2022-1206-mar-esp",
        "wc2022-1209-cro-bra",
        "wc2022-1209-ned-arg",
        "wc2022-1218-arg-fra",
    ]
    assert all(m.shootout for m in level)


@pytest.mark.parametrize(
    ("selector", "ids"),
    [
        ("final", ["wc2022-1218-arg-fra"]),
        ("third-place", ["wc2022-1217-cro-mar"]),
        ("FRA-ARG", ["wc2022-1218-arg-fra"]),
        ("semi-finals", ["wc2022-1213-arg-cro", "wc2022-1214-fra-mar"]),
        ("wc2022-1120-qat-ecu", ["wc2022-1120-qat-ecu"]),
        ("2022-11-21", ["wc2022-1121-eng-irn", "wc2022-1121-sen-ned", "wc2022-1121-usa-wal"]),
    ],
)
def test_worldcup_specs_name_matches(selector: str, ids: list[str]) -> None:
    assert [m.match_id for m in resolve_matches(f"worldcup:2022/{selector}")] == ids


@pytest.mark.parametrize(("selector", "count"), [("group-a", 6), ("round-of-16", 8)])
def test_worldcup_specs_name_rounds_and_groups(selector: str, count: int) -> None:
    assert len(resolve_matches(f"worldcup:2022/{selector}")) == count


def test_a_spec_naming_nothing_says_what_would_work() -> None:
    result = run_cli("replay", "worldcup:2022/quarterfinal-x", "--speed", "max")
    assert result.code == 2
    assert "no match is 'quarterfinal-x'" in result.stderr
    result = run_cli("replay", "worldcup:1930")
    assert result.code == 2
    assert "try worldcup:2022" in result.stderr


def test_a_match_day_is_staggered_by_kickoff_over_speed() -> None:
    """16:00, 19:00 and 22:00 in Doha: 3 h apart, so 3 min apart at speed 60."""
    day = matches_on(MATCHES, dt.date(2022, 11, 21))
    assert [m.kickoff.utc().hour for m in day] == [13, 16, 19]
    assert kickoff_delays(day, 60.0) == [0.0, 180.0, 360.0]
    assert kickoff_delays(day, None) == [0.0, 0.0, 0.0]


def test_the_2022_rates_table_agrees_with_the_bundled_results() -> None:
    """The simulator's per-team records are what the bundled file says."""
    counted: dict[str, tuple[int, int, int]] = {}
    for m in MATCHES:
        for me, them in ((m.home.code, m.away.code), (m.away.code, m.home.code)):
            played, scored, conceded = counted.get(me, (0, 0, 0))
            counted[me] = (played + 1, scored + m.result.score[me], conceded + m.result.score[them])
    assert counted == worldcup_2022_record()


class _FakeClock:
    """A clock tests advance: sleeping jumps straight to the deadline."""

    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t

    async def sleep_until(self, deadline: float) -> None:
        self.t = max(self.t, deadline)
        await asyncio.sleep(0)


class _Recorder:
    def __init__(self, clock: _FakeClock) -> None:
        self.clock = clock
        self.sent: list[tuple[float, Message]] = []

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        self.sent.append((self.clock.now(), Message(topic, payload, qos, retain)))


async def test_a_start_delay_shifts_the_whole_schedule() -> None:
    """With delay_s the first event waits, and every later one keeps its offset."""
    (match,) = resolve_matches("worldcup:2022/QAT-ECU")
    timings = []
    for delay in (0.0, 180.0):
        clock = _FakeClock()
        publisher = _Recorder(clock)
        replayer = Replayer(publisher, ReplayOptions(speed=60.0), clock=clock)
        await replayer.run(match, delay_s=delay)
        timings.append([t - 1000.0 for t, _ in publisher.sent])
    undelayed, delayed = timings
    assert undelayed[0] == 0.0
    assert delayed == [t + 180.0 for t in undelayed]


async def test_a_start_delay_is_ignored_at_maximum_speed() -> None:
    (match,) = resolve_matches("worldcup:2022/QAT-ECU")
    clock = _FakeClock()
    publisher = _Recorder(clock)
    await Replayer(publisher, ReplayOptions(speed=None), clock=clock).run(match, delay_s=500.0)
    assert {t for t, _ in publisher.sent} == {1000.0}


async def test_the_final_replays_through_a_broker(broker_url: BrokerURL, topics: Topics) -> None:
    """Imported, replayed like the semi-final; the retained state is the real result."""
    (final,) = resolve_matches("worldcup:2022/final")
    (report,) = await run_replay([final], broker_url, ReplayOptions(speed=None, topics=topics))
    state = await retained_state(broker_url, topics, final.match_id)
    assert state == report.final_state
    assert (state.status, state.scoreline, state.winner) == (
        "finished",
        "ARG 3-3 FRA (4-2 pens)",
        "ARG",
    )
    assert [g.clock.label for g in state.goals] == ["23'", "36'", "80'", "81'", "108'", "118'"]


async def test_a_match_day_replays_concurrently(amqtt_url: BrokerURL, topics: Topics) -> None:
    """The three matches of 21 November, started with their delays, all finish as recorded."""
    day: list[Match] = matches_on(MATCHES, dt.date(2022, 11, 21))
    options = ReplayOptions(speed=200_000.0, break_seconds=0.0, topics=topics)
    reports = await run_replay(day, amqtt_url, options, delays=kickoff_delays(day, options.speed))
    lines = [r.final_state.scoreline for r in reports if r.final_state]
    assert lines == ["ENG 6-2 IRN", "SEN 0-2 NED", "USA 1-1 WAL"]


@pytest.mark.mosquitto
def test_replay_day_from_the_command_line(mosquitto: Mosquitto) -> None:
    result = run_cli(
        "replay",
        "worldcup:2022",
        "--day",
        "2022-11-21",
        "--speed",
        "max",
        "--broker",
        mosquitto.url,
        "--root",
        "mctest-day",
        "--log-format",
        "json",
    )
    assert result.code == 0, result.stderr
    lines = [line.partition(" (")[0] for line in result.stdout.splitlines()]
    assert lines == [
        "wc2022-1121-eng-irn: ENG 6-2 IRN",
        "wc2022-1121-sen-ned: SEN 0-2 NED",
        "wc2022-1121-usa-wal: USA 1-1 WAL",
    ]


def test_a_day_without_matches_is_refused() -> None:
    result = run_cli("replay", "worldcup:2022", "--day", "2023-01-01", "--speed", "max")
    assert result.code == 2
    assert "no match kicks off that day" in result.stderr
    assert "2022-11-20 to 2022-12-18" in result.stderr
