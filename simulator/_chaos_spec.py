"""The chaos SPEC: which faults to inject, how often; parsed once, with errors a person can act on.

``duplicate=0.05,reorder=0.1:3,drop=0.02,delay=0.1:250,stale-state=0.03,restart=30,``
``correction=0.5,burst=60:2``: see :mod:`simulator._chaos` for what each fault does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from events import LAST_MINUTE

__all__ = ["FAULTS", "ChaosSpec", "ChaosSpecError"]

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


class ChaosSpecError(ValueError):
    """A SPEC that cannot be read; the message names the fault and the form expected."""


def _prob(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise ChaosSpecError(
            f"chaos fault {name!r}: {text!r} is not a probability from 0 to 1; "
            f"expected {FAULTS[name]}"
        )
    return value


def _number(name: str, text: str, what: str, *, integer: bool, low: float) -> float:
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = low - 1
    if value < low:
        kind = "a whole number" if integer else "a number"
        raise ChaosSpecError(
            f"chaos fault {name!r}: {what} {text!r} is not {kind} >= {low:g}; "
            f"expected {FAULTS[name]}"
        )
    return value


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
                    f"unknown chaos fault {name!r} in {part!r}; known: {', '.join(FAULTS.values())}"
                )
            if not eq or not arg.strip():
                raise ChaosSpecError(f"chaos fault {name!r} needs a value; expected {FAULTS[name]}")
            if name in seen:
                raise ChaosSpecError(f"chaos fault {name!r} is given twice; expected it once")
            seen.add(name)
            head, colon, tail = arg.strip().partition(":")
            if name in ("duplicate", "drop", "stale-state", "correction") and colon:
                raise ChaosSpecError(f"chaos fault {name!r}: {arg!r}; expected {FAULTS[name]}")
            match name:
                case "duplicate" | "drop" | "correction":
                    values[name] = _prob(name, head)
                case "stale-state":
                    values["stale_state"] = _prob(name, head)
                case "reorder":
                    values["reorder"] = _prob(name, head)
                    if colon:
                        window = _number(name, tail, "WINDOW", integer=True, low=1)
                        values["reorder_window"] = int(window)
                case "delay":
                    if not colon:
                        raise ChaosSpecError(
                            f"chaos fault 'delay' needs MS after the probability; "
                            f"expected {FAULTS[name]}"
                        )
                    values["delay"] = _prob(name, head)
                    values["delay_ms"] = _number(name, tail, "MS", integer=False, low=0)
                case "restart":
                    if colon:
                        raise ChaosSpecError(
                            f"chaos fault 'restart': {arg!r}; expected {FAULTS[name]}"
                        )
                    values["restart"] = int(_number(name, head, "MINUTE", integer=True, low=1))
                case "burst":
                    if not colon:
                        raise ChaosSpecError(
                            f"chaos fault 'burst' needs SECONDS after the minute; "
                            f"expected {FAULTS[name]}"
                        )
                    minute = int(_number(name, head, "MINUTE", integer=True, low=1))
                    seconds = _number(name, tail, "SECONDS", integer=False, low=0)
                    values["burst"] = (minute, seconds)
        restart = values.get("restart")
        if restart is not None and restart > LAST_MINUTE:
            raise ChaosSpecError(f"chaos fault 'restart': minute {restart} is past {LAST_MINUTE}")
        if "burst" in values and values["burst"][0] > LAST_MINUTE:
            minute = values["burst"][0]
            raise ChaosSpecError(f"chaos fault 'burst': minute {minute} is past {LAST_MINUTE}")
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
