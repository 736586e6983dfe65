"""Several brokers: the order and pace in which they are tried.

``--broker`` (and ``$MATCHCAST_BROKER``) take a comma-separated list of broker URLs, the nodes
of one cluster (``mqtt://10.0.0.1:1883,mqtt://10.0.0.2:1883``; read by
:func:`matchcast.transport.connection.parse_brokers`). Both MQTT clients
(:class:`~matchcast.transport.mqtt.MqttClient` on aiomqtt and
:class:`~matchcast.transport.fastmqtt.FastClient`) take their connection attempts from one
:class:`Attempts` schedule, so the failover policy is written once:

- a first connection tries the list in order, at once, and connects to the first node that
  answers;
- after a lost connection, the next node after the lost one goes first and the lost node last
  (it is the one most likely down), then round-robin;
- each full pass over the list that fails doubles the wait before an attempt (exponential
  backoff from ``initial`` to ``cap``), and every wait is a random fraction of it (full jitter),
  so clients that lost the same node do not all return at once. With one broker this is the
  familiar backoff 0.1 s doubling to 5 s; with several, a dead node costs one quick attempt
  before the next node is tried, so a client is connected again within seconds;
- each attempt also says how long to wait for the node's answer (:attr:`Attempt.timeout`): a
  first connection, or a list of one, waits the full connect timeout; a failover attempt on a
  list waits ``failover_timeout`` (2 s) on its first pass, doubling per pass up to the connect
  timeout. A surviving node that stalls a CONNECT (NATS while JetStream elects new leaders)
  then costs 2 s, not 10, before the next node is asked, and a node that is merely slow is
  still reached on a later pass;
- a connection that dies within ``stable`` seconds (10 s) of being made (a broker that
  accepts, then sends a malformed packet or closes at the first SUBSCRIBE) counts as a quick
  loss, and the next replacement first waits ``initial`` doubling per quick loss in a row up to
  ``cap`` (0.1, 0.2, ... 5 s), logged as ``broker.reconnect_delayed``; a connection that
  lasted resets it. Without it a client would reconnect as fast as such a broker answers.

Every reconnect of matchcast (``watch``, ``consume``, ``web``, the replayer, the replayer
statuses, the load tester's consumers) goes through the clients' ``reconnect()``, so through
:func:`fail_over` and this one policy.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from events import BrokerError

if TYPE_CHECKING:
    from matchcast.transport.connection import BrokerURL

__all__ = [
    "FAILOVER_CONNECT_TIMEOUT",
    "STABLE_S",
    "Attempt",
    "Attempts",
    "QuickLosses",
    "Session",
    "backoff",
    "fail_over",
    "failover_client_id",
    "raise_if_cancelled",
]

_log = structlog.get_logger("matchcast.failover")

#: Seconds the first failover pass over a list waits for a node's CONNACK.
FAILOVER_CONNECT_TIMEOUT = 2.0
#: Seconds a connection must last for its loss not to count as a quick one.
STABLE_S = 10.0
#: A connection that made progress and lasted this long is a broker going away when it is
#: lost, not a storm (see :meth:`QuickLosses.wait`).
SETTLED_S = 0.25


@dataclass(frozen=True, slots=True)
class Attempt:
    """One connection attempt: wait ``delay`` seconds, then try ``url`` (``index`` in the list),
    waiting at most ``timeout`` seconds for it to connect and answer."""

    index: int
    url: BrokerURL
    delay: float
    timeout: float


class QuickLosses:
    """The wait before replacing a lost connection: none after one that lasted ``stable``
    seconds; else ``initial`` doubling per quick loss in a row, up to ``cap``. A failed attempt
    (no :meth:`connected` since the last :meth:`wait`) counts as a quick loss too. Used by
    :class:`Attempts`, and by a loop that makes new clients rather than reconnecting one (the
    load tester's probes)."""

    def __init__(
        self,
        *,
        initial: float = 0.1,
        cap: float = 5.0,
        stable: float = STABLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.stable = stable
        self._clock = clock
        #: Quick losses in a row.
        self.count = 0
        #: A message came through the connection (set by its reader) or the broker
        #: acknowledged one sent (by its publisher): its loss is a broker going away, not a
        #: storm of connections refused at once.
        self.progress = False
        self._up_since: float | None = None

    def connected(self) -> None:
        """A connection was made now."""
        self._up_since = self._clock()
        self.progress = False

    def wait(self) -> float:
        """Seconds to wait before the next connection, the last one being lost now."""
        up_since, self._up_since = self._up_since, None
        lasted = self._clock() - up_since if up_since is not None else 0.0
        if up_since is not None and lasted >= self.stable:
            self.count = 0
            return 0.0
        if up_since is not None and self.progress and lasted >= SETTLED_S:
            # It delivered, or had its publishes acknowledged, for a while before it died (a
            # broker killed and restarted): ``initial``, not the doubling, so a consumer is
            # back before its gap is repaired from the snapshot and a replayer before its
            # consumers give up waiting for what it sends again. A broker that answers and
            # then breaks the connection at once still gets the doubling.
            self.progress = False
            self.count = 0
            return float(self.initial)
        self.count += 1
        if self.initial * 2.0 ** min(self.count - 1, 64) >= self.cap:
            return float(self.cap)
        return float(self.initial * 2 ** (self.count - 1))


class Attempts:
    """The schedule of connection attempts over a list of brokers.

    :meth:`first_pass` gives the attempts of a first connection (the list in order, at once;
    a caller that gets through it without a connection reports the brokers unreachable).
    :meth:`after_loss` gives the endless attempts after an established connection was lost
    (the caller bounds them by time). Call :meth:`connected` when an attempt succeeds, so the
    next loss starts from the right node with the backoff reset. ``rng`` returns a float in
    [0, 1): injectable, so a test sees the exact schedule.
    """

    def __init__(
        self,
        urls: Sequence[BrokerURL],
        *,
        initial: float = 0.1,
        cap: float = 5.0,
        connect_timeout: float = 10.0,
        failover_timeout: float = FAILOVER_CONNECT_TIMEOUT,
        stable: float = STABLE_S,
        rng: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not urls:
            raise ValueError("no broker to connect to")
        self.urls = tuple(urls)
        self.initial = initial
        self.cap = cap
        self.connect_timeout = connect_timeout
        self.failover_timeout = min(failover_timeout, connect_timeout)
        self._rng = rng
        #: The index of the node of the current (or last) connection.
        self.current = 0
        self.losses = QuickLosses(initial=initial, cap=cap, stable=stable, clock=clock)

    @property
    def quick_losses(self) -> int:
        """Connections in a row that died within ``stable`` seconds."""
        return self.losses.count

    def connected(self, index: int) -> None:
        """An attempt on ``urls[index]`` succeeded: the next loss starts after it."""
        self.current = index
        self.losses.connected()

    def progressed(self) -> None:
        """A message came through the current connection, or one sent was acknowledged (see
        :class:`QuickLosses`)."""
        self.losses.progress = True

    def loss_wait(self) -> float:
        """See :meth:`QuickLosses.wait`."""
        return self.losses.wait()

    def first_pass(self) -> Iterator[Attempt]:
        """A first connection: each broker once, in the order given, with no wait."""
        for index, url in enumerate(self.urls):
            yield Attempt(index, url, 0.0, self.connect_timeout)

    def after_loss(self, *, current_first: bool = False) -> Iterator[Attempt]:
        """Endless attempts after the connection to :attr:`current` was lost.

        The nodes after the lost one go first, the lost one last, then round-robin
        (``current_first``: the current node first, then the others, for a connection that
        was given up with its node still up, as a session that node cannot resume). Pass
        ``r`` (from 0) waits a random fraction of ``min(cap, initial * 2**r)`` before each
        attempt, and gives the node ``min(connect_timeout, failover_timeout * 2**r)`` to answer
        (a list of one always gets the full connect timeout: there is no other node to try).
        """
        n = len(self.urls)
        start = self.current if current_first else (self.current + 1) % n
        attempt = 0
        while True:
            rounds = min(attempt // n, 64)  # 2**64 is past every cap; a float overflows
            index = (start + attempt) % n
            ceiling = min(self.cap, self.initial * 2**rounds)
            timeout = (
                self.connect_timeout
                if n == 1
                else min(self.connect_timeout, self.failover_timeout * 2**rounds)
            )
            yield Attempt(index, self.urls[index], self._rng() * ceiling, timeout)
            attempt += 1


def failover_client_id(base: str) -> str:
    """The client id of a clean-session connection failed over to another node: ``base`` and a
    suffix of its own. NATS 2.9 leaves a CONNECT unanswered for 20 s and more when its client id
    belonged to a client of the node that died (3 failovers of 4 here), and answers a new id at
    once; with no session to resume, nothing is lost by the change. A persistent session keeps
    its id (the session is the id), and a reconnect to the same node keeps it too, so the broker
    replaces a half-open connection of ours instead of keeping both."""
    return f"{base}-{uuid.uuid4().hex[:6]}"


class Session:
    """A client's MQTT session across its connections, for both clients: the client id each
    connection uses, whether it asks the broker to resume the session, and whether the last
    CONNACK said it did.

    A clean session fails over to another node under an id of its own
    (:func:`failover_client_id`); a persistent one keeps its id until :meth:`start_clean`
    gives it up.
    """

    def __init__(self, client_id: str, *, clean_start: bool) -> None:
        #: The id given; :attr:`client_id` is the one the next connection uses.
        self.base_id = client_id
        self.client_id = client_id
        self.clean_start = clean_start
        #: The session-present flag of the last CONNACK.
        self.present = False

    @property
    def persistent(self) -> bool:
        """True while connections ask the broker to resume the session (clean start off)."""
        return not self.clean_start

    @property
    def resumed(self) -> bool:
        """True where the current connection resumed a persistent session (the broker's
        CONNACK said so): what was published while away comes queued."""
        return not self.clean_start and self.present

    def start_clean(self) -> None:
        """Connect with a clean session, under a client id of its own, from now on: the broker
        will not serve a session under this id (RabbitMQ 3.10 closes the connection at every
        SUBSCRIBE under an id whose queue lives on a node that is down:
        :class:`events.SubscribeDroppedError`). The original id keeps its session for when
        that node returns. Reconnect with ``same_node_first``: the node that refused it is up."""
        self.clean_start = True
        self.client_id = failover_client_id(self.base_id)

    def before(self, attempt: Attempt, lost: int) -> None:
        """Before a reconnect ``attempt`` after the node at index ``lost`` was lost: a clean
        session takes an id of its own on another node."""
        if self.clean_start and attempt.index != lost:
            self.client_id = failover_client_id(self.base_id)


def raise_if_cancelled() -> None:
    """Raise the cancel (Ctrl-C, SIGTERM) a connection attempt swallowed. Python 3.11's
    ``asyncio.wait_for``, which aiomqtt 2 waits for a CONNACK with, returns the result when a
    cancel lands as the awaited thing ends, and the reconnect loop went on for ever; the task
    still counts the cancel."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def backoff(seconds: float) -> None:
    """The wait after a quick loss (a test records it instead of sleeping)."""
    await asyncio.sleep(seconds)


def _no_details() -> Mapping[str, object]:
    return {}


async def fail_over(
    attempts: Attempts,
    connect: Callable[[Attempt], Awaitable[None]],
    *,
    where: str,
    max_outage: float,
    give_up_reason: Callable[[BrokerError], str] = lambda err: err.reason,
    details: Callable[[], Mapping[str, object]] = _no_details,
    current_first: bool = False,
) -> None:
    """Replace a lost connection, as both clients do: wait :meth:`Attempts.loss_wait`, then
    ``connect`` each of :meth:`Attempts.after_loss` (``current_first`` passed on) in turn, after
    its wait, until one succeeds.

    Logs ``broker.reconnect_delayed`` before a wait for a connection that died at once,
    ``broker.reconnect_failed`` for each failure, then ``broker.failed_over`` (another node)
    or ``broker.reconnected`` (the lost one), with the client's ``details`` of the new connection.

    Raises:
        BrokerError: for ``where``, when no attempt succeeded within ``max_outage`` seconds;
            its reason ends with ``give_up_reason`` of the last failure.
    """
    lost = attempts.current
    started = time.monotonic()
    wait = attempts.loss_wait()
    if wait:
        _log.warning(
            "broker.reconnect_delayed",
            broker=str(attempts.urls[lost]),
            wait_s=wait,
            quick_losses=attempts.quick_losses,
        )
        await backoff(wait)
    schedule = attempts.after_loss(current_first=current_first)
    for number, attempt in enumerate(schedule, start=1):
        await asyncio.sleep(attempt.delay)
        try:
            await connect(attempt)
        except BrokerError as err:
            raise_if_cancelled()
            waited = time.monotonic() - started
            _log.warning(
                "broker.reconnect_failed",
                broker=str(attempt.url),
                attempt=number,
                reason=err.reason,
                outage_s=round(waited, 2),
            )
            if waited > max_outage:
                raise BrokerError(
                    where, f"unreachable for {waited:.0f}s, giving up: {give_up_reason(err)}"
                ) from err
            continue
        attempts.connected(attempt.index)
        raise_if_cancelled()
        outage = round(time.monotonic() - started, 3)
        if attempt.index != lost:
            _log.warning(
                "broker.failed_over",
                lost=str(attempts.urls[lost]),
                broker=str(attempt.url),
                attempt=number,
                **details(),
                outage_s=outage,
            )
        else:
            _log.info(
                "broker.reconnected",
                broker=str(attempt.url),
                attempt=number,
                **details(),
                outage_s=outage,
            )
        return
