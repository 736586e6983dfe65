/* The charts of a matchcast load run: live over SSE (the dashboard) or from the data inlined in a
   report file (window.MATCHCAST_REPORT, written by --report-html). Each chart container carries
   data-points, the number of seconds it holds. */
(function () {
  "use strict";
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  var CHARTS = [
    { id: "throughput", title: "Throughput (events/s)",
      series: [["offered", "offered"], ["sent", "sent"], ["delivered", "delivered"]] },
    { id: "latency", title: "Latency from the schedule (ms)",
      series: [["latency_p50", "p50"], ["latency_p99", "p99"], ["latency_max", "max"]] },
    { id: "lag", title: "Sender lag behind its schedule (ms)", series: [["sender_lag_ms", "sender lag"]] },
    { id: "loss", title: "Lost, duplicates, reordered (so far)",
      series: [["lost", "lost"], ["duplicates", "duplicates"], ["reordered", "reordered"]] },
    { id: "live", title: "Live matches", series: [["live_matches", "live matches"]] },
    { id: "conns", title: "Subscribers and connections",
      series: [["subscribers", "subscribers"], ["connections", "connections"]] }
  ];
  var NODE_CHARTS = [
    { id: "node_delivered", title: "Delivered per node (events/s)", field: "delivered" },
    { id: "node_p99", title: "Latency p99 per node (ms)", field: "latency_p99" }
  ];

  var rows = [];
  var lastT = -1;
  var nodes = [];
  var charts = {};
  var root = document.getElementById("charts");

  function num(v) { return typeof v === "number" && isFinite(v) ? v : null; }

  function width(box) { return Math.max(280, (box.clientWidth || 600) - 12); }

  function makeChart(spec, labels) {
    var box = document.getElementById("chart-" + spec.id);
    if (!box) {
      box = document.createElement("section");
      box.className = "chart";
      box.id = "chart-" + spec.id;
      var h = document.createElement("h2");
      h.textContent = spec.title;
      box.appendChild(h);
      var note = document.createElement("p");
      note.className = "empty-note";
      note.textContent = window.MATCHCAST_REPORT ? "not in this report" : "no figures yet";
      box.appendChild(note);
      root.appendChild(box);
    } else if (charts[spec.id]) {
      charts[spec.id].plot.destroy();
    }
    var series = [{ label: "t (s)" }];
    labels.forEach(function (label, i) {
      series.push({ label: label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: false });
    });
    var opts = {
      width: width(box), height: 220, series: series,
      scales: { x: { time: false } },
      axes: [{ label: "seconds" }, {}],
      legend: { live: true }
    };
    var plot = new uPlot(opts, [[]].concat(labels.map(function () { return []; })), box);
    charts[spec.id] = { plot: plot, box: box, spec: spec };
    box.dataset.points = "0";
  }

  function columns(spec) {
    var xs = rows.map(function (r) { return r.t; });
    if (spec.field) {
      return [xs].concat(nodes.map(function (node) {
        return rows.map(function (r) {
          var n = r.nodes && r.nodes[node];
          return n ? num(n[spec.field]) : null;
        });
      }));
    }
    return [xs].concat(spec.series.map(function (s) {
      return rows.map(function (r) { return num(r[s[0]]); });
    }));
  }

  function redraw() {
    Object.keys(charts).forEach(function (id) {
      var c = charts[id];
      var data = columns(c.spec);
      c.plot.setData(data);
      c.box.dataset.points = String(rows.length);
      var empty = data.slice(1).every(function (col) {
        return col.every(function (v) { return v === null; });
      });
      c.box.dataset.empty = empty ? "true" : "false";
    });
    var last = rows[rows.length - 1];
    if (last) document.getElementById("elapsed").textContent = "t = " + last.t + " s";
  }

  function push(list) {
    var fresh = false;
    list.forEach(function (r) {
      if (!r || typeof r.t !== "number" || r.t <= lastT) return;
      rows.push(r);
      lastT = r.t;
      Object.keys(r.nodes || {}).forEach(function (node) {
        if (nodes.indexOf(node) < 0) { nodes.push(node); fresh = true; }
      });
    });
    if (fresh && nodes.length > 1) NODE_CHARTS.forEach(function (spec) { makeChart(spec, nodes); });
    redraw();
  }

  function setState(state) {
    document.body.dataset.state = state;
    document.getElementById("state").textContent = state;
  }

  function showSummary(summary) {
    if (!summary) return;
    var dl = document.getElementById("figures");
    while (dl.firstChild) dl.removeChild(dl.firstChild);
    Object.keys(summary).forEach(function (k) {
      var dt = document.createElement("dt");
      dt.textContent = k;
      var dd = document.createElement("dd");
      dd.textContent = String(summary[k]);
      dl.appendChild(dt);
      dl.appendChild(dd);
    });
    document.getElementById("summary").hidden = false;
  }

  CHARTS.forEach(function (spec) { makeChart(spec, spec.series.map(function (s) { return s[1]; })); });
  window.addEventListener("resize", function () {
    Object.keys(charts).forEach(function (id) {
      var c = charts[id];
      c.plot.setSize({ width: width(c.box), height: 220 });
    });
  });

  var report = window.MATCHCAST_REPORT;
  if (report) {
    push(report.seconds || []);
    showSummary(report.summary);
    setState("report");
    return;
  }
  var source = new EventSource("events");
  source.addEventListener("open", function () { setState("live"); });
  source.addEventListener("history", function (e) { push(JSON.parse(e.data)); });
  source.addEventListener("second", function (e) { push([JSON.parse(e.data)]); });
  source.addEventListener("end", function (e) {
    showSummary(JSON.parse(e.data));
    setState("finished");
    source.close();
  });
  source.addEventListener("error", function () {
    if (document.body.dataset.state !== "finished") setState("reconnecting");
  });
})();
