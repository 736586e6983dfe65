// A consumer `matchcast verify` can grade, in JavaScript (mqtt.js): score and status from the
// events, reported after every change. See docs/verify.md.
//
//   npm ci --prefix examples/verify/js
//   node examples/verify/js/consumer.mjs --port 1883 --id js-example &
//   matchcast verify --consumer js-example --broker mqtt://127.0.0.1:1883
import { parseArgs } from "node:util";
import mqtt from "mqtt";

const { values: opt } = parseArgs({
  options: {
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string", default: "1883" },
    root: { type: "string", default: "matchcast-verify" },
    id: { type: "string", default: "js-example" },
  },
});
const STATUS = { kick_off: "live", full_time: "finished", replay_stopped: "stopped" };
const newer = (a, b) => a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);

class Match {
  run = -1; lastSeq = 0; score = {}; status = "scheduled";
  early = new Map(); // "run:seq" -> an event that came before its turn

  snapshot(s) { // a snapshot ahead of us (events missing) is taken; an older one ignored
    if (!newer([s.run, s.last_seq], [this.run, this.lastSeq])) return;
    Object.assign(this, { run: s.run, lastSeq: s.last_seq, score: s.score, status: s.status });
    this.catchUp();
  }

  event(e) { // apply the next event; hold one that came early; drop a repeat or an old one
    if (e.run > this.run && e.seq === 1) {
      Object.assign(this, { run: e.run, lastSeq: 0, score: {}, status: "scheduled" });
    }
    if (!newer([e.run, e.seq], [this.run, this.lastSeq])) return;
    this.early.set(`${e.run}:${e.seq}`, e);
    this.catchUp();
  }

  catchUp() {
    for (let e; (e = this.early.get(`${this.run}:${this.lastSeq + 1}`)); ) {
      this.early.delete(`${this.run}:${this.lastSeq + 1}`);
      this.lastSeq = e.seq;
      this.score = e.score ?? this.score;
      if (e.type === "kick_off" && Object.keys(this.score).length === 0) {
        this.score = { [e.home.code]: 0, [e.away.code]: 0 };
      }
      if (e.type === "period_end") this.status = e.clock.period === 1 ? "half_time" : "break";
      this.status = STATUS[e.type] ?? this.status;
    }
  }

  report() {
    return JSON.stringify({
      run: this.run, last_seq: this.lastSeq, score: this.score, status: this.status,
    });
  }
}

const matches = new Map();
const client = mqtt.connect(`mqtt://${opt.host}:${opt.port}`);
client.on("connect", async () => {
  await client.subscribeAsync([`${opt.root}/matches/+/events`, `${opt.root}/matches/+/state`], { qos: 1 });
  console.error("subscribed");
});
client.on("message", (topic, payload) => {
  let body;
  try { body = JSON.parse(payload.toString()); } catch { return; } // not ours, or a clear
  if (typeof body?.match_id !== "string") return;
  if (!matches.has(body.match_id)) matches.set(body.match_id, new Match());
  const match = matches.get(body.match_id);
  const before = match.report();
  if (topic.endsWith("/state")) match.snapshot(body); else match.event(body);
  if (match.report() === before) return;
  const report = JSON.stringify({ match_id: body.match_id, ...JSON.parse(match.report()) });
  client.publish(`${opt.root}/consumers/${opt.id}/state/${body.match_id}`, report, { qos: 1, retain: true });
});
