"""The rules of a penalty shoot-out, for checking kick lists and making them up.

Each team takes five kicks; the shoot-out ends as soon as one team cannot catch up with the
kicks it has left. Level after five each, it goes to sudden death: one kick each until, with
the same number taken, one team has scored more. The order within a round is not checked, so
the ABBA order some competitions trialled passes too.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ROUNDS", "decided_at", "is_decided", "synthesise"]

#: Kicks per team before sudden death.
ROUNDS = 5


def is_decided(taken: tuple[int, int], scored: tuple[int, int]) -> bool:
    """Whether a shoot-out with these kicks taken and scored (per team) is over."""
    regime = max(ROUNDS, *taken)  # the kicks each team takes in the current stage
    left = (regime - taken[0], regime - taken[1])
    return scored[0] + left[0] < scored[1] or scored[1] + left[1] < scored[0]


def decided_at(kicks: Sequence[tuple[str, bool]], teams: tuple[str, str]) -> int | None:
    """Index of the kick after which the shoot-out was decided; None if it never was."""
    taken, scored = [0, 0], [0, 0]
    for i, (team, goal) in enumerate(kicks):
        side = teams.index(team)
        taken[side] += 1
        scored[side] += goal
        if is_decided((taken[0], taken[1]), (scored[0], scored[1])):
            return i
    return None


def synthesise(first: str, second: str, goals: tuple[int, int]) -> list[tuple[str, bool]]:
    """The shortest alternating kick list, ``first`` kicking first, that ends ``goals``.

    ``goals`` is (scored by ``first``, scored by ``second``). Among lists of the same length the
    one with the misses as late as possible is chosen, so it is the same list every time.

    Raises:
        ValueError: no shoot-out ends with that score (level, or impossible such as 5-0).
    """
    if goals[0] == goals[1]:
        raise ValueError(f"a shoot-out cannot end level ({goals[0]}-{goals[1]})")
    teams = (first, second)
    longest = 2 * (max(goals) + ROUNDS + 1)
    for length in range(1, longest + 1):
        found = _search(teams, goals, length, [], [0, 0], [0, 0])
        if found is not None:
            return found
    raise ValueError(f"no shoot-out ends {goals[0]}-{goals[1]}")


def _search(
    teams: tuple[str, str],
    goals: tuple[int, int],
    length: int,
    kicks: list[tuple[str, bool]],
    taken: list[int],
    scored: list[int],
) -> list[tuple[str, bool]] | None:
    n = len(kicks)
    side = n % 2
    kicks_of_side = (length + 1 - side) // 2  # first takes the odd kicks, second the even
    for goal in (True, False):
        misses = taken[side] + 1 - scored[side] - goal
        if scored[side] + goal > goals[side] or misses > kicks_of_side - goals[side]:
            continue
        taken[side] += 1
        scored[side] += goal
        kicks.append((teams[side], goal))
        over = is_decided((taken[0], taken[1]), (scored[0], scored[1]))
        found: list[tuple[str, bool]] | None = None
        if n + 1 == length:
            if over and (scored[0], scored[1]) == goals:
                found = list(kicks)
        elif not over:
            found = _search(teams, goals, length, kicks, taken, scored)
        kicks.pop()
        taken[side] -= 1
        scored[side] -= goal
        if found is not None:
            return found
    return None
