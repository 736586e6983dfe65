"""The verdict as people and CI read it: a scorecard table, JUnit XML, and a JSON report.

Each failure says the first divergence (the field, expected against reported, the seq and
minute where they part) and what caused it: the chaos log line (docs/chaos.md) or the
scenario's step. The JSON report keeps every report the consumer sent on a failed scenario.
"""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from typing import Any

from rich.table import Table
from rich.text import Text

from matchcast.verify._run import ScenarioResult, Verdict

__all__ = ["REPORT_FORMAT", "cause_line", "junit_xml", "report_json", "scorecard", "summary"]

#: The format of the JSON report (``"kind": "matchcast-verify"``).
REPORT_FORMAT = 1

#: A chaos log line's keys shown in the scorecard (the JSON and JUnit reports have it whole).
_CAUSE_KEYS = ("fault", "seq", "clock")


def cause_line(cause: dict[str, Any] | None) -> str:
    """The cause in a few words: ``{"fault": "drop", "seq": 20, "clock": "18'"}`` and its
    details, or the scenario's step as it says it."""
    if cause is None:
        return "no fault before it: wrong on a clean stretch"
    if "step" in cause:
        return str(cause["step"])
    shown = {k: cause[k] for k in _CAUSE_KEYS if k in cause}
    skip = {*_CAUSE_KEYS, "match_id", "run", "index", "at_s"}
    shown |= {k: v for k, v in cause.items() if k not in skip}
    return json.dumps(shown, ensure_ascii=False)


def scorecard(verdict: Verdict) -> Table:
    """The scorecard: one row per scenario."""
    table = Table(title=f"matchcast verify: {verdict.options.consumer_id}", title_justify="left")
    table.add_column("scenario", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("first divergence")
    table.add_column("caused by")
    for r in verdict.results:
        mark = Text("pass", style="green") if r.passed else Text("FAIL", style="bold red")
        why = "" if r.passed else r.reason
        cause = "" if r.passed or r.played is None or not r.reports else cause_line(r.cause)
        table.add_row(r.scenario.name, mark, Text(why), Text(cause))
    return table


def summary(verdict: Verdict) -> str:
    """One line: how many passed, and how long it took."""
    passed = sum(r.passed for r in verdict.results)
    total = len(verdict.results)
    word = "all passed" if verdict.ok else f"{total - passed} failed"
    return f"{passed}/{total} scenarios passed ({word}) in {verdict.duration_s:.1f} s"


def _result_json(r: ScenarioResult) -> dict[str, Any]:
    played = r.played
    out: dict[str, Any] = {
        "name": r.scenario.name,
        "description": r.scenario.description,
        "passed": r.passed,
        "duration_s": round(r.duration_s, 3),
        "match_id": r.scenario.match_id,
        "reason": r.reason or None,
        "reports": len(r.reports),
    }
    if played is not None:
        truth = played.truth
        out |= {
            "chaos": played.chaos,
            "seed": played.seed,
            "messages": played.end - played.first,
            "truth": {
                "score": truth.score,
                "status": truth.status,
                "run": truth.run,
                "last_seq": truth.last_seq,
            },
            "faults": [f.to_json() for f in played.faults],
            "steps": [s.text for s in played.steps],
        }
    if not r.passed:
        d = r.divergence
        out["divergence"] = (
            None
            if d is None
            else {
                "field": d.field,
                "expected": d.expected,
                "reported": d.reported,
                "seq": d.seq,
                "minute": d.minute,
                "run": d.run,
                "how": d.how,
            }
        )
        out["cause"] = r.cause
        out["wrong"] = [
            {"field": w.field, "expected": w.expected, "reported": w.reported} for w in r.wrong
        ]
        out["final_report"] = r.final
        first = played.sent[0].at if played is not None and played.sent else 0.0
        out["every_report"] = [
            {"after_s": round(rep.at - first, 4), "fields": rep.fields, "problem": rep.problem}
            for rep in r.reports
        ]
    return out


def report_json(verdict: Verdict, broker: str) -> dict[str, Any]:
    """The ``--report`` file's content."""
    o = verdict.options
    return {
        "kind": "matchcast-verify",
        "format": REPORT_FORMAT,
        "consumer": o.consumer_id,
        "broker": broker,
        "root": o.topics.root,
        "seed": o.seed,
        "speed": "max" if o.speed is None else o.speed,
        "ok": verdict.ok,
        "passed": sum(r.passed for r in verdict.results),
        "failed": sum(not r.passed for r in verdict.results),
        "duration_s": round(verdict.duration_s, 3),
        "scenarios": [_result_json(r) for r in verdict.results],
    }


def junit_xml(verdict: Verdict, broker: str) -> bytes:
    """JUnit XML: a test suite of one test case per scenario, failures with the divergence."""
    o = verdict.options
    failures = sum(not r.passed for r in verdict.results)
    attrs = {
        "name": f"matchcast verify {o.consumer_id}",
        "tests": str(len(verdict.results)),
        "failures": str(failures),
        "errors": "0",
        "time": f"{verdict.duration_s:.3f}",
    }
    suites = ET.Element("testsuites", attrs)
    suite = ET.SubElement(
        suites, "testsuite", {**attrs, "timestamp": dt.datetime.now(dt.UTC).isoformat()}
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("broker", broker),
        ("root", o.topics.root),
        ("seed", str(o.seed)),
        ("speed", "max" if o.speed is None else f"{o.speed:g}"),
    ):
        ET.SubElement(props, "property", {"name": name, "value": value})
    for r in verdict.results:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"matchcast.verify.{o.consumer_id}",
                "name": r.scenario.name,
                "time": f"{r.duration_s:.3f}",
            },
        )
        if r.passed:
            continue
        failure = ET.SubElement(case, "failure", {"message": r.reason, "type": "divergence"})
        lines = [r.scenario.description, r.reason]
        if r.cause is not None:
            lines.append("caused by: " + json.dumps(r.cause, ensure_ascii=False))
        if r.final is not None:
            lines.append("last report: " + json.dumps(r.final, ensure_ascii=False))
        if r.played is not None:
            lines.append(f"chaos: {r.played.chaos} (seed {r.played.seed})")
        failure.text = "\n".join(lines)
    ET.indent(suites)
    body: bytes = ET.tostring(suites, encoding="utf-8", xml_declaration=True)
    return body + b"\n"
