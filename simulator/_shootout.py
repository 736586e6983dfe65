"""The rules of a penalty shoot-out, for checking kick lists and making them up.

Each team takes five kicks; the shoot-out ends as soon as one team cannot catch up with the
kicks it has left. Level after five each, it goes to sudden death: one kick each until, with
the same number taken, one team has scored more. The order within a round is not checked, so
the ABBA order some competitions trialled passes too.
"""

from __future__ import annotations

from collections import deque
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
        ValueError: no shoot-out ends with that score (level, or impossible such as 4-1).
    """
    if goals[0] == goals[1]:
        raise ValueError(f"a shoot-out cannot end level ({goals[0]}-{goals[1]})")
    teams = (first, second)
    # Breadth first over (taken, scored) states, a scored kick tried before a miss: the first
    # list to reach the score is the shortest, and the latest to miss among those.
    # Each team takes at most ROUNDS kicks plus one per sudden-death round it scores in.
    most = ROUNDS + max(goals) + 1
    start = (0, 0, 0, 0)
    parent: dict[tuple[int, int, int, int], tuple[tuple[int, int, int, int], bool]] = {}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        ta, tb, sa, sb = state
        side = (ta + tb) % 2
        for goal in (True, False):
            nxt = (ta + 1, tb, sa + goal, sb) if side == 0 else (ta, tb + 1, sa, sb + goal)
            if nxt in parent or nxt[2] > goals[0] or nxt[3] > goals[1] or max(nxt[:2]) > most:
                continue
            parent[nxt] = (state, goal)
            if is_decided((nxt[0], nxt[1]), (nxt[2], nxt[3])):
                if (nxt[2], nxt[3]) == goals:
                    return _path(parent, nxt, start, teams)
            else:
                queue.append(nxt)
    raise ValueError(f"no shoot-out ends {goals[0]}-{goals[1]}")


def _path(
    parent: dict[tuple[int, int, int, int], tuple[tuple[int, int, int, int], bool]],
    end: tuple[int, int, int, int],
    start: tuple[int, int, int, int],
    teams: tuple[str, str],
) -> list[tuple[str, bool]]:
    kicks: list[tuple[str, bool]] = []
    state = end
    while state != start:
        before, goal = parent[state]
        side = 0 if state[0] > before[0] else 1
        kicks.append((teams[side], goal))
        state = before
    return kicks[::-1]
