"""The chaos SPEC: which faults to inject, how often; parsed once, with errors a person can act on.

``duplicate=0.05,reorder=0.1:3,drop=0.02,delay=0.1:250,stale-state=0.03,restart=30,``
``correction=0.5,burst=60:2``: see :mod:`simulator._chaos` for what each fault does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from events import LAST_MINUTE, decimal_number, quote, shown, whole_number

__all__ = ["FAULTS", "RANGES", "ChaosSpec", "ChaosSpecError"]

#: Every fault kind with the form it takes in a SPEC: one place, for parsing, errors and docs.
FAULTS: dict[str, str] = {
    "duplicate": "duplicate=P",
    "reorder": "reorder=P[:WINDOW]",
    "drop": "drop=P",
    "delay": "delay=P:MS",
    "stale-state": "stale-state=P",
    "restart": "restart=MINUTE",
    "correction": "correction=P",
    "burst": "burst=MINUTE:SECONDS",
}


#: The range of every parameter of a SPEC, low to high, inclusive: one place, for parsing,
#: errors and docs (docs/chaos.md lists them; a test checks the two agree). Each value is
#: finite, in ASCII digits, and in its range, or the SPEC is refused: a delay of ``1e12`` ms or
#: a burst of ``1e308`` s once held a replay at ``--speed max`` until it was killed.
RANGES: dict[str, tuple[float, float]] = {
    "P": (0.0, 1.0),
    "WINDOW": (1, 100),
    "MS": (0.0, 60_000.0),
    "MINUTE": (1, LAST_MINUTE),
    "SECONDS": (0.0, 600.0),
}
#: The parameters that are whole numbers.
_WHOLE = frozenset({"WINDOW", "MINUTE"})


class ChaosSpecError(ValueError):
    """A SPEC that cannot be read; the message names the fault and the form expected."""


def _value(name: str, text: str, what: str) -> float:
    """Parameter ``what`` (``P``, ``MS``, ...) of fault ``name``, checked against its range."""
    low, high = RANGES[what]
    whole = what in _WHOLE
    try:
        value: float = whole_number(text.strip()) if whole else decimal_number(text.strip())
    except ValueError:
        value = math.nan
    if not low <= value <= high:  # NaN too
        kind = "a whole number" if whole else "a number"
        raise ChaosSpecError(
            f"chaos fault {name!r}: {what} {quote(text)} is not {kind} from {shown(low)} to "
            f"{shown(high)}; expected {FAULTS[name]}"
        )
    return value


def _prob(name: str, text: str) -> float:
    return _value(name, text, "P")


@dataclass(frozen=True, slots=True)
class ChaosSpec:
    """Which faults, how often. Parse one with :meth:`parse`; ``str()`` gives it back."""

    duplicate: float = 0.0
    reorder: float = 0.0
    reorder_window: int = 3
    drop: float = 0.0
    delay: float = 0.0
    delay_ms: float = 0.0
    stale_state: float = 0.0
    restart: int | None = None
    correction: float = 0.0
    burst: tuple[int, float] | None = None

    @classmethod
    def parse(cls, text: str) -> ChaosSpec:
        """Read ``duplicate=0.05,reorder=0.1:3,...``.

        Raises:
            ChaosSpecError: an unknown fault, a fault given twice, or a bad value.
        """
        values: dict[str, Any] = {}
        seen: set[str] = set()
        parts = [p.strip() for p in text.split(",")]
        if not any(parts):
            raise ChaosSpecError(
                f"empty chaos spec; expected faults like {', '.join(FAULTS.values())}"
            )
        for part in parts:
            name, eq, arg = part.partition("=")
            name = name.strip()
            if name not in FAULTS:
                raise ChaosSpecError(
                    f"unknown chaos fault {quote(name)} in {quote(part)}; "
                    f"known: {', '.join(FAULTS.values())}"
                )
            if not eq or not arg.strip():
                raise ChaosSpecError(f"chaos fault {name!r} needs a value; expected {FAULTS[name]}")
            if name in seen:
                raise ChaosSpecError(f"chaos fault {name!r} is given twice; expected it once")
            seen.add(name)
            head, colon, tail = arg.strip().partition(":")
            if name in ("duplicate", "drop", "stale-state", "correction") and colon:
                raise ChaosSpecError(f"chaos fault {name!r}: {quote(arg)}; expected {FAULTS[name]}")
            match name:
                case "duplicate" | "drop" | "correction":
                    values[name] = _prob(name, head)
                case "stale-state":
                    values["stale_state"] = _prob(name, head)
                case "reorder":
                    values["reorder"] = _prob(name, head)
                    if colon:
                        values["reorder_window"] = int(_value(name, tail, "WINDOW"))
                case "delay":
                    if not colon:
                        raise ChaosSpecError(
                            f"chaos fault 'delay' needs MS after the probability; "
                            f"expected {FAULTS[name]}"
                        )
                    values["delay"] = _prob(name, head)
                    values["delay_ms"] = _value(name, tail, "MS")
                case "restart":
                    if colon:
                        raise ChaosSpecError(
                            f"chaos fault 'restart': {quote(arg)}; expected {FAULTS[name]}"
                        )
                    values["restart"] = int(_value(name, head, "MINUTE"))
                case "burst":
                    if not colon:
                        raise ChaosSpecError(
                            f"chaos fault 'burst' needs SECONDS after the minute; "
                            f"expected {FAULTS[name]}"
                        )
                    minute = int(_value(name, head, "MINUTE"))
                    seconds = _value(name, tail, "SECONDS")
                    values["burst"] = (minute, seconds)
        return cls(**values)

    def __str__(self) -> str:
        parts = []
        if self.duplicate:
            parts.append(f"duplicate={self.duplicate:g}")
        if self.reorder:
            parts.append(f"reorder={self.reorder:g}:{self.reorder_window}")
        if self.drop:
            parts.append(f"drop={self.drop:g}")
        if self.delay:
            parts.append(f"delay={self.delay:g}:{self.delay_ms:g}")
        if self.stale_state:
            parts.append(f"stale-state={self.stale_state:g}")
        if self.restart is not None:
            parts.append(f"restart={self.restart}")
        if self.correction:
            parts.append(f"correction={self.correction:g}")
        if self.burst is not None:
            parts.append(f"burst={self.burst[0]}:{self.burst[1]:g}")
        return ",".join(parts)
