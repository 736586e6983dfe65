"""What a recording must be to replay: the rules each of its lines is checked against.

A recording is validated as strictly as a match file (simulator/_matchfile.py): every line
must be a valid event or snapshot (the wire's own validation), and the lines of one match must
make a match, in the order a replay sends them (one run, seq by seq):

- its seqs only move on: no seq repeats or goes back (a duplicate, or a second run of the
  match, which a replay would send as one run that consumers drop as duplicates), and none
  jumps more than :data:`MAX_SEQ_GAP` past the last;
- the teams are known before an event names one or carries a score: a ``kick_off``, or a
  snapshot, comes first (``full_time`` first is refused);
- nothing follows the end of the match (``full_time``, ``replay_stopped``);
- every team an event names (``team``, the keys of ``score``, ``shootout`` and ``share``,
  ``winner``) is one of the match's two, and a later ``kick_off`` names the same two;
- every score follows from the one before: a goal adds one for its team, a disallowed goal
  (of a goal the match has) takes one back, other events keep it; across missing seqs it moves
  by at most one goal per seq (so no score of 10^9); a snapshot's score is its goals counted;
- time only moves on within a match, and the whole recording spans at most :data:`MAX_SPAN`
  (a replay keeps the recorded timing: a year between two lines would play for a year).

Each problem names its line; :func:`simulator.load_recording` lists at most ten.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping

from events import Event, Goal, GoalDisallowed, KickOff, MatchState, quote

__all__ = ["MAX_SEQ_GAP", "MAX_SPAN", "event_problem", "snapshot_problem", "time_problem"]

#: The most a seq may jump past the last one of its match (as far as a consumer believes one:
#: ``consumers.MAX_SEQ_JUMP``).
MAX_SEQ_GAP = 10_000
#: The longest a recording may span from its first event to its last: a month of matches
#: recorded in real time.
MAX_SPAN = dt.timedelta(days=31)

#: Event types that need no teams: the clock moves before the kick-off too.
_BEFORE_KICKOFF = frozenset({"kick_off", "clock"})
#: Statuses after which no event of the match may follow.
_OVER = frozenset({"finished", "stopped"})


def _teams_named(event: Event) -> set[str]:
    """Every team code ``event`` names."""
    named: set[str] = set()
    team = getattr(event, "team", None)
    if isinstance(team, str):
        named.add(team)
    winner = getattr(event, "winner", None)
    if isinstance(winner, str):
        named.add(winner)
    for field in ("score", "shootout", "share"):
        value = getattr(event, field, None)
        if isinstance(value, Mapping):
            named |= set(value)
    return named


def _expected_score(state: MatchState, event: Event) -> dict[str, int] | str:
    """The score ``event`` must carry, right after ``state``; or what is wrong."""
    score = dict(state.score)
    if isinstance(event, Goal):
        score[event.team] = score.get(event.team, 0) + 1
    elif isinstance(event, GoalDisallowed):
        goal = next((g for g in state.goals if g.goal_id == event.goal_id), None)
        if goal is None:
            return f"goal_disallowed names goal {quote(event.goal_id)}, which the match has not"
        score[goal.team] -= 1
    return score


def _score_problem(
    state: MatchState, event: Event, score: Mapping[str, int], teams: set[str]
) -> str | None:
    if set(score) != teams:
        return f"score names {sorted(score)}, not the match's teams {sorted(teams)}"
    gap = event.seq - state.last_seq
    if gap == 1:
        expected = _expected_score(state, event)
        if isinstance(expected, str):
            return expected
        if dict(score) != expected:
            return (
                f"score {_line(score)} does not follow from {_line(state.score)} before it "
                f"(expected {_line(expected)})"
            )
        return None
    moved = sum(abs(score[t] - state.score.get(t, 0)) for t in score)
    if moved > gap:
        return (
            f"score {_line(score)} is {moved} goals from {_line(state.score)} before it, "
            f"over {gap} seqs: at most one goal a seq"
        )
    return None


def _line(score: Mapping[str, int]) -> str:
    return ", ".join(f"{t} {n}" for t, n in score.items()) or "none"


def event_problem(state: MatchState, event: Event) -> str | None:
    """What is wrong with ``event`` after ``state`` (the match so far); None when nothing."""
    if event.seq <= state.last_seq:
        return (
            f"seq {event.seq} does not follow seq {state.last_seq} of {event.match_id}: a "
            "recording is replayed as one run, each match's seqs rising (a duplicate, or a "
            "second run of the match: split the file there)"
        )
    if event.seq - state.last_seq > MAX_SEQ_GAP:
        return f"seq {event.seq} jumps more than {MAX_SEQ_GAP:,} past seq {state.last_seq}"
    if event.run < state.run:
        return f"run {event.run} is older than run {state.run} before it"
    if state.status in _OVER:
        return (
            f"a {event.type} after the end of {event.match_id} ({state.status} at seq "
            f"{state.last_seq})"
        )
    if state.home is None or state.away is None:
        if event.type not in _BEFORE_KICKOFF:
            return (
                f"a {event.type} before the kick-off of {event.match_id}: a recording starts "
                "with the kick-off, or a snapshot"
            )
        if isinstance(event, KickOff) and event.home.code == event.away.code:
            return f"kick_off: home and away are both {event.home.code}"
        return None
    teams = {state.home.code, state.away.code}
    if isinstance(event, KickOff) and (event.home.code, event.away.code) != (
        state.home.code,
        state.away.code,
    ):
        return (
            f"kick_off names {event.home.code} v {event.away.code}, not the match's "
            f"{state.home.code} v {state.away.code}"
        )
    strangers = _teams_named(event) - teams
    if strangers:
        return f"{event.type} names {', '.join(sorted(strangers))}, not a team of the match"
    score = getattr(event, "score", None)
    if isinstance(score, Mapping):
        return _score_problem(state, event, score, teams)
    return None


def snapshot_problem(state: MatchState | None, snapshot: MatchState) -> str | None:
    """What is wrong with ``snapshot`` after ``state`` (None: its first line); None if
    nothing."""
    if state is not None:
        if snapshot.last_seq < state.last_seq:
            return (
                f"snapshot at seq {snapshot.last_seq} goes back from seq {state.last_seq}: a "
                "recording is replayed as one run"
            )
        if snapshot.run < state.run:
            return f"snapshot of run {snapshot.run} is older than run {state.run} before it"
    if snapshot.home is None or snapshot.away is None:
        if snapshot.score or snapshot.goals:
            return "snapshot has a score but no teams"
        return None
    teams = {snapshot.home.code, snapshot.away.code}
    if len(teams) < 2:
        return f"snapshot: home and away are both {snapshot.home.code}"
    if snapshot.score and set(snapshot.score) != teams:
        return f"snapshot's score names {sorted(snapshot.score)}, not {sorted(teams)}"
    goals = Counter(g.team for g in snapshot.goals)
    if set(goals) - teams:
        return f"snapshot has goals of {sorted(set(goals) - teams)}, not a team of the match"
    counted = {t: goals.get(t, 0) for t in teams}
    if snapshot.score and dict(snapshot.score) != counted:
        return (
            f"snapshot's score {_line(snapshot.score)} is not its goals counted ({_line(counted)})"
        )
    if any(g.seq > snapshot.last_seq for g in snapshot.goals):
        return f"snapshot lists a goal after its last seq {snapshot.last_seq}"
    return None


def time_problem(before: dt.datetime | None, due: dt.datetime) -> str | None:
    """What is wrong with an event due at ``due`` after one due at ``before``; None if
    nothing."""
    if before is not None and due < before:
        return (
            f"its time {due.isoformat()} is before the time of the event before it "
            f"({before.isoformat()})"
        )
    return None
