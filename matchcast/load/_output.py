"""What a load run leaves: the table and the end summary, the report, CSV and chart files,
and why it failed (exit 3); and ``load merge``'s glue."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from matchcast.load._errors import LoadError
from matchcast.redact import redact, redact_data, write_private

__all__ = ["failures", "merge_files", "nothing_delivered", "output", "write_csv"]

#: Keys of a per-second row that a CSV column cannot hold.
_NOT_IN_CSV = ("kind", "nodes")


def write_csv(path: Path, report: dict[str, Any]) -> None:
    """The per-second series of ``report`` as CSV (owner-only, like the report)."""
    rows = report["per_second"]
    out = io.StringIO(newline="")
    if rows:
        names = [k for k in rows[0] if k not in _NOT_IN_CSV]
        writer = csv.DictWriter(out, fieldnames=names, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    write_private(path, redact(out.getvalue()))


def merge_files(files: list[Path]) -> dict[str, Any]:
    """The reports of ``files`` merged (``load merge``); a bad one: exit 2."""
    from matchcast.load._merge import MergeError, merge_reports, read_reports  # noqa: PLC0415

    if not files:
        raise LoadError(
            "matchcast load merge needs report files: merge a.json b.json --report all.json", 2
        )
    try:
        return merge_reports(read_reports(files))
    except MergeError as err:
        raise LoadError(f"cannot merge: {err}", 2) from None


def output(
    result: dict[str, Any],
    console: Any,
    *,
    report: Path | None = None,
    csv_path: Path | None = None,
    chart: Path | None = None,
) -> list[str]:
    """Print the table and the end summary on ``console``, write the files; why the run
    failed (exit 3), or nothing."""
    from matchcast.load._chart import write_chart  # noqa: PLC0415
    from matchcast.load._report import render_table  # noqa: PLC0415
    from matchcast.load._summary import render_summary  # noqa: PLC0415

    console.print(render_table(result))
    console.print(render_summary(result), markup=False, highlight=False, soft_wrap=True)
    if report is not None:
        write_private(report, json.dumps(redact_data(result), indent=1))
    if csv_path is not None:
        write_csv(csv_path, result)
    if chart is not None:
        try:
            write_chart(result, chart)
        except RuntimeError as err:
            raise LoadError(str(err), 2) from None
    return [] if result.get("interrupted") else failures(result)


def failures(result: dict[str, Any]) -> list[str]:
    """Why the run fails (exit 3): a failed check, a wrong final state, or nothing delivered."""
    out = [
        f"--check {c['check']} (actual {c['actual']:g})"
        for c in result.get("checks") or ()
        if not c["passed"]
    ]
    aborted = result.get("aborted")
    if aborted:
        out.append(
            f"aborted at {aborted['t']} s: --check {aborted['check']} "
            f"(actual {aborted['actual']:g}; --abort-on-fail)"
        )
    out += [
        f"shard {s['shard']} failed: {s['error']}"
        for s in result.get("shards") or ()
        if s["status"] != "ok"
    ]
    verification = result.get("verification")
    if verification is not None and not verification["ok"]:
        out.append("verify-state: a consumer's final state is wrong or missing")
    nothing = nothing_delivered(result)
    if nothing is not None:
        out.append(f"nothing was delivered: {nothing}")
    return out


def nothing_delivered(result: dict[str, Any]) -> str | None:
    """Why a run whose probes received nothing of what they should have is a failure, or None.

    A ``$share`` subscription that a broker grants and never serves (NATS 2.9, amqtt) looks
    like a quiet broker otherwise: such a run exits 3, like a failed check. A shard that only
    sends has nobody to deliver to and never fails this way.
    """
    delivery = result.get("delivery") or {}
    params = result.get("parameters") or {}
    probes = int(params.get("subscribers") or 0) or len(delivery.get("consumers") or ())
    if not probes and "subscribers" in params:
        return None
    expected = delivery.get("expected", 0)
    if expected and not delivery.get("unique", delivery.get("received", 0)):
        shared = params.get("shared_group")
        why = (
            f" (does the broker serve $share/{shared}/...? NATS 2.9 grants it and delivers nothing)"
            if shared
            else ""
        )
        return f"the probes received none of the {expected:,} events they expected{why}"
    if probes and not expected and not delivery.get("received", 0):
        return "no event was published or received"
    return None
