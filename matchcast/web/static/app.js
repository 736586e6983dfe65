// matchcast live page: follows one match over server-sent events. Vanilla JS, no build step.
// The server sends `state` (a snapshot: start from it), `update` (an event and the state
// after it, id = seq), `matches` (the picker's whole list, once on connect) and `match` (one
// entry of that list, added or changed). EventSource reconnects by itself
// and sends Last-Event-ID, so the server resumes the stream where this page left it.
// `replayer` says whether the match's replayer runs (offline: it stopped or died).
"use strict";

const $ = (id) => document.getElementById(id);
const PERIOD = { 1: "1H", 2: "2H", 3: "ET1", 4: "ET2", 5: "PEN" };
const STATUS = { scheduled: "Not started", live: "Live", half_time: "Half time", break: "Break", finished: "Full time", stopped: "Replay stopped" };
// A match still under way: one whose replayer is offline is left hanging.
const RUNNING = new Set(["scheduled", "live", "half_time", "break"]);
const METHOD = { header: "header", penalty: "penalty", free_kick: "free kick", own_goal: "own goal" };
const TICKER_MAX = 200;

let source = null;
let current = new URLSearchParams(location.search).get("match");
let state = null;
let matches = [];
let replayerOffline = false;

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

function displayClock(s) {
  if (!s) return "--";
  if (s.status === "finished") return "FT";
  if (s.status === "half_time") return "HT";
  if (s.status === "scheduled" || !s.clock) return "--";
  if (s.status === "break") return "BREAK";
  const at = `${PERIOD[s.clock.period] || ""} ${s.clock.label}`;
  return s.status === "stopped" ? `at ${at}` : at;
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
  $("status").textContent = offline ? "Replayer offline" : STATUS[s.status] || s.status;
  $("status").dataset.status = offline ? "offline" : s.status;
  $("status").title = offline ? "Its replayer stopped or died: no more events are coming"
    : s.status === "stopped" ? "The replay stopped before full time: not a final score" : "";
  renderAbout(s);
  $("clock").textContent = displayClock(s);
  $("clock").hidden = CLOCK_IS_STATUS.has(s.status);
  renderShootout(s, h, a);
  document.title = h && a ? `${h} ${hs}-${as} ${a} · ${displayClock(s)} · matchcast` : "matchcast · live";
  $("match-id").textContent = `Match ${s.match_id}`;
  renderGoals(s, h);
  renderPossession(s, h, a);
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

function goalHow(g) {
  return METHOD[g.method] || "";
}

function renderGoals(s, home) {
  const list = $("goals");
  const sides = { home: $("home-goals"), away: $("away-goals") };
  list.replaceChildren();
  sides.home.replaceChildren();
  sides.away.replaceChildren();
  for (const g of s.goals) {
    const side = g.team === home ? "home" : "away";
    const how = goalHow(g);
    list.append(el("li", { class: side, "data-seq": g.seq },
      el("span", { class: "min" }, g.clock.label),
      el("span", { class: "team-tag", title: teamName(s, g.team) }, g.team),
      el("span", { class: "who" }, g.scorer, ...(g.detail || how ? [el("span", { class: "how" }, g.detail || how)] : [])),
    ));
    const tag = g.method === "penalty" ? " (pen)" : g.method === "own_goal" ? " (o.g.)" : "";
    sides[side].append(el("li", { "data-team": g.team }, el("strong", {}, g.scorer), " ", el("span", { class: "gmin" }, `${g.clock.label}${tag}`)));
  }
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
  const fromState = until ? (since ? `${since.label}–${until.label}` : `to ${until.label}`) : null;
  const span = fromState || s.possessionSpan || "over a stretch of play";
  $("poss-bar").setAttribute("aria-label", `Possession ${span}: ${teamName(s, h)} ${ph}%, ${teamName(s, a)} ${pa}%`);
  $("poss-span").textContent = span;
}

// ------------------------------------------------------------------ ticker

function tickerItem(ev, s, line) {
  const c = ev.clock.label;
  switch (ev.type) {
    case "clock": return null;
    case "kick_off":
      return ev.clock.period === 1
        ? ["KICK-OFF", `${ev.home.name} v ${ev.away.name}`]
        : ["KICK-OFF", `${PERIOD[ev.clock.period] || "Next period"} under way`];
    case "period_end":
      return [ev.clock.period === 1 ? "HALF TIME" : `END OF ${PERIOD[ev.clock.period]}`, scoreline(s)];
    case "goal": {
      const how = goalHow(ev);
      return ["GOAL", `${ev.scorer} (${ev.team})${how ? `, ${how}` : ""}. ${scoreline(s)}`];
    }
    case "goal_disallowed":
      return ["NO GOAL", `${ev.team} goal ruled out${ev.reason ? `: ${ev.reason}` : ""}. ${scoreline(s)}`];
    case "possession":
      return ["POSSESSION", `${Object.entries(ev.share).map(([t, v]) => `${t} ${Math.round(v)}%`).join(", ")}${ev.since ? ` over ${ev.since.label}–${c}` : ""}`];
    case "card":
      return [`${ev.card.replace("_", " ").toUpperCase()} CARD`, `${ev.player} (${ev.team})`];
    case "substitution":
      return ["SUB", `${ev.team}: ${ev.player_on} on, ${ev.player_off} off`];
    case "shootout_kick":
      return ["PENALTY", `${ev.taker} (${ev.team}) ${ev.scored ? "scores" : "misses"}`];
    case "full_time":
      return ["FULL TIME", scoreline(s)];
    case "replay_stopped":
      return ["REPLAY STOPPED", `${scoreline(s)}: not a final score${ev.reason === "error" ? " (replayer error)" : ""}`];
    default:
      return line ? ["", line.replace(c, "").trim()] : null;
  }
}

function scoreline(s) {
  const [h, a] = codes(s);
  return h && a ? `${h} ${s.score[h] ?? 0}-${s.score[a] ?? 0} ${a}` : "";
}

function addTicker(minute, kind, text, cls, fresh) {
  const list = $("ticker");
  const item = el("li", { class: `${cls}${fresh ? " fresh" : ""}` },
    el("span", { class: "min" }, minute),
    el("span", {}, ...(kind ? [el("span", { class: "kind" }, kind)] : []), text));
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

function onState(e) {
  const s = JSON.parse(e.data).state;
  const first = !state || state.match_id !== s.match_id;
  state = Object.assign(s, { possessionSpan: state && state.match_id === s.match_id ? state.possessionSpan : null });
  if (first) {
    resetTicker();
    for (const g of s.goals) addTicker(g.clock.label, "GOAL", `${g.scorer} (${g.team})`, "goal", false);
    if (s.status !== "scheduled") {
      const note = s.status === "finished" ? "final score"
        : s.status === "stopped" ? "the replay stopped here" : "following live from here";
      addTicker(displayClock(s).split(" ").pop(), "JOINED", `${scoreline(s)}: ${note}`, "joined", false);
    }
  }
  render();
}

function onUpdate(e) {
  const { event: ev, state: s, line } = JSON.parse(e.data);
  const prev = state;
  const span = ev.type === "possession"
    ? (ev.since ? `${ev.since.label}–${ev.clock.label}` : `to ${ev.clock.label}`)
    : prev && prev.match_id === s.match_id ? prev.possessionSpan : null;
  state = Object.assign(s, { possessionSpan: span });
  if (ev.type === "goal" || ev.type === "goal_disallowed") {
    const score = $("score");
    score.classList.remove("flash");
    void score.offsetWidth; // restart the animation
    score.classList.add("flash");
  }
  render();
  const item = tickerItem(ev, s, line);
  if (item) addTicker(ev.clock.label, item[0], item[1], ev.type, true);
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
  const label = h && a ? `${h} ${m.score[h] ?? 0}-${m.score[a] ?? 0} ${a} · ${STATUS[m.status] || m.status}` : m.match_id;
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
