"""Goal alerts: one line per goal, with the score after it."""

from consumers import Subscriber
from events import Goal, GoalDisallowed, MatchState

sub = Subscriber("goal-alerts")


@sub.on(Goal)
async def alert(event: Goal, state: MatchState) -> None:
    print(f"{event.clock.label} {event.scorer} - now {state.score}")


@sub.on(GoalDisallowed)
async def ruled_out(event: GoalDisallowed, state: MatchState) -> None:
    why = event.reason or "no reason given"
    print(f"{event.clock.label} goal ruled out ({why}) - now {state.score}")
