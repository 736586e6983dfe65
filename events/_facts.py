"""How each fact of a match reads, once, for every view.

The terminal's scoreboard and ticker (``consumers``), the stats report, and the page's data
(``matchcast/web/_view.py``) all word a fact through this module, so they cannot disagree: a
penalty is ``(pen)`` on the scoreboard as in the ticker, possession is home first everywhere,
a share is rounded one way.

Two kinds of thing live here:

- **facts**: a goal's tag and how it was scored, a scorer's line, the shares of possession and
  the stretch they cover, the score in its three forms, a shoot-out's result;
- **each event type's ticker words** (:class:`Said`: the page's badge and text, the terminal's
  line), one function per type registered with :func:`describes`. :meth:`BaseEvent.describe`
  looks its type up here; a type with no function is silent (a clock tick).

Adding an event type's words: write ``@describes("corner") def _corner(e: Corner, state) ->
Said`` below, using the facts above (or adding one); ``tests/test_facts.py`` checks that every
type but the silent ones has words here, and a test of the type's own shows its line. Nothing
else changes: the terminal ticker, the page and the stats read it from here.

Pure: no I/O, and nothing of ``events._models`` at run time (the models import this module).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from events._clock import MatchClock, Period
from events._quote import clip

if TYPE_CHECKING:
    from events._models import (
        Card,
        FullTime,
        Goal,
        GoalDisallowed,
        KickOff,
        PenaltyAwarded,
        PeriodEnd,
        Possession,
        ReplayStopped,
        Save,
        ShootoutKick,
        Shot,
        Substitution,
        VarReview,
    )
    from events._state import GoalRecord, MatchState

__all__ = [
    "GOAL_METHOD_NAMES",
    "GOAL_TAGS",
    "SHOT_OUTCOME_WORDS",
    "Said",
    "describer",
    "describes",
    "goal_how",
    "goal_tag",
    "page_score",
    "percent",
    "possession",
    "possession_span",
    "scorer_line",
    "shares",
    "shootout_result",
    "short_score",
    "team_order",
    "xg_text",
]


@dataclass(frozen=True, slots=True)
class Said:
    """What an event says in a ticker, as its type's words here return it.

    Attributes:
        kind: the page's badge: ``GOAL``, ``YELLOW CARD``.
        text: the page's text beside the badge.
        line: the terminal's line after the minute column; ``"{kind}  {text}"`` when None.
    """

    kind: str
    text: str
    line: str | None = None


# ---------------------------------------------------------------- the score


def team_order(state: MatchState, among: Mapping[str, object] | None = None) -> list[str]:
    """The team codes home first, where the state knows the teams; else ``among``'s own
    order (a share or a score dict), else the score's."""
    codes = [t.code for t in (state.home, state.away) if t]
    if len(codes) == 2:
        return codes
    return list(among if among is not None else state.score)


def short_score(state: MatchState) -> str:
    """The goals alone, home first: ``2-1``."""
    return "-".join(str(state.score.get(c, 0)) for c in team_order(state))


def page_score(state: MatchState) -> str:
    """The score with the teams: ``ARG 2-1 ENG``; empty while the two teams are unknown."""
    codes = team_order(state)
    if len(codes) < 2:
        return ""
    h, a = codes[0], codes[1]
    return f"{h} {state.score.get(h, 0)}-{state.score.get(a, 0)} {a}"


def shootout_result(state: MatchState) -> str | None:
    """``Argentina win 4-2 on penalties`` (``penalties 3 - 3`` while level); None without a
    shoot-out."""
    if not state.shootout:
        return None
    h, a = [*team_order(state, state.shootout), "", ""][:2]
    ph, pa = state.shootout.get(h, 0), state.shootout.get(a, 0)
    winners = [t for t in (state.home, state.away) if t and t.code == state.winner]
    if winners:
        return f"{clip(winners[0].name)} win {max(ph, pa)}-{min(ph, pa)} on penalties"
    return f"penalties {ph} - {pa}"


# ---------------------------------------------------------------- goals

#: How a goal's method is named ("" for open play, which needs no word).
GOAL_METHOD_NAMES: Mapping[str, str] = MappingProxyType(
    {"header": "header", "penalty": "penalty", "free_kick": "free kick", "own_goal": "own goal"}
)
#: The tag after a goal's minute or scorer wherever a goal is listed.
GOAL_TAGS: Mapping[str, str] = MappingProxyType({"penalty": " (pen)", "own_goal": " (o.g.)"})


def goal_tag(method: str | None) -> str:
    """`` (pen)``, `` (o.g.)``, or empty."""
    return GOAL_TAGS.get(method or "", "")


def goal_how(method: str | None, detail: str | None = None) -> str:
    """How the goal was scored, for a person: its detail where the file gives one, else its
    method's name (empty for open play)."""
    return clip(detail) if detail else GOAL_METHOD_NAMES.get(method or "", "")


def scorer_line(goal: GoalRecord) -> str:
    """A scoreboard's line of a goal: ``Lionel Messi 23' (pen)``."""
    return f"{clip(goal.scorer)} {goal.clock.label}{goal_tag(goal.method)}"


# ---------------------------------------------------------------- possession


def percent(value: float) -> int:
    """A share rounded half up (not to even): 12.5 is 13."""
    return math.floor(value + 0.5)


def shares(state: MatchState, share: Mapping[str, float]) -> list[tuple[str, int]]:
    """Each team's share, home first, rounded by :func:`percent`."""
    order = [c for c in team_order(state, share) if c in share]
    order += [c for c in share if c not in order]
    return [(c, percent(share[c])) for c in order]


def possession(state: MatchState, share: Mapping[str, float] | None = None) -> str:
    """``ARG 88% · ENG 12%``: the shares (the state's when not given), home first."""
    given = state.possession if share is None else share
    return " · ".join(f"{c} {v}%" for c, v in shares(state, given or {}))


def possession_span(since: MatchClock | None, until: MatchClock | None) -> str | None:
    """``55'-86'``, the stretch possession shares cover (``to 86'`` without a start); None
    when not known."""
    if until is None:
        return None
    return f"{since.label}-{until.label}" if since else f"to {until.label}"


# ---------------------------------------------------------------- each type's ticker words

D = TypeVar("D", bound=Callable[..., "Said | None"])
_DESCRIBERS: dict[str, Callable[[Any, MatchState], Said | None]] = {}


def describes(event_type: str) -> Callable[[D], D]:
    """Register the function that words events of ``event_type`` in a ticker."""

    def register(fn: D) -> D:
        if event_type in _DESCRIBERS:
            raise ValueError(f"the words of {event_type!r} are already registered")
        _DESCRIBERS[event_type] = fn
        return fn

    return register


def describer(event_type: str) -> Callable[[Any, MatchState], Said | None] | None:
    """The function that words ``event_type``; None for a silent type."""
    return _DESCRIBERS.get(event_type)


@describes("kick_off")
def _kick_off(e: KickOff, state: MatchState) -> Said:
    if e.clock.period is Period.FIRST_HALF:
        return Said("KICK-OFF", f"{clip(e.home.name)} v {clip(e.away.name)}")
    return Said("KICK-OFF", f"{e.clock.period.short} under way")


@describes("period_end")
def _period_end(e: PeriodEnd, state: MatchState) -> Said:
    period = e.clock.period
    what = "HALF TIME" if period is Period.FIRST_HALF else f"END OF {period.short}"
    return Said(what, page_score(state), f"{what}  {state.scoreline}")


@describes("goal")
def _goal(e: Goal, state: MatchState) -> Said:
    how = goal_how(e.method)
    scorer = f"{clip(e.scorer)} ({e.team})"
    return Said(
        "GOAL",
        f"{scorer}{f', {how}' if how else ''}. {page_score(state)}",
        f"GOAL  {scorer}{goal_tag(e.method)}  {short_score(state)}",
    )


def recalled_goal(goal: GoalRecord) -> Said:
    """The ticker words of a goal known from a state (a page that joined after it)."""
    how = goal_how(goal.method)
    scorer = f"{clip(goal.scorer)} ({goal.team})"
    return Said(
        "GOAL", f"{scorer}{f', {how}' if how else ''}", f"GOAL  {scorer}{goal_tag(goal.method)}"
    )


@describes("goal_disallowed")
def _goal_disallowed(e: GoalDisallowed, state: MatchState) -> Said:
    why = f": {clip(e.reason)}" if e.reason else ""
    return Said(
        "NO GOAL",
        f"{e.team} goal ruled out{why}. {page_score(state)}",
        f"NO GOAL  {e.team} goal ruled out{why}  {short_score(state)}",
    )


@describes("possession")
def _possession(e: Possession, state: MatchState) -> Said:
    said = possession(state, e.share)
    span = possession_span(e.since, e.clock) if e.since else None
    over = f" over {e.since.label}\u2013{e.clock.label}" if e.since else ""
    return Said("POSSESSION", f"{said}{over}", f"POSSESSION{f' {span}' if span else ''}  {said}")


@describes("card")
def _card(e: Card, state: MatchState) -> Said:
    return Said(f"{e.card.replace('_', ' ').upper()} CARD", f"{clip(e.player)} ({e.team})")


@describes("substitution")
def _substitution(e: Substitution, state: MatchState) -> Said:
    return Said("SUB", f"{e.team}: {clip(e.player_on)} on, {clip(e.player_off)} off")


@describes("shootout_kick")
def _shootout_kick(e: ShootoutKick, state: MatchState) -> Said:
    result = "scores" if e.scored else "misses"
    pens = "-".join(str(e.shootout.get(c, 0)) for c in team_order(state, e.shootout))
    return Said(
        "PENALTY",
        f"{clip(e.taker)} ({e.team}) {result}",
        f"{clip(e.taker)} ({e.team}) {result}  {pens}",
    )


@describes("full_time")
def _full_time(e: FullTime, state: MatchState) -> Said:
    return Said("FULL TIME", page_score(state), f"FULL TIME  {state.scoreline}")


@describes("replay_stopped")
def _replay_stopped(e: ReplayStopped, state: MatchState) -> Said:
    why = "interrupted" if e.reason == "interrupted" else "replayer error"
    page = " (replayer error)" if e.reason == "error" else ""
    return Said(
        "REPLAY STOPPED",
        f"{page_score(state)}: not a final score{page}",
        f"REPLAY STOPPED ({why})  {state.scoreline}: not a final score",
    )


#: What a VAR review checked, and the referee's decisions, in words.
_VAR_REVIEWED = {
    "goal": "goal",
    "penalty": "penalty",
    "red_card": "red card",
    "mistaken_identity": "mistaken identity",
}
_VAR_DECISIONS = {
    "goal_awarded": "goal given",
    "goal_disallowed": "no goal",
    "penalty_awarded": "penalty given",
    "penalty_cancelled": "no penalty",
    "red_card": "red card",
    "red_card_cancelled": "no red card",
    "no_change": "the decision stands",
}


@describes("var_review")
def _var_review(e: VarReview, state: MatchState) -> Said:
    who = f"{clip(e.player)} ({e.team})" if e.player else e.team
    why = f" ({clip(e.reason)})" if e.reason else ""
    checked = _VAR_REVIEWED[e.reviewed].capitalize()
    return Said("VAR", f"{checked} review, {who}: {_VAR_DECISIONS[e.decision]}{why}")


#: How a shot ended, in a ticker's words.
SHOT_OUTCOME_WORDS = MappingProxyType(
    {
        "goal": "scores",
        "saved": "on target, saved",
        "off_target": "off target",
        "blocked": "blocked",
        "woodwork": "hits the woodwork",
    }
)


def xg_text(xg: float) -> str:
    """Expected goals as every view writes them: ``0.23``."""
    return f"{xg:.2f}"


@describes("shot")
def _shot(e: Shot, state: MatchState) -> Said | None:
    if e.outcome not in ("saved", "woodwork"):
        return None  # a goal has its own row; wide and blocked shots only count
    what = SHOT_OUTCOME_WORDS[e.outcome]
    return Said("SHOT", f"{clip(e.player)} ({e.team}), {what}, xG {xg_text(e.xg)}")


@describes("save")
def _save(e: Save, state: MatchState) -> Said:
    return Said("SAVE", f"{clip(e.keeper)} ({e.team})")


@describes("penalty_awarded")
def _penalty_awarded(e: PenaltyAwarded, state: MatchState) -> Said:
    who = f"{clip(e.player)} ({e.team}) fouled" if e.player else e.team
    return Said("PENALTY AWARDED", who)
