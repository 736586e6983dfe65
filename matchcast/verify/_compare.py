"""A report against the truth: which fields differ, and where the consumer first went wrong.

Every field of :class:`events.MatchState` a report carries is compared (``schema_version``
aside: it says which format the consumer writes, not what it believes), and nothing it leaves
out: a report of ``score`` and ``status`` alone is a report. The comparison follows the
state's declared types, so a field added to the state is compared with no change here:

- a record (a goal, a card, the clock, a team) compares the keys the report gives;
- a mapping (the score, possession) compares every key, and each value;
- a sequence (goals, cards) compares its length and each item, in order;
- anything else compares equal as JSON (``2`` and ``2.0`` are the same number; ``true`` is
  no number);
- in the score, a team left out has no goals: ``{}`` before a goal says what ``{"NED": 0,
  "JPN": 0}`` says.
"""

from __future__ import annotations

import bisect
import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from events import MatchState, encode_state

__all__ = [
    "IGNORED_FIELDS",
    "Difference",
    "Divergence",
    "agree",
    "arrived",
    "differences",
    "first_divergence",
    "state_fields",
]

#: Fields of a report never compared.
IGNORED_FIELDS = frozenset({"schema_version"})


def state_fields(state: MatchState) -> dict[str, Any]:
    """``state`` as the wire says it (the JSON a consumer reads)."""
    fields: dict[str, Any] = json.loads(encode_state(state))
    return fields


def _strip(annotation: Any) -> Any:
    """``X`` of ``X | None``, ``Optional[X]`` and ``Annotated[X, ...]``."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def agree(expected: Any, reported: Any, annotation: Any) -> bool:
    """True when ``reported`` says what ``expected`` says, by the rules in the module doc."""
    kind = _strip(annotation)
    origin = typing.get_origin(kind)
    if isinstance(expected, dict) and isinstance(reported, dict):
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            fields = kind.model_fields
            return all(
                agree(expected.get(k), v, fields[k].annotation)
                for k, v in reported.items()
                if k in fields
            )
        if origin in (dict, Mapping):
            value = typing.get_args(kind)[1]
            return expected.keys() == reported.keys() and all(
                agree(expected[k], reported[k], value) for k in expected
            )
    if isinstance(expected, list) and isinstance(reported, list):
        item = typing.get_args(kind)[0] if origin in (tuple, list, Sequence) else Any
        return len(expected) == len(reported) and all(
            agree(e, r, item) for e, r in zip(expected, reported, strict=True)
        )
    if isinstance(expected, bool) or isinstance(reported, bool):
        return type(expected) is type(reported) and expected == reported
    return bool(expected == reported)


def _said(name: str, value: Any) -> Any:
    """``value`` of field ``name`` as compared: the score without its teams at 0."""
    if name == "score" and isinstance(value, dict):
        return {team: goals for team, goals in value.items() if goals != 0}
    return value


def _agree_on(name: str, expected: Any, reported: Any) -> bool:
    """True when field ``name`` of a report says what the truth's does."""
    annotation = MatchState.model_fields[name].annotation
    return agree(_said(name, expected), _said(name, reported), annotation)


def _compared(reported: Mapping[str, Any]) -> list[str]:
    return [
        name for name in MatchState.model_fields if name in reported and name not in IGNORED_FIELDS
    ]


@dataclass(frozen=True, slots=True)
class Difference:
    """One field a report has wrong."""

    field: str
    expected: Any
    reported: Any


def differences(expected: Mapping[str, Any], reported: Mapping[str, Any]) -> list[Difference]:
    """The fields ``reported`` carries and has wrong, against ``expected`` (a state's JSON)."""
    return [
        Difference(name, expected.get(name), reported[name])
        for name in _compared(reported)
        if not _agree_on(name, expected.get(name), reported[name])
    ]


def arrived(reported: Mapping[str, Any], truth: MatchState) -> bool:
    """True when ``reported`` has reached the truth's end: its status, and its last seq and
    run where it says them (what the consumer can be waited for)."""
    return (
        reported.get("status") == truth.status
        and reported.get("last_seq", truth.last_seq) == truth.last_seq
        and reported.get("run", truth.run) == truth.run
    )


@dataclass(frozen=True, slots=True)
class Point:
    """A true state in a scenario's stream: ``index`` is where it was published."""

    index: int
    fields: dict[str, Any]

    @property
    def seq(self) -> int:
        """The state's last seq."""
        return int(self.fields.get("last_seq", 0))

    @property
    def minute(self) -> str:
        """The state's clock label ("before kick-off" without a clock)."""
        clock = self.fields.get("clock") or {}
        return str(clock.get("label", "before kick-off"))


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where the consumer first parted from the truth.

    Attributes:
        field: the field.
        expected: the truth's value there.
        reported: the consumer's value there.
        seq: the true state's last seq where they part.
        minute: its match clock.
        run: its run.
        index: where the message that made them part was published (what caused it is the
            last fault at or before it).
        how: ``missed`` (the truth moved and the consumer did not follow), ``moved`` (the
            consumer moved where the truth did not), or ``end`` (every report was in step
            but the last, held to the end of the stream).
    """

    field: str
    expected: Any
    reported: Any
    seq: int
    minute: str
    run: int
    index: int
    how: Literal["missed", "moved", "end"]


def _part(
    name: str, truth: Sequence[Point], floor: int, hi: int, before: Any, now: Any, fed: int
) -> Divergence:
    """Where a report with ``now`` parts, the last one in step having said ``before`` at
    point ``floor``: the first later point whose truth ``before`` does not say (the consumer
    did not follow), else the newest point (it moved on its own)."""
    if before is not None:
        for p in range(floor + 1, hi + 1):
            if not _agree_on(name, truth[p].fields.get(name), before):
                point = truth[p]
                return Divergence(
                    name,
                    point.fields.get(name),
                    before,
                    point.seq,
                    point.minute,
                    int(point.fields.get("run", 0)),
                    point.index,
                    "missed",
                )
    point = truth[hi]
    return Divergence(
        name,
        point.fields.get(name),
        now,
        point.seq,
        point.minute,
        int(point.fields.get("run", 0)),
        fed - 1,
        "moved",
    )


def first_divergence(
    truth: Sequence[Point],
    reports: Sequence[tuple[int, Mapping[str, Any]]],
    wrong: Sequence[str],
) -> Divergence | None:
    """Where the consumer first parted from ``truth`` on one of the fields ``wrong`` at the end.

    Args:
        truth: the true states in publishing order (a scenario's retained snapshots).
        reports: ``(fed, fields)`` per report read, in arrival order: ``fed`` is how many
            messages had been published when it arrived.
        wrong: the fields the last report has wrong.

    A report is in step when each of those fields says what the truth said at some point
    between the last report in step and the newest state published before it arrived (the
    consumer may lag), or exactly at the report's ``run`` and ``last_seq`` where it says
    them (never back before the last report in step). The first report out of step parts
    where the truth moved away from what the consumer said before (it missed a change), or,
    if the truth did not move, where the report came (it moved on its own). When every
    report is in step, the consumer parts where the truth last moved away from its last
    report. None without a truth or a report.
    """
    if not truth or not reports:
        return None
    at = {(int(p.fields.get("run", 0)), p.seq): i for i, p in enumerate(truth)}
    indices = [p.index for p in truth]
    floor = 0
    before: Mapping[str, Any] | None = None
    for fed, fields in reports:
        hi = bisect.bisect_left(indices, fed) - 1
        exact = at.get((fields.get("run", -1), fields.get("last_seq", -1)))
        if exact is not None and exact >= floor:  # not back before a report in step
            lo, hi = exact, exact
        elif hi < 0:
            continue  # before the first state: nothing to hold it to
        else:
            lo = min(floor, hi)
        window = range(lo, hi + 1)
        names = [n for n in wrong if n in fields]
        fits = {n: [p for p in window if _fits(truth[p], n, fields[n])] for n in names}
        for n in names:
            if not fits[n]:
                said = None if before is None else before.get(n)
                return _part(n, truth, floor, hi, said, fields[n], fed)
        common = set(window).intersection(*fits.values()) if fits else set(window)
        if common:
            floor = min(common)
        before = fields
    last = reports[-1][1]
    name = next((n for n in wrong if n in last), wrong[0])
    end = len(truth) - 1
    return _part(name, truth, floor, end, last.get(name), last.get(name), truth[end].index + 1)


def _fits(point: Point, name: str, value: Any) -> bool:
    return _agree_on(name, point.fields.get(name), value)
