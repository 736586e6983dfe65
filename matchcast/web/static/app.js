// matchcast live page: follows one match over server-sent events. Vanilla JS, no build step.
// The server sends `state` (a snapshot: start from it), `update` (an event and the state
// after it, id = seq), `matches` (the picker's whole list, once on connect) and `match` (one
// entry of that list, added or changed). EventSource reconnects by itself
// and sends Last-Event-ID, so the server resumes the stream where this page left it.
// `replayer` says whether the match's replayer runs (offline: it stopped or died).
// The words come from the server: each state's `view` (clock, status label, goals' labels, the
// ticker a joining page starts with) and each event's `ticker` row (minute, kind, text, style),
// the same words as the terminal ticker's. This script draws; it knows no event type.
// The live match stats come as the view's `stats` rows (label, each team's figure); the
// expected-goals timeline as points (`xg` in a snapshot's view, `xg_point` with an update).
"use strict";

const $ = (id) => document.getElementById(id);
// A match still under way: one whose replayer is offline is left hanging.
const RUNNING = new Set(["scheduled", "live", "half_time", "break"]);
const TICKER_MAX = 200;

let source = null;
let current = new URLSearchParams(location.search).get("match");
let state = null;
let view = null; // what the server says the page shows of `state`
let matches = [];
let replayerOffline = false;
let xgPoints = []; // the expected-goals timeline of this run: { x, minute, team, xg, goal }
const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function codes(s) {
  if (s && s.home && s.away) return [s.home.code, s.away.code];
  return s ? Object.keys(s.score || {}) : [];
}

function teamName(s, code) {
  for (const t of [s.home, s.away]) if (t && t.code === code) return t.name;
  return code;
}

// ------------------------------------------------------------------ rendering

// The clock adds nothing when the status pill says it already (Full time, not "FT" beside it).
const CLOCK_IS_STATUS = new Set(["scheduled", "half_time", "break", "finished"]);

function render() {
  const s = state;
  if (!s) return;
  delete $("board").dataset.loading;
  const [h, a] = codes(s);
  for (const [side, code] of [["home", h], ["away", a]]) {
    const team = s[side];
    $(`${side}-code`).textContent = code || "—";
    $(`${side}-code`).title = team ? team.name : "";
    $(`${side}-name`).textContent = team ? team.name : "";
  }
  const hs = s.score[h] ?? 0;
  const as = s.score[a] ?? 0;
  $("home-score").textContent = hs;
  $("away-score").textContent = as;
  const score = $("score");
  score.dataset.score = `${hs}-${as}`;
  score.setAttribute("aria-label", h && a ? `${teamName(s, h)} ${hs}, ${teamName(s, a)} ${as}` : `${hs}-${as}`);
  const offline = replayerOffline && RUNNING.has(s.status);
  $("status").textContent = offline ? "Replayer offline" : view.status;
  $("status").dataset.status = offline ? "offline" : s.status;
  $("status").title = offline ? "Its replayer stopped or died: no more events are coming"
    : s.status === "stopped" ? "The replay stopped before full time: not a final score" : "";
  renderAbout(s);
  $("clock").textContent = view.clock;
  $("clock").hidden = CLOCK_IS_STATUS.has(s.status);
  renderShootout(s, h, a);
  document.title = h && a ? `${h} ${hs}-${as} ${a} · ${view.clock} · matchcast` : "matchcast · live";
  $("match-id").textContent = `Match ${s.match_id}`;
  renderGoals(s, h);
  renderPossession(s, h, a);
  renderStats(h, a);
  renderXg(s, h, a);
}

// A bar per stat, as live-score apps show them: each team's share of the stat.
function renderStats(h, a) {
  const rows = view.stats || [];
  $("stats").hidden = rows.length === 0;
  if (!rows.length) return;
  $("stats-home").textContent = h;
  $("stats-away").textContent = a;
  $("stat-rows").replaceChildren(...rows.map((r) => {
    const total = r.home_value + r.away_value;
    const hw = total ? (100 * r.home_value) / total : 50;
    return el("li", { class: "stat-row", "data-stat": r.key },
      el("span", { class: "sv home" }, r.home),
      el("span", { class: "sl" }, r.label),
      el("span", { class: "sv away" }, r.away),
      el("span", { class: "stat-bar", role: "img", "aria-label": `${r.label}: ${h} ${r.home}, ${a} ${r.away}` },
        bar("sb-home", hw), bar("sb-away", 100 - hw)));
  }));
}

function bar(cls, width) {
  const span = el("span", { class: cls });
  span.style.width = `${width}%`;
  return span;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// Each team's expected goals, summed shot by shot over the match, and its goals on the line.
function renderXg(s, h, a) {
  const box = $("xg");
  const rows = view.stats || [];
  box.hidden = rows.length === 0 || !h || !a;
  if (box.hidden) return;
  const xgRow = rows.find((r) => r.key === "xg");
  $("xg-totals").textContent = `${h} ${xgRow.home} · ${a} ${xgRow.away}`;
  const W = 320, H = 140, L = 26, R = 8, T = 8, B = 18;
  const { first, last } = view.timeline;
  const top = Math.max(1, Math.ceil(Math.max(xgRow.home_value, xgRow.away_value, ...xgPoints.map((p) => p.xg))));
  const px = (x) => L + ((Math.min(Math.max(x, first), last + 1) - first) / (last + 1 - first)) * (W - L - R);
  const py = (y) => H - B - (y / top) * (H - T - B);
  const chart = $("xg-chart");
  const parts = [svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B })];
  for (const m of [first, 45, 90, 105, last].filter((m, i, all) => m >= first && m <= last && all.indexOf(m) === i)) {
    parts.push(svg("text", { class: "tick", x: px(m), y: H - 5, "text-anchor": "middle" }, `${m}'`));
  }
  for (let y = 0; y <= top; y += top > 3 ? 2 : 1) {
    parts.push(svg("text", { class: "tick", x: 2, y: py(y) + 3 }, y.toFixed(1)));
  }
  const now = view.clock_x ?? last;
  const at = (team, x) => {
    let y = 0;
    for (const p of xgPoints) if (p.team === team && p.x <= x) y = p.xg;
    return y;
  };
  for (const [side, code] of [["home", h], ["away", a]]) {
    let d = `M${px(first)},${py(0)}`;
    let y = 0;
    for (const p of xgPoints.filter((q) => q.team === code)) {
      d += ` H${px(p.x)} V${py(p.xg)}`;
      y = p.xg;
    }
    d += ` H${px(Math.max(now, ...xgPoints.map((p) => p.x)))}`;
    parts.push(svg("path", { class: `line ${side}`, d, "data-team": code, "data-xg": y.toFixed(2) }));
  }
  s.goals.forEach((g, i) => {
    const side = g.team === h ? "home" : "away";
    const x = view.goals[i].x;
    const dot = svg("circle", { class: `goal ${side}`, cx: px(x), cy: py(at(g.team, x)), r: 4, "data-minute": g.clock.label });
    dot.append(svg("title", {}, `${g.clock.label} ${g.scorer} (${g.team})`));
    const anchor = px(x) > W - 30 ? "end" : "middle"; // a late goal's label stays in the chart
    parts.push(dot, svg("text", { class: "goal-label", x: px(x), y: py(at(g.team, x)) - 7, "text-anchor": anchor }, g.clock.label));
  });
  chart.replaceChildren(...parts);
  const goals = s.goals.map((g) => `${g.team} ${g.clock.label}`).join(", ");
  chart.setAttribute("aria-label", `Expected goals over the match: ${h} ${xgRow.home}, ${a} ${xgRow.away}${goals ? `; goals: ${goals}` : ""}`);
}

// Competition, stage, venue and kickoff, as the match file has them (schema 1.2's info).
function renderAbout(s) {
  const box = $("about");
  const i = s.info;
  if (!i) { box.hidden = true; return; }
  const where = [i.venue, i.city].filter(Boolean).join(", ");
  // The kickoff in the venue's local time, as written ("2026-07-15T15:00:00-04:00").
  const when = i.kickoff ? `${i.kickoff.slice(0, 10)} ${i.kickoff.slice(11, 16)}` : i.date;
  box.textContent = [i.competition, i.stage, where, when].filter(Boolean).join(" · ");
  box.hidden = !box.textContent;
}

function renderShootout(s, h, a) {
  const box = $("shootout");
  box.hidden = !s.shootout || !h || !a;
  if (box.hidden) return;
  const [ph, pa] = [s.shootout[h] ?? 0, s.shootout[a] ?? 0];
  box.textContent = s.winner
    ? `${teamName(s, s.winner)} win ${Math.max(ph, pa)}-${Math.min(ph, pa)} on penalties`
    : `Penalties ${h} ${ph}-${pa} ${a}`;
}

function renderGoals(s, home) {
  const list = $("goals");
  const sides = { home: $("home-goals"), away: $("away-goals") };
  list.replaceChildren();
  sides.home.replaceChildren();
  sides.away.replaceChildren();
  s.goals.forEach((g, i) => {
    const side = g.team === home ? "home" : "away";
    const { how, tag } = view.goals[i];
    list.append(el("li", { class: side, "data-seq": g.seq },
      el("span", { class: "min" }, g.clock.label),
      el("span", { class: "team-tag", title: teamName(s, g.team) }, g.team),
      el("span", { class: "who" }, g.scorer, ...(how ? [el("span", { class: "how" }, how)] : [])),
    ));
    sides[side].append(el("li", { "data-team": g.team }, el("strong", {}, g.scorer), " ", el("span", { class: "gmin" }, `${g.clock.label}${tag}`)));
  });
  $("goals-empty").hidden = s.goals.length > 0;
  $("scorers").hidden = s.goals.length === 0;
}

function renderPossession(s, h, a) {
  const box = $("possession");
  if (!s.possession || !h || !a) { box.hidden = true; return; }
  const ph = Math.round(s.possession[h] ?? 0);
  const pa = Math.round(s.possession[a] ?? 0);
  const total = ph + pa || 1;
  box.hidden = false;
  $("poss-home-bar").style.width = `${(100 * ph) / total}%`;
  $("poss-away-bar").style.width = `${(100 * pa) / total}%`;
  $("poss-home-label").textContent = `${h} ${ph}%`;
  $("poss-away-label").textContent = `${pa}% ${a}`;
  // The shares cover one stretch of play (the semi-final's 88/12 is 55'-86'), not the match.
  // From the state (1.2), which a late joiner has too; else from the possession event seen.
  const until = s.possession_until, since = s.possession_since;
  const span = until ? (since ? `${since.label}–${until.label}` : `to ${until.label}`) : "over a stretch of play";
  $("poss-bar").setAttribute("aria-label", `Possession ${span}: ${teamName(s, h)} ${ph}%, ${teamName(s, a)} ${pa}%`);
  $("poss-span").textContent = span;
}

// ------------------------------------------------------------------ ticker

// One row of the ticker, as the server words it: { minute, kind, text, style }.
function addTicker(row, fresh) {
  const list = $("ticker");
  const item = el("li", { class: `${row.style}${fresh ? " fresh" : ""}` },
    el("span", { class: "min" }, row.minute),
    el("span", {}, ...(row.kind ? [el("span", { class: "kind" }, row.kind)] : []), row.text));
  list.prepend(item);
  while (list.children.length > TICKER_MAX) list.lastElementChild.remove();
  $("ticker-empty").hidden = true;
}

function resetTicker() {
  $("ticker").replaceChildren();
  $("ticker-empty").hidden = false;
}

// ------------------------------------------------------------------ the stream

function setConn(kind, text) {
  $("conn").dataset.state = kind;
  $("conn").textContent = text;
  if (!state) $("loading-note").textContent = kind === "live" ? "Waiting for the match…" : text;
}

// Another match, or another run of it (a seek, a restarted replay): the ticker so far is
// another story, so it starts again from the server's rows for this state.
function newStory(prev, s) {
  return !prev || prev.match_id !== s.match_id || prev.run !== s.run;
}

function restartTicker(v) {
  resetTicker();
  for (const row of v.joined) addTicker(row, false);
}

function onState(e) {
  const { state: s, view: v } = JSON.parse(e.data);
  const first = newStory(state, s);
  state = s;
  view = v;
  xgPoints = v.xg || [];
  if (first) restartTicker(v);
  render();
}

// A goal, or a goal taken back: the score flashes.
function scoreChanged(prev, s) {
  return prev && prev.match_id === s.match_id && codes(s).some((c) => (prev.score[c] ?? 0) !== (s.score[c] ?? 0));
}

function onUpdate(e) {
  const { state: s, view: v, ticker, xg_point: point } = JSON.parse(e.data);
  const prev = state;
  state = s;
  view = v;
  if (newStory(prev, s)) xgPoints = [];
  if (point) xgPoints.push(point);
  if (scoreChanged(prev, s)) {
    const score = $("score");
    score.classList.remove("flash");
    void score.offsetWidth; // restart the animation
    score.classList.add("flash");
  }
  render();
  if (newStory(prev, s)) restartTicker(v); // its rows include this event's
  else if (ticker) addTicker(ticker, true);
}

function onReplayer(e) {
  const { match_id: id, status } = JSON.parse(e.data);
  if (id !== current) return;
  replayerOffline = status === "offline";
  if (state) render();
}

function onMatches(e) {
  matches = JSON.parse(e.data).matches;
  $("picker").replaceChildren(...matches.map(pickerOption));
  pickerChanged();
}

// One entry added or changed: only its option is touched, so a day of many matches costs
// each update one option, not the whole list.
function onMatch(e) {
  const m = JSON.parse(e.data).match;
  const option = pickerOption(m);
  const i = matches.findIndex((x) => x.match_id === m.match_id);
  if (i >= 0) {
    matches[i] = m;
    $("picker").options[i].replaceWith(option);
  } else {
    matches.push(m);
    $("picker").append(option);
  }
  pickerChanged();
}

function pickerOption(m) {
  const [h, a] = m.home && m.away ? [m.home.code, m.away.code] : Object.keys(m.score);
  const label = h && a ? `${h} ${m.score[h] ?? 0}-${m.score[a] ?? 0} ${a} · ${m.status_label || m.status}` : m.match_id;
  return el("option", { value: m.match_id }, label);
}

function pickerChanged() {
  $("picker-wrap").hidden = matches.length < 2 && (!current || matches.some((m) => m.match_id === current));
  if (current) $("picker").value = current;
  if (!current && matches.length) {
    const live = matches.find((m) => RUNNING.has(m.status)) || matches[0];
    follow(live.match_id);
  }
}

function follow(matchId) {
  if (source) source.close();
  current = matchId;
  state = null;
  view = null;
  xgPoints = [];
  replayerOffline = false;
  $("board").dataset.loading = "";
  const url = new URL(location.href);
  if (matchId) url.searchParams.set("match", matchId);
  history.replaceState(null, "", url);
  if (matchId) $("picker").value = matchId;
  setConn("connecting", "Connecting…");
  source = new EventSource(matchId ? `/events?match=${encodeURIComponent(matchId)}` : "/events");
  source.addEventListener("state", onState);
  source.addEventListener("update", onUpdate);
  source.addEventListener("matches", onMatches);
  source.addEventListener("match", onMatch);
  source.addEventListener("replayer", onReplayer);
  source.onopen = () => setConn("live", matchId ? "Connected" : "Connected: waiting for a match…");
  source.onerror = () => setConn("reconnecting", "Reconnecting…");
}

$("picker").addEventListener("change", (e) => follow(e.target.value));
follow(current);
