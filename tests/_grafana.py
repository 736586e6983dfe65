"""The Grafana dashboard of deploy/ and the metric names its PromQL reads, for the tests that
check it charts only metrics the load tester exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["dashboard_exprs", "metric_names"]

ROOT = Path(__file__).resolve().parent.parent

#: PromQL words that are no metric: functions are followed by "(", these are not.
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (label matchers, ranges, grouping
    clauses, strings, numbers and function names left out)."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", bare)
    bare = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", "", bare)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", bare):
        following = bare[m.end() :].lstrip()
        if following.startswith("(") or m.group() in _KEYWORDS:
            continue
        names.add(m.group())
    return names


def dashboard_exprs() -> list[str]:
    """Every PromQL expression the load dashboard of deploy/grafana charts."""
    doc = json.loads((ROOT / "deploy/grafana/dashboards/matchcast-load.json").read_text())
    return [t["expr"] for panel in doc["panels"] for t in panel.get("targets", [])]
