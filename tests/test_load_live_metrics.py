"""``matchcast load --metrics-port``: the figures of each second as Prometheus metrics, and the
Grafana dashboard of deploy/ charts only metrics that are exposed."""

from __future__ import annotations

import inspect
import io
import json
import math
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from matchcast.load._dashboard import Dashboard
from matchcast.load._live_metrics import LoadMetrics
from matchcast.load._outputs import live_outputs
from matchcast.load._report_html import HtmlReport
from tests._grafana import dashboard_exprs, metric_names
from tests._load_report import REPORT, row
from tests._require import MONITORING_ENV, require

ROOT = Path(__file__).resolve().parent.parent
NODES = {
    "mqtt://a:1883": {"delivered": 10, "latency_p99": 2.0},
    "mqtt://b:1883": {"delivered": 12, "latency_p99": None},
}


@pytest.fixture
async def metrics() -> AsyncIterator[LoadMetrics]:
    sink = LoadMetrics(port=0)
    await sink.start()
    try:
        yield sink
    finally:
        await sink.close()


async def scrape(sink: LoadMetrics) -> dict[str, float]:
    """Every sample /metrics serves, by name and labels: ``name{node="x"}`` -> value."""
    async with aiohttp.ClientSession() as http, http.get(sink.url) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=")
        text = await resp.text()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            samples[s.name + (f"{{{labels}}}" if labels else "")] = s.value
    return samples


def test_every_sink_has_the_live_sink_methods() -> None:
    """start, finish and close are coroutines; second is a plain call that never awaits."""
    for sink in (Dashboard(), HtmlReport(Path("r.html")), LoadMetrics()):
        for name in ("start", "finish", "close"):
            assert inspect.iscoroutinefunction(getattr(sink, name)), (sink, name)
        assert not inspect.iscoroutinefunction(sink.second), sink


async def test_each_second_updates_the_metrics(metrics: LoadMetrics) -> None:
    metrics.second(row(0))
    metrics.second(row(1, latency_p99=None, lost=3, nodes=NODES))
    got = await scrape(metrics)
    assert got["matchcast_load_offered_events_total"] == 100 + 101
    assert got["matchcast_load_delivered_events_total"] == 200 + 201
    assert got["matchcast_load_latency_p50_seconds"] == 0.0015
    assert math.isnan(got["matchcast_load_latency_p99_seconds"])  # no figure that second
    assert got["matchcast_load_sender_lag_seconds"] == 0.0002
    assert got["matchcast_load_lost_events"] == 3
    assert got["matchcast_load_live_matches"] == 10
    assert got["matchcast_load_elapsed_seconds"] == 2
    assert got["matchcast_load_running"] == 1
    assert got['matchcast_load_node_delivered_events_total{node="mqtt://a:1883"}'] == 10
    assert got['matchcast_load_node_latency_p99_seconds{node="mqtt://a:1883"}'] == 0.002
    assert math.isnan(got['matchcast_load_node_latency_p99_seconds{node="mqtt://b:1883"}'])
    await metrics.finish(REPORT)
    assert (await scrape(metrics))["matchcast_load_running"] == 0


async def test_a_bad_row_or_figure_is_skipped_not_raised(metrics: LoadMetrics) -> None:
    metrics.second("not a row")  # type: ignore[arg-type]
    metrics.second({"t": 0, "offered": "many", "sent": -5, "delivered": True, "nodes": [1]})
    metrics.second({"t": 1, "nodes": {"n": "x"}, "live_matches": 4})
    got = await scrape(metrics)
    assert metrics.refused_rows == 1
    assert got["matchcast_load_offered_events_total"] == 0
    assert got["matchcast_load_sent_events_total"] == 0
    assert got["matchcast_load_delivered_events_total"] == 0
    assert got["matchcast_load_live_matches"] == 4


# ------------------------------------------------------------ the Grafana dashboard


def test_metric_names_reads_promql() -> None:
    assert metric_names('sum by (node) (rate(a_total{node="x"}[$__rate_interval]))') == {"a_total"}
    assert metric_names("b / on (job) c") == {"b", "c"}


async def test_every_promql_of_the_grafana_dashboard_names_an_exposed_metric(
    metrics: LoadMetrics,
) -> None:
    """Fed a run's seconds (a broker list included), /metrics exposes every metric the
    dashboard charts."""
    for t in range(3):
        metrics.second(row(t, nodes=NODES))
    exposed = {name.partition("{")[0] for name in await scrape(metrics)}
    exprs = dashboard_exprs()
    assert len(exprs) >= 10
    for expr in exprs:
        names = metric_names(expr)
        assert names, expr
        assert names <= exposed, (expr, names - exposed)


def test_the_dashboard_reads_the_provisioned_datasource() -> None:
    doc = json.loads((ROOT / "deploy/grafana/dashboards/matchcast-load.json").read_text())
    source = (ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text()
    uid = re.search(r"uid: (\S+)", source)
    assert uid is not None
    for panel in doc["panels"]:
        assert panel["datasource"]["uid"] == uid.group(1), panel["title"]
    assert len({p["id"] for p in doc["panels"]}) == len(doc["panels"])


# ------------------------------------------------------------ the options together


async def test_live_outputs_gives_a_sink_per_option_given(tmp_path: Path) -> None:
    """...and the servers say where they listen, whatever the log level."""
    assert live_outputs() == []
    said = io.StringIO()
    sinks = live_outputs(
        dashboard=0, report_html=tmp_path / "r.html", metrics_port=0, announce=said
    )
    assert [type(s) for s in sinks] == [Dashboard, LoadMetrics, HtmlReport]
    for sink in sinks:
        await sink.start()
    for sink in sinks:
        await sink.close()
    lines = said.getvalue().splitlines()
    assert lines[0].startswith("dashboard: http://127.0.0.1:")
    assert re.fullmatch(r"metrics: http://127\.0\.0\.1:\d+/metrics", lines[1])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dashboard": 9000, "metrics_port": 9000}, "both 9000"),
        ({"report_html": Path("/nonexistent-dir/r.html")}, "does not exist"),
    ],
)
def test_live_outputs_refuses_bad_options_before_the_run(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        live_outputs(**options)


async def test_the_metrics_answer_only_loopback_host_names(metrics: LoadMetrics) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(metrics.url, headers={"Host": "rebound.example"}) as resp:
            assert resp.status == 403
        async with http.get(metrics.url, headers={"Host": "localhost"}) as resp:
            assert resp.status == 200


def _promtool() -> str:
    found = os.environ.get("MATCHCAST_PROMTOOL") or shutil.which("promtool")
    require(found, "promtool", MONITORING_ENV, "apt-get install prometheus")
    assert found is not None
    return found


def test_promtool_accepts_the_scrape_config_and_every_promql(tmp_path: Path) -> None:
    """Prometheus' own checker, where it is installed: the scrape config, and each expression
    of the Grafana dashboard as a recording rule (Grafana's $__rate_interval set to 1m)."""
    promtool = _promtool()
    config = subprocess.run(
        [promtool, "check", "config", str(ROOT / "deploy/prometheus/prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert config.returncode == 0, config.stdout + config.stderr
    rules = [
        {"record": f"matchcast:dashboard_{i}", "expr": e.replace("$__rate_interval", "1m")}
        for i, e in enumerate(dashboard_exprs())
    ]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = subprocess.run(
        [promtool, "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{len(rules)} rules found" in checked.stdout
