"""The replayer's sender under chaos: it sends, each at its due time, the messages that
:func:`~simulator._chaos.apply_chaos` (the pure, seeded transform of the stream) makes of a
match, and goes on from the first unacknowledged one after a reconnect.

A sibling of simulator/_run.py, the clean run's loop: a faulted stream is not controllable
(no pause, speed or seek), so it is a loop of its own. :meth:`Replayer.run` picks one of the
two (simulator/_replay.py).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import TYPE_CHECKING

import structlog

from events import (
    BrokerError,
    Event,
    MatchState,
    MessageProps,
    Reconnectable,
    encode_event,
    encode_state,
)
from simulator._chaos import Emission, apply_chaos
from simulator._sending import _event_props, _first, _state_props

if TYPE_CHECKING:
    from simulator._replay import Replayer, ReplayReport


class _Chaos:
    """A replay under chaos: sends what :func:`~simulator._chaos.apply_chaos` says, on time.

    Each message goes out at its own due time (at maximum speed only delayed and held ones
    wait). After a lost connection, as a clean replay does, it reconnects, republishes the
    retained state and resumes at the first message the broker had not acknowledged.
    """

    def __init__(
        self, replayer: Replayer, log: structlog.typing.FilteringBoundLogger, report: ReplayReport
    ) -> None:
        self.replayer = replayer
        self.log = log
        self.report = report
        self.unacked: set[int] = set()  # indices of messages awaiting acknowledgement
        self.next_index = 0
        # A duplicate is the very payload sent before, as a QoS 1 redelivery is.
        self.sent: dict[tuple[int, int], tuple[str, bytes, MessageProps]] = {}

    async def run(self, events: list[Event], offsets: list[float], initial: MatchState) -> None:
        replayer, report = self.replayer, self.report
        opts = replayer.options
        assert opts.chaos is not None
        wall0 = replayer.wall_now()
        run_id = report.run  # this replay's run (new_run); a restart's is larger
        start = initial.model_copy(update={"run": run_id})
        stream = apply_chaos(
            events, offsets, start, opts.chaos, seed=opts.seed, key=report.match_id, run=run_id
        )
        report.faults = stream.faults
        report.truth = stream.truth
        self.log.info(
            "replay.started",
            events=len(events),
            speed=opts.speed or "max",
            chaos=str(opts.chaos),
            seed=opts.seed,
            faults=len(stream.faults),
            run=run_id,
        )
        if initial.last_seq > 0:  # a start mid-match: say the score first
            await self._publish_state(start)
        clock = replayer.clock
        t0 = clock.now()
        index = 0
        pub = replayer.publisher
        while True:
            try:
                await self._send_from(index, stream.emissions, t0, wall0)
                break
            except ExceptionGroup as group:
                lost, rest = group.split(BrokerError)
                if rest is not None or lost is None or not isinstance(pub, Reconnectable):
                    raise
                reason = _first(lost)
            self.log.warning("replay.connection_lost", reason=reason, last_seq=report.last_seq)
            await pub.reconnect()
            report.reconnects += 1
            index = min(self.unacked) if self.unacked else self.next_index
            retained = [e.state for e in stream.emissions[:index] if e.retain and e.state]
            await self._publish_state(retained[-1] if retained else start)
            self.log.info("replay.resuming", from_message=index)
        report.duration_s = clock.now() - t0
        report.final_state = stream.truth
        self.log.info(
            "replay.finished",
            published=report.published,
            faults=len(stream.faults),
            reconnects=report.reconnects,
            duration_s=round(report.duration_s, 3),
            score=stream.truth.scoreline,
        )

    async def _publish_state(self, state: MatchState) -> None:
        opts = self.replayer.options
        await self.replayer.publisher.publish(
            opts.topics.state(state.match_id),
            encode_state(state),
            qos=opts.qos,
            retain=True,
            props=_state_props(state),
        )

    async def _send_from(
        self, index: int, emissions: tuple[Emission, ...], t0: float, wall0: dt.datetime
    ) -> None:
        replayer, report = self.replayer, self.report
        opts, clock, pub = replayer.options, replayer.clock, replayer.publisher
        events_topic = opts.topics.events(report.match_id)
        state_topic = opts.topics.state(report.match_id)
        window = replayer.window if opts.speed is None else asyncio.Semaphore(2)
        sends: set[asyncio.Task[None]] = set()
        self.unacked.clear()
        async with asyncio.TaskGroup() as tg:
            watcher = tg.create_task(pub.wait_lost()) if isinstance(pub, Reconnectable) else None
            for i in range(index, len(emissions)):
                emission = emissions[i]
                deadline = t0 + emission.due
                if opts.speed is not None or emission.due > 0:
                    await clock.sleep_until(deadline)
                key = (emission.run, emission.seq)
                if emission.event is not None and key in self.sent:
                    topic, payload, props = self.sent[key]
                else:
                    topic, payload, props = self._message(
                        emission, events_topic, state_topic, wall0
                    )
                    if emission.event is not None:
                        self.sent[key] = (topic, payload, props)
                await window.acquire()
                self.unacked.add(i)
                self.next_index = i + 1
                send = tg.create_task(self._send(window, i, topic, payload, emission.retain, props))
                sends.add(send)
                send.add_done_callback(sends.discard)
                if emission.event is not None:
                    report.published += 1
                    report.lateness_s.append(clock.now() - deadline if opts.speed else 0.0)
                    report.first_seq = report.first_seq or emission.event.seq
                    report.last_seq = emission.event.seq
            if sends:
                await asyncio.wait(sends)
            if watcher is not None:
                watcher.cancel()

    def _message(
        self, emission: Emission, events_topic: str, state_topic: str, wall0: dt.datetime
    ) -> tuple[str, bytes, MessageProps]:
        replayer = self.replayer
        if emission.event is not None:
            event = emission.event.model_copy(
                update={
                    "emitted_at": replayer.wall_now(),
                    "scheduled_at": wall0 + dt.timedelta(seconds=emission.scheduled),
                }
            )
            return events_topic, encode_event(event), _event_props(replayer.options, event)
        assert emission.state is not None
        return state_topic, encode_state(emission.state), _state_props(emission.state)

    async def _send(
        self,
        window: asyncio.Semaphore,
        index: int,
        topic: str,
        payload: bytes,
        retain: bool,
        props: MessageProps,
    ) -> None:
        try:
            await self.replayer.publisher.publish(
                topic, payload, qos=self.replayer.options.qos, retain=retain, props=props
            )
        finally:
            window.release()
        self.unacked.discard(index)
