"""The subscriber API: registering handlers in the function and the class form."""

from __future__ import annotations

import json

import pytest

from consumers import ScoreDict, Subscriber, on, on_start, on_state, on_stop
from events import BaseEvent, Card, Goal, KickOff, MatchState, TeamRef, encode_state
from matchcast.testing import match_events

EVENTS = match_events()
GOAL = next(e for e in EVENTS if isinstance(e, Goal))
KICKOFF = next(e for e in EVENTS if isinstance(e, KickOff))


def test_handlers_are_chosen_by_event_class_in_registration_order() -> None:
    sub = Subscriber("s")

    @sub.on(Goal)
    def first(event: Goal, state: MatchState) -> None: ...

    @sub.on()
    def every(event: BaseEvent, state: MatchState) -> None: ...

    @sub.on(Card, Goal)
    async def second(event: Card | Goal, state: MatchState) -> None: ...

    assert [r.handler for r in sub.handlers_for(GOAL)] == [first, every, second]
    assert [r.handler for r in sub.handlers_for(KICKOFF)] == [every]


def test_a_match_filter_limits_a_handler_to_one_match() -> None:
    sub = Subscriber("s")
    sub.on(Goal, match="another-match")(lambda e, s: None)
    mine = sub.on(Goal, match=GOAL.match_id)(lambda e, s: None)
    assert [r.handler for r in sub.handlers_for(GOAL)] == [mine]


def test_decorators_return_the_function_unchanged() -> None:
    sub = Subscriber("s")

    def alert(event: Goal, state: MatchState) -> None: ...

    assert sub.on(Goal)(alert) is alert
    assert sub.on_state(print) is print


def test_bad_registrations_say_what_is_wrong() -> None:
    sub = Subscriber("s")
    with pytest.raises(TypeError, match="not an event class"):
        sub.on(str)  # type: ignore[type-var]
    with pytest.raises(ValueError, match="positive"):
        sub.on(Goal, timeout=0)
    with pytest.raises(ValueError, match="needs a name"):
        Subscriber()
    with pytest.raises(ValueError, match="no '/'"):
        Subscriber("a/b")


class GoalCounter(Subscriber):
    def __init__(self) -> None:
        super().__init__()
        self.goals = 0
        self.log: list[str] = []

    @on(Goal)
    def count(self, event: Goal, state: MatchState) -> None:
        self.goals += 1

    @on(Goal, Card, timeout=2.5)
    async def note(self, event: Goal | Card, state: MatchState) -> None:
        self.log.append(event.type)

    @on_state
    def joined(self, state: MatchState) -> None: ...

    @on_start
    def hello(self) -> None: ...

    @on_stop
    async def bye(self) -> None: ...


def test_the_class_form_registers_marked_methods_bound_and_in_order() -> None:
    c = GoalCounter()
    assert c.name == "goal-counter"
    regs = c.handlers_for(GOAL)
    assert [r.name for r in regs] == ["GoalCounter.count", "GoalCounter.note"]
    assert regs[0].handler == c.count
    assert regs[1].timeout == 2.5
    assert c.state_handlers == [c.joined]
    assert c.start_hooks == [c.hello]
    assert c.stop_hooks == [c.bye]
    assert c.subscriber is c


def test_subclasses_inherit_marks_and_an_unmarked_override_removes_one() -> None:
    class Quiet(GoalCounter):
        def count(self, event: Goal, state: MatchState) -> None: ...

        @on(KickOff)
        def kick(self, event: KickOff, state: MatchState) -> None: ...

    q = Quiet()
    assert q.name == "quiet"
    assert [r.name for r in q.registrations] == ["GoalCounter.note", "Quiet.kick"]


def test_two_instances_of_a_class_keep_their_own_handlers() -> None:
    a, b = GoalCounter(), GoalCounter()
    assert a.handlers_for(GOAL)[0].handler == a.count
    assert b.handlers_for(GOAL)[0].handler == b.count
    assert len(a.registrations) == len(b.registrations) == 2


def test_a_score_dict_prints_home_first_and_is_still_the_dict_on_the_wire() -> None:
    home, away = TeamRef(code="ARG", name="Argentina"), TeamRef(code="ENG", name="England")
    state = MatchState.new("m", home, away).model_copy(update={"score": {"ENG": 1, "ARG": 2}})
    score = ScoreDict.of(state)
    assert str(score) == f"{score}" == "ARG 2-1 ENG"
    assert score == {"ARG": 2, "ENG": 1}
    assert repr(score) == "{'ARG': 2, 'ENG': 1}"
    pretty = state.model_copy(update={"score": score})
    assert json.loads(encode_state(pretty)) == json.loads(encode_state(state))
    assert str(ScoreDict()) == "-"
    assert str(ScoreDict({"A": 1, "B": 2, "C": 0})) == "A 1, B 2, C 0"
