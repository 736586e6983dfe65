"""A run's figures as one JSON-ready dict, and the final table.

The report holds every figure and the run's parameters; latency histograms go in as their
compressed HDR encoding too, so reports of several processes or machines can be merged
without averaging percentiles.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from matchcast.load._accounting import (
    encode_histogram,
    histogram_summary,
)
from matchcast.load._nodes import run_node_figures
from matchcast.load._run import ConnectionHealth, LoadRun

__all__ = [
    "READABLE_FORMATS",
    "REPORT_FORMAT",
    "build_report",
    "chaos_summary",
    "render_table",
    "split_totals",
]

#: Bumped when the report's layout changes. 2: ``chaos``, per-consumer and total ``injected``
#: and ``network`` splits of loss, duplicates and reordering, ``injected_streams``.
#: 3: ``nodes`` holds what flowed through each node (events published and acknowledged,
#: received, unique, lost, duplicates, reordered, latency), its connection counts under
#: ``connections``, counted on the node each client really connected to.
REPORT_FORMAT = 3
#: Report formats ``load merge`` reads.
READABLE_FORMATS = (1, 2, 3)


def _health(h: ConnectionHealth) -> dict[str, Any]:
    ms = h.connect_ms
    return {
        "connected": len(ms),
        "connect_failures": h.failures,
        "failure_reasons": h.failure_reasons[:10],
        "connect_ms": {
            "min": round(min(ms), 3) if ms else 0.0,
            "median": round(statistics.median(ms), 3) if ms else 0.0,
            "max": round(max(ms), 3) if ms else 0.0,
        },
        "disconnects": h.disconnects,
        "reconnects": h.reconnects,
    }


def split_totals(consumers: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """The ``injected`` and ``network`` figures summed over consumers."""
    return {
        part: {
            key: sum(c.get(part, {}).get(key, 0) for c in consumers)
            for key in ("lost", "duplicates", "reordered")
        }
        for part in ("injected", "network")
    }


def chaos_summary(
    spec: str | None, seed: int | None, fault_counts: dict[str, int], sent: dict[str, int]
) -> dict[str, Any] | None:
    """The report's ``chaos`` section: what was injected, as the sender did it."""
    if not spec:
        return None
    return {
        "spec": spec,
        "seed": seed,
        "faults": dict(sorted(fault_counts.items())),
        "faults_total": sum(fault_counts.values()),
        "sent": sent,
    }


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else 0.0


def build_report(
    run: LoadRun,
    parameters: dict[str, Any],
    *,
    streams: bool = False,
    nodes: Sequence[str] = (),
    seconds: Mapping[int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Every figure of a finished run, with ``parameters`` (what was asked for).

    ``seconds`` are the rows :class:`~matchcast.load.Seconds` gave while the run went
    (sender lag, live matches, subscribers, ...): each ``per_second`` row takes their keys.

    With ``streams``, every consumer's per-stream state goes in too, so that
    :func:`~matchcast.load.merge_reports` can combine the reports of several shards exactly.
    ``nodes`` are the nodes of the broker list: each has its entry in ``"nodes"``, even one
    that no connection reached.
    """
    stats = run.stats
    sender = run.sender
    assert sender is not None
    consumers = [acc.totals(stats.expected, stats.injected) for acc in run.accounts]
    received = sum(c["received"] for c in consumers)
    rx_span = max(run.last_rx - sender.wall0, 1e-9) if run.last_rx else 0.0
    overall = run.latency.histogram()
    per_second, per_second_hdr = _per_second(run, seconds or {})
    fault_counts: dict[str, int] = {}
    for fault in stats.faults:
        fault_counts[fault.fault] = fault_counts.get(fault.fault, 0) + 1
    never = sum(len(st.missing(stats.expected.get(m, 0))) for m, st in stats.injected.items())
    sent = {
        "never_sent": never,
        "duplicates": sum(st.duplicates for st in stats.injected.values()),
        "reordered": sum(st.reordered for st in stats.injected.values()),
    }
    return {
        "format": REPORT_FORMAT,
        "kind": "matchcast-load-report",
        "created_at": dt.datetime.now(dt.UTC).isoformat(),
        "parameters": parameters,
        "sender": _sender(run),
        "delivery": {
            **_totals(consumers),
            "delivered_events_per_s": _rate(received, rx_span),
            "consumers": consumers,
        },
        "latency_ms": histogram_summary(overall),
        "latency_hdr": encode_histogram(overall),
        "per_second": per_second,
        "per_second_hdr": per_second_hdr,
        "started_at_epoch": sender.wall0,
        "connections": {"publishers": _health(run.pubs), "probes": _health(run.probes)},
        "verification": run.verification,
        "aborted": run.aborted,
        "chaos": chaos_summary(parameters.get("chaos"), parameters.get("seed"), fault_counts, sent),
        "expected_last_seq": stats.expected,
        "final_scores": stats.final_scores,
        "nodes": {
            key: fig.to_report({c["consumer"]: c["lost"] for c in consumers})
            for key, fig in run_node_figures(
                run.nodes,
                run.publisher_figures(),
                listed=nodes,
                qos=run.options.shape.qos,
                shared=run.options.shared_group is not None,
            ).items()
        },
        "streams": (
            {acc.name: {m: st.to_wire() for m, st in acc.streams.items()} for acc in run.accounts}
            if streams
            else None
        ),
        "injected_streams": (
            {m: st.to_wire() for m, st in stats.injected.items()} if streams else None
        ),
    }


def _per_second(
    run: LoadRun, seconds: Mapping[int, dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each second's row (with the keys of the live ``seconds`` rows) and HDR encoding."""
    stats, latency = run.stats, run.latency
    last_sec = max([*latency.seconds(), *stats.sent.keys(), *stats.offered.keys(), 0])
    rows, hdrs = [], []
    for sec in range(last_sec + 1):
        hist = latency.histogram(sec)
        hdrs.append(encode_histogram(hist))
        row: dict[str, Any] = {
            "t": sec,
            "offered": stats.offered.get(sec, 0),
            "sent": stats.sent.get(sec, 0),
            "delivered": hist.get_total_count(),
        }
        row.update({f"latency_{k}": v for k, v in histogram_summary(hist).items() if k != "count"})
        extra = seconds.get(sec, {})
        row.update({k: v for k, v in extra.items() if k not in row and k != "kind"})
        rows.append(row)
    return rows, hdrs


def _sender(run: LoadRun) -> dict[str, Any]:
    """The report's ``sender`` section."""
    stats, sender = run.stats, run.sender
    assert sender is not None
    # An interrupted run has not finished sending: it counts until now.
    send_s = max((stats.finished or time.monotonic()) - sender.mono0, 1e-9)
    # At max speed nothing is scheduled: what was offered is what was sent.
    offered_s = stats.last_due_s if stats.last_due_s > 0 else send_s
    lateness = stats.lateness.histogram()
    return {
        "events_published": stats.events,
        "states_published": stats.states,
        "publish_failures": stats.failures,
        "failure_reasons": dict(stats.failure_reasons),
        "matches_started": stats.matches_started,
        "matches_completed": stats.matches_completed,
        "send_seconds": round(send_s, 3),
        "offered_events_per_s": _rate(sum(stats.offered.values()), offered_s),
        "achieved_events_per_s": _rate(stats.events, send_s),
        "scheduled": sender.shape.scheduled,
        "overruns": stats.overruns,
        "overrun_threshold_ms": sender.overrun_us / 1000,
        "lateness_ms": histogram_summary(lateness),
        "lateness_hdr": encode_histogram(lateness),
        "lag_max_ms": round(max(stats.lag_us.values(), default=0) / 1000, 3),
        "behind": stats.overruns > 0,
        "latency_includes_sender_backlog": not sender.shape.scheduled,
        "matches_stopped": stats.matches_stopped,
    }


def _totals(consumers: list[dict[str, Any]]) -> dict[str, Any]:
    """Loss, duplicates, reordering and the rest summed over the consumers."""
    totals: dict[str, Any] = {
        key: sum(c[key] for c in consumers)
        for key in ("expected", "received", "unique", "lost", "duplicates", "reordered")
    }
    totals["max_displacement"] = max((c["max_displacement"] for c in consumers), default=0)
    totals["unexpected"] = sum(c["unexpected"] for c in consumers)
    totals["malformed"] = sum(c["malformed"] for c in consumers)
    totals.update(split_totals(consumers))
    return totals


def render_table(report: dict[str, Any]) -> Table:
    """The final table of a report."""
    s, d, lat = report["sender"], report["delivery"], report["latency_ms"]
    conns = report["connections"]
    title = "matchcast load (INTERRUPTED: figures so far)" if report.get("interrupted") else None
    aborted = report.get("aborted")
    if aborted:
        title = f"matchcast load (ABORTED at {aborted['t']} s: --check {aborted['check']} failed)"
    table = Table(title=title or "matchcast load", show_header=True, header_style="bold")
    table.add_column("figure")
    table.add_column("value", justify="right")
    p = report["parameters"]

    def add(name: str, value: object) -> None:
        table.add_row(Text(name), Text(str(value)))

    add(
        "matches / subscribers / QoS",
        f"{p.get('matches')} / {p.get('subscribers')} / {p.get('qos')}",
    )
    add("run", _describe_run(p, s))
    add("events published", f"{s['events_published']:,} (+{s['states_published']:,} states)")
    add(
        "offered / achieved events/s",
        f"{s['offered_events_per_s']:,} / {s['achieved_events_per_s']:,}",
    )
    add("delivered events/s (summed over subscribers)", f"{d['delivered_events_per_s']:,}")
    add("publish failures", s["publish_failures"])
    add(
        f"sender overruns (> {s['overrun_threshold_ms']:g} ms late)",
        f"{s['overruns']:,}  (lateness p99 {s['lateness_ms']['p99']} ms"
        f", max lag {s.get('lag_max_ms', s['lateness_ms']['max'])} ms)"
        if s.get("scheduled", True)
        else "n/a: --speed max has no schedule",
    )
    if s.get("scheduled", True) and s["overruns"]:
        add("sender", "FELL BEHIND its schedule: its lag is in the latency, not the broker's")
    add("expected / received", f"{d['expected']:,} / {d['received']:,}")
    add("lost", f"{d['lost']:,}")
    add("duplicates", f"{d['duplicates']:,}")
    add("reordered (max displacement)", f"{d['reordered']:,} ({d['max_displacement']})")
    chaos = report.get("chaos")
    if chaos:
        faults = ", ".join(f"{k} {v:,}" for k, v in chaos["faults"].items()) or "none"
        add(f"chaos injected ({chaos['spec']}, seed {chaos['seed']})", faults)
        inj, net = d["injected"], d["network"]
        add(
            "seen, injected: lost / duplicates / reordered",
            f"{inj['lost']:,} / {inj['duplicates']:,} / {inj['reordered']:,}",
        )
        add(
            "seen, by broker/network: lost / duplicates / reordered",
            f"{net['lost']:,} / {net['duplicates']:,} / {net['reordered']:,}",
        )
    add(
        "latency ms p50 / p90 / p99 / p99.9 / max"
        + ("" if s.get("scheduled", True) else " (--speed max: includes the sender's backlog)"),
        f"{lat['p50']} / {lat['p90']} / {lat['p99']} / {lat['p99_9']} / {lat['max']}",
    )
    for kind in ("publishers", "probes"):
        c = conns[kind]
        add(
            f"{kind}: connected / failed / dropped / reconnected",
            f"{c['connected']} / {c['connect_failures']} / {c['disconnects']} / "
            f"{c['reconnects']}  (connect median {c['connect_ms']['median']} ms)",
        )
    _add_nodes(table, report.get("nodes") or {})
    v = report.get("verification")
    if v is not None:
        for c in v["consumers"]:
            add(
                f"verify-state {c['consumer']}: right / wrong / missing",
                f"{c['right']} / {c['wrong']} / {c['missing']}",
            )
        table.add_row("verify-state", _verdict(v["ok"]))
    for c in report.get("checks") or ():
        table.add_row(Text(f"check {c['check']}  (actual {c['actual']:g})"), _verdict(c["passed"]))
    return table


_NODE_DELIVERY = ("received", "unique", "lost", "duplicates", "reordered")


def _add_nodes(table: Table, nodes: dict[str, Any]) -> None:
    """A section per node, where the list has more than one (format 2: connections only)."""
    if len(nodes) < 2:
        return

    def num(value: int | None) -> str:
        return "n/a" if value is None else f"{value:,}"

    for url, n in nodes.items():
        table.add_section()
        conns = n.get("connections", n)  # format 2: the counts alone
        table.add_row(
            Text(f"node {url}: connections"),
            Text(", ".join(f"{role} {k}" for role, k in sorted(conns.items())) or "none"),
        )
        if "received" not in n:
            continue
        table.add_row(
            Text("  events published / acknowledged / publish failures"),
            Text(
                f"{num(n['events_published'])} / {num(n['events_acknowledged'])} / "
                f"{num(n['publish_failures'])}"
            ),
        )
        table.add_row(
            Text("  received / unique / lost / duplicates / reordered"),
            Text(" / ".join(num(n[k]) for k in _NODE_DELIVERY)),
        )
        lat = n["latency_ms"]
        table.add_row(
            Text("  latency ms p50 / p99 / max"),
            Text(f"{lat['p50']} / {lat['p99']} / {lat['max']}" if lat["count"] else "n/a"),
        )


def _verdict(ok: bool) -> Text:
    return Text("OK", style="green") if ok else Text("FAILED", style="bold red")


def _describe_run(p: dict[str, Any], s: dict[str, Any]) -> str:
    """The run's length and shape, e.g. ``12.0 s sending; speed max, ramp 0 s, 1 publisher``."""
    shards = p.get("merged_from") or []
    if shards and "speed" not in p:  # a merged report: the shards ran with the same shape
        return f"{_describe_run(shards[0], s)}; {len(shards)} shards merged"
    shape = [f"speed {p.get('speed')}"]
    if p.get("rate") is not None:
        shape = [f"rate {p['rate']:g}/s"]
    if p.get("duration_s") is not None:
        shape.append(f"duration {p['duration_s']:g} s")
    if p.get("ramp_s"):
        shape.append(f"ramp {p['ramp_s']:g} s")
    if p.get("payload_size"):
        shape.append(f"payload {p['payload_size']} B")
    if p.get("states") is False:
        shape.append("no states")
    if p.get("feed"):
        shape.append(f"{p['feed']} feed")
    shape.append(f"{p.get('publishers')} publisher(s), client {p.get('client')}")
    return f"{s.get('send_seconds', 0):g} s sending; " + ", ".join(shape)
