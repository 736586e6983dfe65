"""The fan-out hub between the bridge subscriber and the browsers.

Per match the hub keeps the latest state, a bounded history of update frames (for
``Last-Event-ID`` resume) and the set of connected browsers. Each browser has a bounded queue;
the bridge only ever calls ``put_nowait``, so a slow or dead browser cannot delay the others:
when its queue is full it is dropped (counted, logged, its connection aborted) and the browser
reconnects with ``Last-Event-ID`` to resume from where it got to.

Every frame is a server-sent event encoded once and shared by all browsers of the match:

- ``event: state`` with ``id: <last_seq>``: ``{"state": ..., "view": ...}``, the snapshot a
  browser starts from (also pushed to everyone after the runner resynchronises on a gap);
- ``event: update`` with ``id: <seq>``: ``{"event": ..., "state": ..., "view": ..., "ticker":
  ..., "line": ...}``, the event, the state after it, the event's ticker row for the page and
  its terminal line (both None for clock ticks);
- ``event: matches`` (no id, so it never moves a browser's resume point): the match picker's
  whole list, sent once, first, to each new browser;
- ``event: match`` (no id): one match of the picker's list, added or changed (score, status).
  A browser is sent changes, never the whole list again, so what it receives per new match
  does not grow with the number of matches.
- ``event: replayer`` (no id): ``{"match_id": ..., "status": "online" | "offline"}``, whether the
  match's replayer runs (offline: it stopped, or died and its last will said so). A status
  naming a match the hub has no channel for is remembered (at most
  :data:`consumers.MAX_MATCHES` of them, the least recently named forgotten first) until the
  match appears: a status alone never makes a channel.

``view`` is what the page shows of the state that is not a field of it (the clock display, the
status label, the goals' labels, the ticker a joining page starts with) and ``ticker`` the
event's row (minute, kind, text, style): see :mod:`matchcast.web._view`. The page's script has
no football of its own.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import structlog

from consumers import MAX_MATCHES
from events import Event, MatchState, encode_event, encode_state
from matchcast.web._view import STATUS_LABELS, page_view, xg_point

__all__ = ["Client", "Frame", "Hub", "HubStats", "MatchSummary"]

_log = structlog.get_logger("matchcast.web")
#: Points of the expected-goals timeline the hub keeps per match.
XG_POINTS = 256
#: Seconds a match's update frames are still kept after its last browser left: a browser whose
#: stream broke resumes with ``Last-Event-ID`` within them. A match no browser follows keeps
#: none (its state is enough for one that opens it), so a flood of matches nobody watches
#: costs each match its state and list entry only.
RESUME_GRACE_S = 60.0

#: A summary of one match for the picker: what a ``matches`` frame lists.
MatchSummary = dict[str, object]


@dataclass(frozen=True, slots=True)
class Frame:
    """One server-sent event, encoded.

    Attributes:
        data: the bytes to write, ending in the blank line.
        seq: the event id it carries, or None (the match list).
        created: loop time the bridge handed it to the hub, for the latency figures.
    """

    data: bytes
    seq: int | None
    created: float


def sse(kind: str, payload: bytes, seq: int | None = None) -> bytes:
    """Encode one server-sent event; ``payload`` is single-line JSON."""
    head = f"event: {kind}\n" + (f"id: {seq}\n" if seq is not None else "")
    return head.encode() + b"data: " + payload + b"\n\n"


def summary(state: MatchState) -> MatchSummary:
    """What the match picker shows of a match (not the clock: it would be pushed every minute)."""
    return {
        "match_id": state.match_id,
        "home": state.home.model_dump() if state.home else None,
        "away": state.away.model_dump() if state.away else None,
        "score": dict(state.score),
        "status": state.status,
        "status_label": STATUS_LABELS.get(state.status, state.status),
    }


class Client:
    """One browser's subscription: frames to send first, then a bounded queue of live frames.

    Args:
        match_id: the match it follows, or None for the match list only.
        backlog: frames owed before any live one (snapshot or resumed history).
        queue_size: live frames that may wait before the browser counts as too slow.
    """

    def __init__(self, match_id: str | None, backlog: list[Frame], queue_size: int) -> None:
        self.match_id = match_id
        self.backlog = backlog
        self.queue: asyncio.Queue[Frame | None] = asyncio.Queue(queue_size)
        self.dropped = False
        #: Set by the server: aborts the connection at once (the writer may be stuck in drain).
        self.abort: Callable[[], None] | None = None

    def offer(self, frame: Frame) -> bool:
        """Queue ``frame`` without waiting; False if the queue is full."""
        try:
            self.queue.put_nowait(frame)
        except asyncio.QueueFull:
            return False
        return True

    def drop(self) -> None:
        """Stop this client: discard what it has queued, wake its writer, abort its socket."""
        self.dropped = True
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(None)
        if self.abort is not None:
            self.abort()


@dataclass(slots=True)
class HubStats:
    """Counters of the hub, served at ``/api/stats``."""

    updates: int = 0
    snapshots: int = 0
    clients_connected: int = 0
    clients_total: int = 0
    clients_dropped: int = 0
    resumed: int = 0
    frames_sent: int = 0
    #: Seconds from the bridge handing a live frame over to its bytes reaching the socket.
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=200_000))

    def as_dict(self) -> dict[str, object]:
        """The counters and latency percentiles (milliseconds) by name."""
        lat = sorted(self.latencies)

        def pct(p: float) -> float | None:
            return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 3) if lat else None

        return {
            "updates": self.updates,
            "snapshots": self.snapshots,
            "clients_connected": self.clients_connected,
            "clients_total": self.clients_total,
            "clients_dropped": self.clients_dropped,
            "resumed": self.resumed,
            "frames_sent": self.frames_sent,
            "latency_samples": len(lat),
            "latency_ms": {"p50": pct(0.50), "p99": pct(0.99), "max": pct(1.0)},
        }


@dataclass(slots=True)
class _Channel:
    """What the hub keeps of one match. ``history`` and ``xg`` are made when first needed: a
    match nobody follows and with no shots (most of a flood of made-up ids) has neither, an
    empty deque being about 600 bytes."""

    match_id: str
    history: deque[Frame] | None = None
    state: MatchState | None = None
    clients: set[Client] = field(default_factory=set)
    replayer: Literal["online", "offline"] | None = None  # its replayer's last status
    #: The expected-goals timeline of the run so far (a point per shot the hub saw), sent to
    #: a browser that joins; bounded (a match has about 25 shots).
    xg: deque[dict[str, object]] | None = None
    left_at: float | None = None  # when its last browser left (hub clock)


class Hub:
    """Keeps each match's state and history, and fans frames out to browsers.

    Args:
        history: update frames kept per match for ``Last-Event-ID`` resume (the semi-final is
            191 events in the full feed; an older id gets the snapshot instead).
        queue_size: live frames a browser may have waiting before it is dropped.
        clock: monotonic time in seconds; the running loop's by default.
        max_matches: matches kept at once (their state, history and list entry); past it the
            least recently updated that no browser follows are forgotten, a twentieth of the
            bound at a time (``web.matches_forgotten``), as the runner evicts its own.
    """

    def __init__(
        self,
        *,
        history: int = 1024,
        queue_size: int = 256,
        clock: Callable[[], float] | None = None,
        max_matches: int = MAX_MATCHES,
    ) -> None:
        if max_matches < 1:
            raise ValueError(f"max_matches must be at least 1, not {max_matches}")
        self.history = history
        self.max_matches = max_matches
        #: Matches forgotten so far at the bound.
        self.forgotten = 0
        self.queue_size = queue_size
        self.stats = HubStats()
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self._channels: dict[str, _Channel] = {}  # the least recently updated first
        #: Channels some browser follows (a changed list entry goes to these, not to all).
        self._watched: dict[str, _Channel] = {}
        self._lobby: set[Client] = set()  # browsers that follow no match yet
        #: Each match's entry of the list, kept encoded (JSON): a fifth of the dict's memory.
        self._summaries: dict[str, bytes] = {}
        #: Replayer statuses of matches without a channel yet, least recently named first.
        self._early_replayers: dict[str, Literal["online", "offline"]] = {}
        self._matches_frame: Frame | None = None  # the whole list, encoded on demand

    def now(self) -> float:
        """The hub's clock."""
        return self._clock()

    # ------------------------------------------------------------ from the bridge

    def publish(self, event: Event, state: MatchState) -> None:
        """An event and the state after it: remember it and send it to the match's browsers."""
        channel = self._channel(event.match_id, recent=True)
        if channel.state is not None and channel.state.run != state.run:
            # A new run (a seek, a restarted replay): the old run's frames are another story,
            # and a browser resuming by seq must not be sent them.
            channel.history = None
            channel.xg = None
        channel.state = state
        said = event.commentary(state)
        point = xg_point(event, state)
        if point is not None:
            if channel.xg is None:
                channel.xg = deque(maxlen=XG_POINTS)
            channel.xg.append(point)
        extras = {
            "view": page_view(state),
            "ticker": None if said is None else said.page(),
            "line": None if said is None else said.terminal,
            "xg_point": point,
        }
        payload = b"".join(
            (
                b'{"event":',
                encode_event(event),
                b',"state":',
                encode_state(state),
                b",",
                json.dumps(extras, ensure_ascii=False).encode()[1:],
            )
        )
        frame = Frame(sse("update", payload, event.seq), event.seq, self.now())
        if channel.replayer == "offline":  # events again: a replayer runs it
            channel.replayer = "online"
            self._fan_out(channel.clients, self._replayer_frame(event.match_id, "online"))
        if channel.clients or (
            channel.left_at is not None and self.now() - channel.left_at < RESUME_GRACE_S
        ):
            if channel.history is None:
                channel.history = deque(maxlen=self.history)
            channel.history.append(frame)
        else:  # nobody to resume: a hole in the history would make a resume skip events
            channel.history = None
        self.stats.updates += 1
        self._fan_out(channel.clients, frame)
        self._note(state)

    def adopt(self, state: MatchState) -> None:
        """A state the runner took from the retained snapshot (late join or resync after a gap).

        The history before it may have holes, so it is cleared: a browser resuming from an
        older id gets this snapshot instead.
        """
        channel = self._channel(state.match_id, recent=True)
        if channel.state is not None and channel.state.run != state.run:
            channel.xg = None  # another run's shots
        channel.state = state
        channel.history = None
        self.stats.snapshots += 1
        self._fan_out(channel.clients, self._snapshot_frame(state))
        self._note(state)

    def replayer_status(self, match_id: str, status: Literal["online", "offline"]) -> None:
        """The replayer of ``match_id`` says ``status``: tell the match's browsers (a match
        the hub has no channel for yet is told when it appears)."""
        channel = self._channels.get(match_id)
        if channel is None:
            self._remember_replayer(match_id, status)
            return
        if channel.replayer != status:
            channel.replayer = status
            self._fan_out(channel.clients, self._replayer_frame(match_id, status))

    # ------------------------------------------------------------ from the server

    def state(self, match_id: str) -> MatchState | None:
        """The latest state of a match, if the hub has seen it."""
        channel = self._channels.get(match_id)
        return channel.state if channel else None

    def matches(self) -> list[MatchSummary]:
        """The picker's list: every match with a state, in the order they appeared."""
        return [json.loads(entry) for entry in self._summaries.values()]

    def connect(self, match_id: str | None, last_event_id: int | None = None) -> Client:
        """Register a browser; its backlog is the match list, then the snapshot or the resumed
        history (events after ``last_event_id``) when the hub still holds all of them.
        """
        backlog = [self._list_frame()]
        if match_id is None:
            client = Client(None, backlog, self.queue_size)
            self._lobby.add(client)
        else:
            channel = self._channel(match_id)
            backlog += self._catch_up(channel, last_event_id)
            if channel.replayer is not None:
                backlog.append(self._replayer_frame(match_id, channel.replayer))
            client = Client(match_id, backlog, self.queue_size)
            channel.clients.add(client)
            self._watched[match_id] = channel
        self.stats.clients_total += 1
        self.stats.clients_connected += 1
        _log.debug("browser.connected", match_id=match_id, last_event_id=last_event_id)
        return client

    def disconnect(self, client: Client) -> None:
        """Forget a browser (idempotent). A match nobody published and nobody follows is
        forgotten too, so asking for made-up match ids costs nothing lasting."""
        if client.match_id is None:
            group = self._lobby
        else:
            channel = self._channels.get(client.match_id)
            group = channel.clients if channel else set()
        if client in group:
            group.discard(client)
            self.stats.clients_connected -= 1
        channel = self._channels.get(client.match_id or "")
        if channel is not None and not channel.clients:
            self._watched.pop(channel.match_id, None)
            channel.left_at = self.now()
        if channel is not None and channel.state is None and not channel.clients:
            del self._channels[channel.match_id]
            if channel.replayer is not None:
                self._remember_replayer(channel.match_id, channel.replayer)

    def sent(self, frame: Frame, now: float) -> None:
        """Record that ``frame`` reached a browser's socket at loop time ``now``."""
        self.stats.frames_sent += 1
        self.stats.latencies.append(now - frame.created)

    # ------------------------------------------------------------ internals

    def _channel(self, match_id: str, *, recent: bool = False) -> _Channel:
        """The channel of ``match_id``, made if new; ``recent``: it was just updated (the
        least recently updated are forgotten first at the bound)."""
        channel = self._channels.get(match_id)
        if channel is None:
            replayer = self._early_replayers.pop(match_id, None)
            channel = _Channel(match_id, replayer=replayer)
            self._channels[match_id] = channel
            if len(self._channels) > self.max_matches:
                self._forget_oldest()
        elif recent and next(reversed(self._channels)) != match_id:
            del self._channels[match_id]
            self._channels[match_id] = channel
        return channel

    def _forget_oldest(self) -> None:
        """At the bound: forget the least recently updated matches no browser follows, a
        twentieth of the bound at a time; one log line."""
        count = len(self._channels) - self.max_matches + max(1, self.max_matches // 20)
        victims = [c for c in self._channels.values() if not c.clients][:count]
        for channel in victims:
            del self._channels[channel.match_id]
            self._summaries.pop(channel.match_id, None)
        if victims:
            self._matches_frame = None
            self.forgotten += len(victims)
            _log.warning(
                "web.matches_forgotten",
                forgotten=len(victims),
                total=self.forgotten,
                kept=len(self._channels),
                limit=self.max_matches,
            )

    def _remember_replayer(self, match_id: str, status: Literal["online", "offline"]) -> None:
        self._early_replayers.pop(match_id, None)  # named again: the last to forget
        self._early_replayers[match_id] = status
        if len(self._early_replayers) > MAX_MATCHES:
            del self._early_replayers[next(iter(self._early_replayers))]

    def _catch_up(self, channel: _Channel, last_event_id: int | None) -> list[Frame]:
        state = channel.state
        if state is None:
            return []
        if last_event_id is not None and last_event_id <= state.last_seq:
            if last_event_id == state.last_seq:
                self.stats.resumed += 1
                return []
            history = channel.history
            if history and history[0].seq is not None and history[0].seq <= last_event_id + 1:
                self.stats.resumed += 1
                return [f for f in history if f.seq is not None and f.seq > last_event_id]
        return [self._snapshot_frame(state)]

    def _replayer_frame(self, match_id: str, status: str) -> Frame:
        payload = json.dumps({"match_id": match_id, "status": status}).encode()
        return Frame(sse("replayer", payload), None, self.now())

    def _snapshot_frame(self, state: MatchState) -> Frame:
        channel = self._channels.get(state.match_id)
        xg = list(channel.xg) if channel is not None and channel.xg is not None else []
        view = json.dumps(page_view(state) | {"xg": xg}, ensure_ascii=False).encode()
        payload = b'{"state":' + encode_state(state) + b',"view":' + view + b"}"
        return Frame(sse("state", payload, state.last_seq), state.last_seq, self.now())

    def _fan_out(self, clients: set[Client], frame: Frame) -> None:
        for client in list(clients):
            if not client.offer(frame):
                clients.discard(client)
                self.stats.clients_connected -= 1
                self.stats.clients_dropped += 1
                if not clients and client.match_id is not None:  # it will resume: keep frames
                    channel = self._channels.get(client.match_id)
                    if channel is not None and not channel.clients:
                        channel.left_at = self.now()
                _log.warning(
                    "browser.dropped",
                    match_id=client.match_id,
                    reason="queue_full",
                    queue_size=self.queue_size,
                )
                client.drop()

    def _note(self, state: MatchState) -> None:
        """Update the picker's list; push the one changed entry to everyone if something it
        shows changed (the whole list only goes to a browser when it connects)."""
        new = json.dumps(summary(state), ensure_ascii=False).encode()
        if self._summaries.get(state.match_id) == new:
            return
        self._summaries[state.match_id] = new
        self._matches_frame = None
        payload = b'{"match":' + new + b"}"
        frame = Frame(sse("match", payload), None, 0.0)
        self._fan_out(self._lobby, frame)
        for channel in list(self._watched.values()):
            self._fan_out(channel.clients, frame)

    def _list_frame(self) -> Frame:
        """The whole list as one frame, encoded once per change however many browsers join."""
        if self._matches_frame is None:
            payload = b'{"matches":[' + b",".join(self._summaries.values()) + b"]}"
            self._matches_frame = Frame(sse("matches", payload), None, 0.0)
        return self._matches_frame
