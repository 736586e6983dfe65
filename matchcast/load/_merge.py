"""Combine the reports of several shards (processes or machines) into one.

Nothing is averaged: latency histograms are merged from their HDR encodings, per-stream
accounting is rebuilt from each shard's seen-bitmaps (so an event two shards' members both
received is a duplicate, and an event no shard received is loss), and the per-second series
are aligned on wall-clock seconds.

A report is read as a shard wrote it, or refused: every figure must be finite (a NaN or an
infinity is no measurement), and every count (:data:`COUNTS`) a whole number, 0 or more.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hdrh.histogram import HdrHistogram

from events import MatchFileError
from matchcast.load._accounting import (
    ConsumerAccount,
    StreamStats,
    decode_histogram,
    encode_histogram,
    histogram_summary,
    new_histogram,
)
from matchcast.load._nodes import merge_node_figures
from matchcast.load._report import READABLE_FORMATS, REPORT_FORMAT, split_totals
from simulator import LOAD_REPORT, parse_json, read_input

__all__ = ["MergeError", "merge_reports", "read_reports"]


class MergeError(ValueError):
    """The reports cannot be merged; the message says which and why."""


#: The counts of a shard report, each a whole number, 0 or more (or null: unknown). A ``*``
#: stands for every key of an object or every item of a list; ``[i]`` for item ``i``.
COUNTS: tuple[str, ...] = (
    "parameters.matches",
    "parameters.subscribers",
    *(
        f"sender.{key}"
        for key in (
            "events_published",
            "states_published",
            "publish_failures",
            "matches_started",
            "matches_completed",
            "overruns",
        )
    ),
    "sender.failure_reasons.*",
    "delivery.consumers.*.members",
    "delivery.consumers.*.malformed",
    *(f"{kind}.*.*[{i}]" for kind in ("streams", "injected_streams") for i in range(5)),
    "expected_last_seq.*",
    *(f"per_second.*.{key}" for key in ("t", "offered", "sent", "delivered")),
    *(
        f"connections.*.{key}"
        for key in ("connected", "connect_failures", "disconnects", "reconnects")
    ),
    "verification.matches",
    *(f"verification.consumers.*.{key}" for key in ("matches", "right", "wrong", "missing")),
    "nodes.*.connections.*",
    *(
        f"nodes.*.{key}"
        for key in (
            "events_published",
            "events_acknowledged",
            "publish_failures",
            "received",
            "unique",
            "duplicates",
            "reordered",
            "lost",
        )
    ),
    "chaos.faults.*",
    "chaos.sent.*",
)
_STEP = re.compile(r"\.?([^.\[]+)|\[(\d+)\]")


def _steps(pattern: str) -> list[str | int]:
    return [int(i) if i else key for key, i in _STEP.findall(pattern)]


_COUNT_STEPS = [_steps(p) for p in COUNTS]


def _name(path: Sequence[str | int]) -> str:
    """``per_second[0].delivered``; a key that is no plain word is quoted: ``nodes["mqtt://h:1"]``."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif re.fullmatch(r"[\w-]+", step):
            out += f".{step}" if out else step
        else:
            out += f"[{json.dumps(step)}]"
    return out


def _children(value: Any) -> list[tuple[str | int, Any]]:
    if isinstance(value, dict):
        return list(value.items())
    return list(enumerate(value)) if isinstance(value, list) else []


def _found(
    value: Any, steps: Sequence[str | int], path: list[str | int]
) -> Iterator[tuple[list[str | int], Any]]:
    """``(path, value)`` of each value at ``steps`` under ``value``; absent ones are skipped."""
    if not steps:
        yield path, value
        return
    step, rest = steps[0], steps[1:]
    for key, item in _children(value):
        if step in ("*", key):
            yield from _found(item, rest, [*path, key])


def _numbers(value: Any, path: list[str | int]) -> Iterator[tuple[list[str | int], float]]:
    """Every float under ``value``, with its path (ints are always finite)."""
    if isinstance(value, float):
        yield path, value
    for key, item in _children(value):
        yield from _numbers(item, [*path, key])


def _figure_problem(report: dict[str, Any]) -> str | None:
    """What is wrong with the figures of ``report``, naming the field; None when nothing is."""
    for path, number in _numbers(report, []):
        if not math.isfinite(number):
            return f"{_name(path)} is {number}: a figure must be a finite number"
    for steps in _COUNT_STEPS:
        for path, value in _found(report, steps, []):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return f"{_name(path)} is {value!r}: a count is a whole number, 0 or more"
    return None


def read_reports(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The load reports in ``paths``, each read within the bounds of every input file: a
    regular file of at most 256 MiB, JSON nested at most 200 deep (see :mod:`simulator`).

    Raises:
        MergeError: a file cannot be read, is not a JSON object, or holds a figure that is not
            finite or a count that is not a whole number, 0 or more; the message names the
            file and the field.
    """
    reports = []
    for path in paths:
        try:
            data = parse_json(read_input(path, LOAD_REPORT), path)
        except MatchFileError as err:
            raise MergeError(f"{path}: {'; '.join(err.problems)}") from None
        if not isinstance(data, dict):
            raise MergeError(
                f"{path}: expected a matchcast load report (a JSON object), "
                f"got {type(data).__name__}"
            )
        if (problem := _figure_problem(data)) is not None:
            raise MergeError(f"{path}: {problem}")
        reports.append(data)
    return reports


def _accounts(reports: list[dict[str, Any]]) -> dict[str, ConsumerAccount]:
    accounts: dict[str, ConsumerAccount] = {}
    for report in reports:
        members = {c["consumer"]: c for c in report["delivery"]["consumers"]}
        for name, streams in report["streams"].items():
            acc = accounts.get(name)
            if acc is None:
                acc = accounts[name] = ConsumerAccount(name, members=0)
            entry = members.get(name, {})
            acc.members += int(entry.get("members", 1))
            acc.malformed += int(entry.get("malformed", 0))
            for match_id, wire in streams.items():
                stream = StreamStats.from_wire(wire)
                if match_id in acc.streams:
                    acc.streams[match_id].merge(stream)
                else:
                    acc.streams[match_id] = stream
    return accounts


#: The longest run a merged report has seconds for (its per_second rows).
MAX_MERGED_SECONDS = 24 * 3600


def _per_second(reports: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    base = min(int(r["started_at_epoch"]) for r in reports)
    rows: dict[int, dict[str, Any]] = {}
    hists: dict[int, Any] = {}
    for report in reports:
        offset = int(report["started_at_epoch"]) - base
        for row, encoded in zip(report["per_second"], report["per_second_hdr"], strict=True):
            t = row["t"] + offset
            acc = rows.setdefault(t, {"t": t, "offered": 0, "sent": 0, "delivered": 0})
            for key in ("offered", "sent", "delivered"):
                acc[key] += row[key]
            hists.setdefault(t, new_histogram()).add(decode_histogram(encoded))
    out, out_hdr = [], []
    span = max(rows, default=-1) + 1
    if span > MAX_MERGED_SECONDS:
        raise MergeError(
            f"the shards' seconds span {span} s (more than a day): their runs did not overlap, "
            "or a report's started_at_epoch or per_second is damaged"
        )
    for t in range(span):
        row = rows.get(t, {"t": t, "offered": 0, "sent": 0, "delivered": 0})
        hist = hists.get(t, new_histogram())
        row.update({f"latency_{k}": v for k, v in histogram_summary(hist).items() if k != "count"})
        out.append(row)
        out_hdr.append(encode_histogram(hist))
    return out, out_hdr


def _connections(reports: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    parts = [r["connections"][kind] for r in reports]
    connected = [p for p in parts if p["connected"]]
    return {
        "connected": sum(p["connected"] for p in parts),
        "connect_failures": sum(p["connect_failures"] for p in parts),
        "failure_reasons": [f for p in parts for f in p["failure_reasons"]][:10],
        "connect_ms": {
            "min": min((p["connect_ms"]["min"] for p in connected), default=0.0),
            "median": (
                round(statistics.median(p["connect_ms"]["median"] for p in connected), 3)
                if connected
                else 0.0
            ),
            "max": max((p["connect_ms"]["max"] for p in connected), default=0.0),
        },
        "disconnects": sum(p["disconnects"] for p in parts),
        "reconnects": sum(p["reconnects"] for p in parts),
    }


def merge_reports(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One report from the reports of several shards of the same run.

    Raises:
        MergeError: a report is of another format, lacks per-stream data (run each shard
            with ``--shard i/n``, or use ``--workers``), or lacks a field a report has.
    """
    if not reports:
        raise MergeError("no reports to merge")
    for i, r in enumerate(reports):
        if (
            not isinstance(r, dict)
            or r.get("kind") != "matchcast-load-report"
            or r.get("format") not in READABLE_FORMATS
        ):
            formats = " or ".join(str(f) for f in READABLE_FORMATS)
            raise MergeError(f"report {i + 1} is not a matchcast load report (format {formats})")
        if r.get("streams") is None:
            raise MergeError(
                f"report {i + 1} has no per-stream data: run each shard with --shard i/n"
            )
        if (problem := _figure_problem(r)) is not None:
            raise MergeError(f"report {i + 1}: {problem}")
    try:
        return _merge(reports)
    except MergeError:
        raise
    except Exception as err:  # any damage (an infinity, a bad histogram) costs the merge only
        raise MergeError(
            f"a report is damaged ({type(err).__name__}: {err}): "
            "merge the reports the shards wrote, unedited"
        ) from None


def _merge(reports: list[dict[str, Any]]) -> dict[str, Any]:
    expected: dict[str, int] = {}
    final_scores: dict[str, Any] = {}
    for r in reports:
        expected.update(r["expected_last_seq"])
        final_scores.update(r["final_scores"])
    injected = {
        m: StreamStats.from_wire(w)
        for r in reports
        for m, w in (r.get("injected_streams") or {}).items()
    }
    consumers = [acc.totals(expected, injected) for acc in _accounts(reports).values()]
    latency, lateness = new_histogram(), new_histogram()
    for r in reports:
        latency.add(decode_histogram(r["latency_hdr"]))
        lateness.add(decode_histogram(r["sender"]["lateness_hdr"]))
    per_second, per_second_hdr = _per_second(reports)
    senders = [r["sender"] for r in reports]
    reasons: Counter[str] = Counter()
    for s in senders:
        reasons.update(s["failure_reasons"])
    totals = _delivery_totals(consumers)
    verifications = [r["verification"] for r in reports if r.get("verification")]
    by_consumer = _verified_by_consumer(verifications)
    params = [r["parameters"] for r in reports]
    return {
        "format": REPORT_FORMAT,
        "kind": "matchcast-load-report",
        "created_at": max(r["created_at"] for r in reports),
        "parameters": {
            "merged_from": params,
            "matches": sum(int(p.get("matches") or 0) for p in params),
            "subscribers": sum(int(p.get("subscribers") or 0) for p in params),
            "qos": params[0].get("qos"),
        },
        "sender": _sender(senders, reasons, lateness),
        "delivery": {
            **totals,
            "delivered_events_per_s": round(
                sum(r["delivery"]["delivered_events_per_s"] for r in reports), 1
            ),
            "consumers": consumers,
        },
        "latency_ms": histogram_summary(latency),
        "latency_hdr": encode_histogram(latency),
        "per_second": per_second,
        "per_second_hdr": per_second_hdr,
        "started_at_epoch": min(r["started_at_epoch"] for r in reports),
        "connections": {k: _connections(reports, k) for k in ("publishers", "probes")},
        "verification": _verification(verifications, by_consumer),
        "expected_last_seq": expected,
        "final_scores": final_scores,
        "nodes": merge_node_figures(reports, {c["consumer"]: c["lost"] for c in consumers}),
        "streams": None,
        "chaos": _chaos([r["chaos"] for r in reports if r.get("chaos")]),
        "injected_streams": None,
    }


def _delivery_totals(consumers: list[dict[str, Any]]) -> dict[str, Any]:
    """The delivery figures of the whole run, from each consumer's (summed, or the most)."""
    totals = {
        key: sum(c[key] for c in consumers)
        for key in ("expected", "received", "unique", "lost", "duplicates", "reordered")
    }
    totals["max_displacement"] = max((c["max_displacement"] for c in consumers), default=0)
    totals["unexpected"] = sum(c["unexpected"] for c in consumers)
    totals["malformed"] = sum(c["malformed"] for c in consumers)
    totals.update(split_totals(consumers))
    return totals


def _sender(
    senders: list[dict[str, Any]], reasons: Counter[str], lateness: HdrHistogram
) -> dict[str, Any]:
    """The shards' senders as one: counts and rates summed, the longest send, the lateness
    histogram merged (``lateness``), and the failure ``reasons`` counted across them."""
    return {
        "events_published": sum(s["events_published"] for s in senders),
        "states_published": sum(s["states_published"] for s in senders),
        "publish_failures": sum(s["publish_failures"] for s in senders),
        "failure_reasons": dict(reasons),
        "matches_started": sum(s["matches_started"] for s in senders),
        "matches_completed": sum(s["matches_completed"] for s in senders),
        "send_seconds": max(s["send_seconds"] for s in senders),
        "offered_events_per_s": round(sum(s["offered_events_per_s"] for s in senders), 1),
        "achieved_events_per_s": round(sum(s["achieved_events_per_s"] for s in senders), 1),
        "scheduled": all(s.get("scheduled", True) for s in senders),
        "overruns": sum(s["overruns"] for s in senders),
        "overrun_threshold_ms": senders[0]["overrun_threshold_ms"],
        "lateness_ms": histogram_summary(lateness),
        "lateness_hdr": encode_histogram(lateness),
        # What a shard's sender says of itself (reports of this version): the most lag,
        # whether any fell behind, stops under --stages.
        "lag_max_ms": max((s.get("lag_max_ms", 0.0) for s in senders), default=0.0),
        "behind": any(s.get("behind", s["overruns"] > 0) for s in senders),
        "latency_includes_sender_backlog": not all(s.get("scheduled", True) for s in senders),
        "matches_stopped": sum(s.get("matches_stopped", 0) for s in senders),
    }


def _verified_by_consumer(verifications: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each consumer's verification summed over the shards, with the first ten samples of
    its wrong and missing matches."""
    by_consumer: dict[str, dict[str, Any]] = {}
    for v in verifications:
        for c in v["consumers"]:
            into = by_consumer.setdefault(
                c["consumer"],
                {"consumer": c["consumer"], "matches": 0, "right": 0, "wrong": 0, "missing": 0,
                 "wrong_sample": [], "missing_sample": []},
            )  # fmt: skip
            for key in ("matches", "right", "wrong", "missing"):
                into[key] += c[key]
            into["wrong_sample"] = (into["wrong_sample"] + c["wrong_sample"])[:10]
            into["missing_sample"] = (into["missing_sample"] + c["missing_sample"])[:10]
    return by_consumer


def _verification(
    verifications: list[dict[str, Any]], by_consumer: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """The verification section: ok only when every shard's was; None when no shard verified."""
    if not verifications:
        return None
    return {
        "ok": all(v["ok"] for v in verifications),
        "matches": sum(v["matches"] for v in verifications),
        "consumers": list(by_consumer.values()),
    }


def _chaos(parts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The shards' chaos sections, summed (each shard injected into its own matches)."""
    if not parts:
        return None
    faults: Counter[str] = Counter()
    sent: Counter[str] = Counter()
    for p in parts:
        faults.update(p["faults"])
        sent.update(p["sent"])
    return {
        "spec": parts[0]["spec"],
        "seed": parts[0]["seed"],
        "faults": dict(sorted(faults.items())),
        "faults_total": sum(faults.values()),
        "sent": dict(sent),
    }
