"""A score that prints the way people read one.

``state.score`` is a plain ``dict`` of goals by team code on the wire. The states the runner
hands to handlers carry it as a :class:`ScoreDict`: still that dict (indexing, ``==``, JSON and
``repr`` are unchanged), but ``str()`` and f-strings give ``ARG 2-1 ENG``, home team first.
"""

from __future__ import annotations

from events import MatchState
from events._state import evolve

__all__ = ["ScoreDict", "with_score_dict"]


class ScoreDict(dict[str, int]):
    """Goals by team code, home team first, that prints as ``ARG 2-1 ENG``."""

    def __str__(self) -> str:
        if len(self) == 2:
            (home, h), (away, a) = self.items()
            return f"{home} {h}-{a} {away}"
        return ", ".join(f"{team} {goals}" for team, goals in self.items()) or "-"

    @classmethod
    def of(cls, state: MatchState) -> ScoreDict:
        """The score of ``state``, ordered home team first where the teams are known."""
        codes = [t.code for t in (state.home, state.away) if t is not None]
        ordered = {c: state.score.get(c, 0) for c in codes if c in state.score}
        ordered.update(state.score)
        return cls(ordered)


def with_score_dict(state: MatchState) -> MatchState:
    """``state`` with its score as a :class:`ScoreDict`; the same state in every other way."""
    if type(state.score) is ScoreDict:
        return state
    return evolve(state, {"score": ScoreDict.of(state)})
