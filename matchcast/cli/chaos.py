"""The ground-truth files of ``replay`` and ``load``'s chaos options (declared, like every
option the commands share, in :mod:`matchcast.cli.options`):

- ``--chaos SPEC --seed N``: the faults (:class:`simulator.ChaosSpec`) and their seed;
- ``--chaos-log FILE``: every fault injected, one JSON object a line (JSON Lines);
- ``--truth FILE``: the true final state of every match, to check a consumer against.

The truth file is ``{"kind": "matchcast-truth", "format": 1, "chaos": SPEC, "seed": N,
"matches": {match_id: MatchState}}``; each state is the wire's state snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from events import MatchState
from simulator import ChaosSpec, Fault

__all__ = [
    "TRUTH_FORMAT",
    "parse_chaos",
    "read_truth",
    "write_chaos_log",
    "write_truth",
]

#: Bumped when the truth file's layout changes incompatibly.
TRUTH_FORMAT = 1


def parse_chaos(text: str | None) -> ChaosSpec | None:
    """The spec of ``--chaos``, or None without one.

    Raises:
        simulator.ChaosSpecError: the SPEC is bad; the message says which fault and how.
    """
    return None if text is None else ChaosSpec.parse(text)


def write_chaos_log(path: Path, faults: Iterable[Fault]) -> int:
    """Write ``faults`` as JSON Lines; returns how many."""
    n = 0
    with path.open("w", encoding="utf-8") as out:
        for fault in faults:
            out.write(json.dumps(fault.to_json(), ensure_ascii=False, sort_keys=True) + "\n")
            n += 1
    return n


def truth_document(
    truth: Mapping[str, MatchState], chaos: ChaosSpec | None, seed: int
) -> dict[str, Any]:
    """The truth file's content."""
    return {
        "kind": "matchcast-truth",
        "format": TRUTH_FORMAT,
        "chaos": str(chaos) if chaos is not None else "",
        "seed": seed,
        "matches": {m: s.model_dump(mode="json") for m, s in sorted(truth.items())},
    }


def write_truth(
    path: Path, truth: Mapping[str, MatchState], chaos: ChaosSpec | None, seed: int
) -> None:
    """Write the true final state of each match."""
    path.write_text(json.dumps(truth_document(truth, chaos, seed), indent=1, ensure_ascii=False))


def read_truth(path: Path) -> dict[str, MatchState]:
    """The states of a truth file.

    Raises:
        ValueError: the file is not a matchcast truth file.
    """
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a readable truth file ({err})") from err
    if not isinstance(doc, dict) or doc.get("kind") != "matchcast-truth":
        raise ValueError(f"{path}: not a matchcast truth file (no kind matchcast-truth)")
    return {m: MatchState.model_validate(s) for m, s in doc["matches"].items()}
