# The shell consumer's state, one step per message: jq -n keeps it across the whole stream.
# In: mosquitto_sub -F %J lines, {"topic": ..., "payload": {...}}.
# Out: "TOPIC REPORT" each time a match's score or status changes.
def newer($a; $b): $a[0] > $b[0] or ($a[0] == $b[0] and $a[1] > $b[1]);

def status($e):
  {kick_off: "live", full_time: "finished", replay_stopped: "stopped"}[$e.type]
  // (if $e.type == "period_end" then (if $e.clock.period == 1 then "half_time" else "break" end)
      else .status end);

# Apply the held events that come next, in seq order.
def catch_up:
  "\(.run):\(.last_seq + 1)" as $next
  | .early[$next] as $e
  | if $e == null then . else
      del(.early[$next])
      | .last_seq = $e.seq
      | .score = ($e.score // (if $e.type == "kick_off" and .score == {}
                               then {($e.home.code): 0, ($e.away.code): 0} else .score end))
      | .status = status($e)
      | catch_up
    end;

# A snapshot ahead of us (events missing: a late join, a gap, a new run) is taken.
def snapshot($s):
  if newer([$s.run, $s.last_seq]; [.run, .last_seq])
  then .run = $s.run | .last_seq = $s.last_seq | .score = $s.score | .status = $s.status
       | catch_up
  else . end;

# An event is held until it is next; a repeat or an old one changes nothing.
def event($e):
  (if $e.run > .run and $e.seq == 1
   then .run = $e.run | .last_seq = 0 | .score = {} | .status = "scheduled" else . end)
  | if newer([$e.run, $e.seq]; [.run, .last_seq])
    then .early["\($e.run):\($e.seq)"] = $e | catch_up
    else . end;

foreach inputs as $m ({};
  ._said = null
  | if ($m.payload | type) == "object" and ($m.payload.match_id | type) == "string" then
      $m.payload.match_id as $id
      | (.[$id] // {run: -1, last_seq: 0, score: {}, status: "scheduled", early: {}}) as $was
      | .[$id] = ($was | if ($m.topic | endswith("/state")) then snapshot($m.payload)
                         else event($m.payload) end)
      | if [.[$id].score, .[$id].status] != [$was.score, $was.status] then ._said = $id
        else . end
    else . end;
  select(._said != null)
  | ._said as $id
  | "\($prefix)\($id) \({match_id: $id, score: .[$id].score, status: .[$id].status} | tojson)")
