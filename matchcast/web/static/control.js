// matchcast page controls, shown only when `matchcast web --control` forwards commands: play /
// pause, a timeline of the match to click to seek (goals marked on it), and a speed choice.
// Every command goes to POST /api/control, which checks it and sends it to the replayer; the
// reply says the new state. Reads the page's `state`, `view` and `current` (app.js) and keeps to
// itself. The timeline's span (its first and last minute) is the server's `view.timeline`: the
// script knows no period's length.
"use strict";

(() => {
  const box = document.getElementById("control");
  const toggle = document.getElementById("ctl-toggle");
  const line = document.getElementById("ctl-timeline");
  const speed = document.getElementById("ctl-speed");
  const note = document.getElementById("ctl-note");
  if (!box) return;
  let playback = null; // the watched match's playback, from the last reply

  const clamp = (low, x, high) => Math.min(high, Math.max(low, x));
  const at = (clock) => {
    const { first, last } = view.timeline;
    return clamp(0, (clock.minute + Math.min(clock.added || 0, 5) / 5 - first) / (last - first), 1);
  };

  function say(text, kind) {
    note.textContent = text;
    note.dataset.kind = kind;
  }

  function show(reply) {
    playback = reply.matches.find((m) => m.match_id === current) || reply.matches[0] || null;
    const now = playback ? playback.state : reply.state;
    toggle.dataset.state = now;
    toggle.textContent = now === "playing" ? "Pause" : "Play";
    toggle.setAttribute("aria-label", now === "playing" ? "Pause the replay" : "Resume the replay");
    toggle.disabled = now === "stopped";
    const s = playback ? playback.speed : reply.speed;
    if ([...speed.options].some((o) => o.value === String(s))) speed.value = String(s);
    say(`${now === "playing" ? "Playing" : now === "paused" ? "Paused" : "Stopped"} at speed ${s}`, now);
  }

  async function send(body) {
    say("…", "busy");
    try {
      const response = await fetch("/api/control", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(current ? { ...body, match: current } : body),
      });
      const data = await response.json();
      if (!response.ok) { say(data.error || `error ${response.status}`, "error"); return; }
      show(data);
    } catch (err) {
      say(`no answer: ${err}`, "error");
    }
  }

  function drawTimeline() {
    if (!state || !view) return;
    const marks = state.goals.map((g) => {
      const m = document.createElement("span");
      m.className = "ctl-goal";
      m.style.left = `${100 * at(g.clock)}%`;
      m.title = `${g.clock.label} ${g.scorer} (${g.team})`;
      m.dataset.minute = g.clock.label;
      return m;
    });
    const head = document.createElement("span");
    head.className = "ctl-head";
    head.style.left = `${state.clock ? 100 * at(state.clock) : 0}%`;
    line.replaceChildren(...marks, head);
    line.setAttribute("aria-valuemin", String(view.timeline.first));
    line.setAttribute("aria-valuemax", String(view.timeline.last));
    line.setAttribute("aria-valuenow", String(state.clock ? state.clock.minute : 0));
    line.setAttribute("aria-valuetext", state.clock ? state.clock.label : "before kickoff");
  }

  function minuteAt(fraction) {
    const { first, last } = view.timeline;
    return clamp(first, Math.round(first + fraction * (last - first)), last);
  }

  toggle.addEventListener("click", () => send({ command: toggle.dataset.state === "playing" ? "pause" : "resume" }));
  speed.addEventListener("change", () => send({ command: "speed", speed: speed.value === "max" ? "max" : Number(speed.value) }));
  line.addEventListener("click", (e) => {
    if (!view) return;
    const r = line.getBoundingClientRect();
    send({ command: "seek", minute: String(minuteAt((e.clientX - r.left) / r.width)) });
  });
  line.addEventListener("keydown", (e) => {
    const step = { ArrowLeft: -5, ArrowRight: 5 }[e.key];
    if (!step || !view || !state || !state.clock) return;
    e.preventDefault();
    const { first, last } = view.timeline;
    send({ command: "seek", minute: String(clamp(first, state.clock.minute + step, last)) });
  });

  fetch("/api/control").then((r) => r.json()).then((c) => {
    if (!c.enabled) return;
    box.hidden = false;
    send({ command: "status" });
    setInterval(drawTimeline, 250);
  }).catch(() => {});
})();
