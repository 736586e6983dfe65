"""What probe subscribers received, counted per stream: pure, no I/O.

A *stream* is one match as one consumer sees it. A consumer is one probe connection, or a
whole shared-subscription group (its members share the work, so together they should see
every event exactly once). Per stream:

- **loss**: seqs the sender published that never arrived (gaps, and a missing tail);
- **duplicates**: a seq that arrived again;
- **reordering**: a seq that arrived after a higher one; its *displacement* is how far
  behind the highest seq seen it was.

Latency is measured from each event's ``scheduled_at`` (when it was due, not when the sender
got round to it), in microseconds, into one counter per wall second; the counters become HDR
histograms only when a figure is asked for, because recording one value in ``hdrhistogram``
costs about 10 us of Python while ``Counter.update`` on a batch costs well under one.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import zlib
from array import array
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

from events import quote

__all__ = [
    "DUPLICATE",
    "PERCENTILES",
    "REORDERED",
    "ConsumerAccount",
    "LatencySeries",
    "LatencyUnion",
    "StreamStats",
    "decode_histogram",
    "encode_histogram",
    "histogram_summary",
    "new_histogram",
    "parse_probe_fields",
]

#: Percentiles every latency summary reports.
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
#: What :meth:`StreamStats.record` says of an arrival besides "new, in order" (0).
DUPLICATE, REORDERED = 1, 2
#: Histogram range: 1 us to 10 minutes, 3 significant digits.
_LOWEST, _HIGHEST, _DIGITS = 1, 600_000_000, 3


def new_histogram() -> HdrHistogram:
    """An empty latency histogram in microseconds."""
    return HdrHistogram(_LOWEST, _HIGHEST, _DIGITS)


def encode_histogram(hist: HdrHistogram) -> str:
    """The histogram's compressed HDR encoding, as text (for JSON reports)."""
    raw = hist.encode()
    return raw.decode() if isinstance(raw, bytes) else str(raw)


#: The most a histogram may inflate to when decoded: a real one is a few kB; a forged one of
#: 285 kB inflated to 300 MB before hdrh looked at it.
MAX_HISTOGRAM_BYTES = 8 * 1024 * 1024


def decode_histogram(text: str) -> HdrHistogram:
    """A histogram from :func:`encode_histogram`'s output.

    Raises:
        ValueError: not such an output, or one that would inflate past
            :data:`MAX_HISTOGRAM_BYTES`.
    """
    hist = new_histogram()
    if text:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as err:
            raise ValueError(f"histogram is not base64: {err}") from None
        inflate = zlib.decompressobj()
        inflate.decompress(raw[8:], MAX_HISTOGRAM_BYTES)  # hdrh: an 8-byte header, then zlib
        if inflate.unconsumed_tail:
            raise ValueError(f"histogram inflates past {MAX_HISTOGRAM_BYTES} bytes")
        try:
            hist.add(HdrHistogram.decode(text.encode()))
        except Exception as err:  # hdrh's own exceptions are not ValueErrors
            raise ValueError(f"histogram does not decode: {type(err).__name__}") from None
    return hist


def histogram_summary(hist: HdrHistogram, scale: float = 1e-3) -> dict[str, float | int]:
    """Count, percentiles, min, max and mean, in milliseconds by default."""
    n = hist.get_total_count()
    out: dict[str, float | int] = {"count": n}
    for p in PERCENTILES:
        key = f"p{p:g}".replace(".", "_")
        out[key] = round(hist.get_value_at_percentile(p) * scale, 3) if n else 0.0
    out["min"] = round(hist.get_min_value() * scale, 3) if n else 0.0
    out["max"] = round(hist.get_max_value() * scale, 3) if n else 0.0
    out["mean"] = round(hist.get_mean_value() * scale, 3) if n else 0.0
    return out


def _record_counts(hist: HdrHistogram, counts: Mapping[int, int]) -> None:
    for value, n in counts.items():
        hist.record_value(min(max(value, _LOWEST), _HIGHEST), n)


class LatencySeries:
    """Latencies (us) bucketed by wall second since the start of the run.

    Recent seconds are kept as exact counts; :meth:`seal_before` turns older ones into
    compressed HDR encodings (a few hundred bytes each) and folds them into a running total,
    so a long run's memory stays flat.
    """

    def __init__(self) -> None:
        self._pending: dict[int, array[int]] = {}
        self._counts: dict[int, Counter[int]] = {}
        self._sealed: dict[int, tuple[str, int]] = {}  # second -> (HDR encoding, count)
        self._total = new_histogram()

    def add(self, second: int, latency_us: int) -> None:
        """Record one latency in ``second``."""
        buf = self._pending.get(second)
        if buf is None:
            buf = self._pending[second] = array("q")
        buf.append(latency_us)

    def _fold(self) -> None:
        for second, buf in self._pending.items():
            self._counts.setdefault(second, Counter()).update(buf)
        self._pending.clear()

    def seal_before(self, second: int) -> None:
        """Compress every second before ``second``; late values for it are still taken."""
        self._fold()
        for sec in [s for s in self._counts if s < second]:
            hist = new_histogram()
            _record_counts(hist, self._counts.pop(sec))
            self._total.add(hist)
            if sec in self._sealed:
                hist.add(decode_histogram(self._sealed[sec][0]))
            self._sealed[sec] = (encode_histogram(hist), hist.get_total_count())

    def seconds(self) -> list[int]:
        """The seconds that hold at least one value, in order."""
        self._fold()
        return sorted({*self._counts, *self._sealed})

    def histogram(self, second: int | None = None) -> HdrHistogram:
        """The histogram of one second, or of the whole run."""
        self._fold()
        if second is not None:
            sealed = self._sealed.get(second)
            hist = decode_histogram(sealed[0]) if sealed else new_histogram()
            _record_counts(hist, self._counts.get(second, Counter()))
            return hist
        hist = new_histogram()
        hist.add(self._total)
        total: Counter[int] = Counter()
        for counts in self._counts.values():
            total.update(counts)
        _record_counts(hist, total)
        return hist

    def counts(self, second: int) -> Counter[int]:
        """The exact latency counts of ``second`` not yet sealed (value in us -> how many)."""
        self._fold()
        return self._counts.get(second, Counter())

    def count(self, second: int) -> int:
        """Values recorded in ``second``."""
        self._fold()
        sealed = self._sealed.get(second, ("", 0))[1]
        return sealed + sum(self._counts.get(second, Counter()).values())


class LatencyUnion:
    """Several :class:`LatencySeries` read as one: a run's latencies, kept per node.

    Each probe connection records into its node's series (no second record per message);
    the run's figures are the sum of the parts, added only when asked for.
    """

    def __init__(self) -> None:
        self.parts: list[LatencySeries] = []

    def part(self) -> LatencySeries:
        """A new series that counts in the union."""
        series = LatencySeries()
        self.parts.append(series)
        return series

    def seal_before(self, second: int) -> None:
        """:meth:`LatencySeries.seal_before` on every part."""
        for series in self.parts:
            series.seal_before(second)

    def seconds(self) -> list[int]:
        """The seconds that hold at least one value in some part, in order."""
        return sorted({s for series in self.parts for s in series.seconds()})

    def histogram(self, second: int | None = None) -> HdrHistogram:
        """The histogram of one second, or of the whole run, over every part."""
        hist = new_histogram()
        for series in self.parts:
            hist.add(series.histogram(second))
        return hist

    def counts(self, second: int) -> Counter[int]:
        """The exact counts of ``second`` not yet sealed, over every part."""
        total: Counter[int] = Counter()
        for series in self.parts:
            total.update(series.counts(second))
        return total

    def count(self, second: int) -> int:
        """Values recorded in ``second``, over every part."""
        return sum(series.count(second) for series in self.parts)


@dataclass(slots=True)
class StreamStats:
    """One match as one consumer received it."""

    received: int = 0
    unique: int = 0
    duplicates: int = 0
    reordered: int = 0
    max_displacement: int = 0
    max_seq: int = 0
    seen: bytearray = field(default_factory=bytearray)

    def record(self, seq: int) -> int:
        """Account one arrival of ``seq`` (1-based): 0 if new and in order, else
        :data:`DUPLICATE` or :data:`REORDERED` (so a caller can count them per node)."""
        self.received += 1
        byte, bit = divmod(seq - 1, 8)
        seen = self.seen
        if byte >= len(seen):
            seen.extend(bytes(byte - len(seen) + 16))
        mask = 1 << bit
        if seen[byte] & mask:
            self.duplicates += 1
            return DUPLICATE
        seen[byte] |= mask
        self.unique += 1
        if seq < self.max_seq:
            self.reordered += 1
            self.max_displacement = max(self.max_displacement, self.max_seq - seq)
            return REORDERED
        self.max_seq = seq
        return 0

    def to_wire(self) -> list[int | str]:
        """A compact, JSON-ready form: counters and the seen-bitmap in base64."""
        return [
            self.received,
            self.duplicates,
            self.reordered,
            self.max_displacement,
            self.max_seq,
            base64.b64encode(bytes(self.seen)).decode(),
        ]

    @classmethod
    def from_wire(cls, data: list[Any]) -> StreamStats:
        """The inverse of :meth:`to_wire`."""
        received, dup, reo, disp, max_seq, seen = data
        bits = bytearray(base64.b64decode(seen))
        unique = sum(b.bit_count() for b in bits)
        return cls(received, unique, dup, reo, disp, max_seq, bits)

    def merge(self, other: StreamStats) -> None:
        """Fold in what another process saw of the same stream for the same consumer.

        A seq both saw is a duplicate; reordering within each is summed (across processes
        arrival order is not comparable).
        """
        if len(other.seen) > len(self.seen):
            self.seen.extend(bytes(len(other.seen) - len(self.seen)))
        for i, b in enumerate(other.seen):
            self.seen[i] |= b
        self.received += other.received
        self.unique = sum(b.bit_count() for b in self.seen)
        self.duplicates = self.received - self.unique
        self.reordered += other.reordered
        self.max_displacement = max(self.max_displacement, other.max_displacement)
        self.max_seq = max(self.max_seq, other.max_seq)

    def seen_up_to(self, last: int) -> int:
        """How many distinct seqs of 1..``last`` arrived."""
        if self.max_seq <= last:
            return self.unique
        whole, rest = divmod(last, 8)
        seen = self.seen
        count = int.from_bytes(seen[:whole], "little").bit_count()
        if rest and whole < len(seen):
            count += (seen[whole] & ((1 << rest) - 1)).bit_count()
        return count

    def missing(self, expected_last: int) -> list[int]:
        """The seqs in 1..expected_last that never arrived."""
        seen = self.seen
        out = []
        for seq in range(1, expected_last + 1):
            byte, bit = divmod(seq - 1, 8)
            if byte >= len(seen) or not seen[byte] & (1 << bit):
                out.append(seq)
        return out


@dataclass(slots=True)
class ConsumerAccount:
    """Every stream one consumer (a probe, or a shared group) received, and its latencies.

    A probe that joined a run under way (``--subscriber-stages``) holds in ``since`` the last
    seq of each match sent before it listened: those it is not expected to receive. One that
    left holds in ``until`` what had been sent when it left: it is expected to receive no more.
    """

    name: str
    members: int = 1
    streams: dict[str, StreamStats] = field(default_factory=dict)
    latency: LatencySeries = field(default_factory=LatencySeries)
    malformed: int = 0
    unexpected: int = 0
    since: dict[str, int] | None = None
    until: dict[str, int] | None = None

    def bounds(self, expected: Mapping[str, int]) -> dict[str, tuple[int, int]]:
        """Per match of ``expected`` (last seq sent), the seqs this consumer should have:
        ``(after, up to)``."""
        since, until = self.since or {}, self.until
        out = {}
        for match_id, sent in expected.items():
            last = sent if until is None else min(sent, until.get(match_id, 0))
            first = since.get(match_id, 0)
            if last > first:
                out[match_id] = (first, last)
        return out

    def owed(self, expected: Mapping[str, int]) -> int:
        """Events of ``expected`` this consumer should have and has not received (yet)."""
        none = StreamStats()
        owed = 0
        for match_id, (first, last) in self.bounds(expected).items():
            stream = self.streams.get(match_id, none)
            got = stream.seen_up_to(last) - (stream.seen_up_to(first) if first else 0)
            owed += last - first - got
        return owed

    def record(self, match_id: str, seq: int, second: int, latency_us: int) -> None:
        """Account one event of ``match_id`` received in ``second`` with this latency."""
        stream = self.streams.get(match_id)
        if stream is None:
            stream = self.streams[match_id] = StreamStats()
        stream.record(seq)
        self.latency.add(second, latency_us)

    @property
    def received(self) -> int:
        """Messages received, duplicates included."""
        return sum(s.received for s in self.streams.values())

    @property
    def unique(self) -> int:
        """Distinct events received."""
        return sum(s.unique for s in self.streams.values())

    def complete(self, expected: Mapping[str, int]) -> bool:
        """True once every expected event arrived at least once."""
        if self.since is not None or self.until is not None:
            return self.owed(expected) == 0
        return all(
            (s := self.streams.get(m)) is not None and s.unique >= n
            for m, n in expected.items()
            if n
        )

    def totals(
        self,
        expected: Mapping[str, int],
        injected: Mapping[str, StreamStats] | None = None,
    ) -> dict[str, Any]:
        """Loss, duplicates and reordering over all streams; ``expected`` is last seq per match.

        A stream the sender never published (a match id it does not know) counts as
        ``unexpected`` messages rather than loss. ``injected`` holds, per match sent under
        chaos, the seqs in the order the sender really sent them: the figures split into
        what was ``injected`` (seqs never sent, duplicates and reordering sent on purpose) and
        what the ``network`` (broker, connections) added on top: a seq sent but never
        received, duplicates and reorderings beyond the injected ones.
        """
        lost = dup = reo = disp = 0
        inj = {"lost": 0, "duplicates": 0, "reordered": 0}
        net = {"lost": 0, "duplicates": 0, "reordered": 0}
        lossy: dict[str, list[int]] = {}
        none = StreamStats()
        bounds = self.bounds(expected)
        for match_id, (first, last) in bounds.items():
            stream = self.streams.get(match_id, none)
            missing = [seq for seq in stream.missing(last) if seq > first]
            if missing:
                lossy[match_id] = missing
            lost += len(missing)
            sent = injected.get(match_id) if injected else None
            never = set(sent.missing(last)) if sent is not None else set()
            inj["lost"] += len(never)
            net["lost"] += len(set(missing) - never)
        for match_id, stream in self.streams.items():
            dup += stream.duplicates
            reo += stream.reordered
            disp = max(disp, stream.max_displacement)
            sent = injected.get(match_id) if injected else None
            sent_dup = sent.duplicates if sent is not None else 0
            sent_reo = sent.reordered if sent is not None else 0
            inj["duplicates"] += min(sent_dup, stream.duplicates)
            inj["reordered"] += min(sent_reo, stream.reordered)
            net["duplicates"] += max(stream.duplicates - sent_dup, 0)
            net["reordered"] += max(stream.reordered - sent_reo, 0)
        unexpected = sum(s.received for m, s in self.streams.items() if m not in expected)
        return {
            "consumer": self.name,
            "members": self.members,
            "expected": sum(last - first for first, last in bounds.values()),
            "received": self.received,
            "unique": self.unique,
            "lost": lost,
            "duplicates": dup,
            "reordered": reo,
            "max_displacement": disp,
            "unexpected": unexpected + self.unexpected,
            "malformed": self.malformed,
            "streams_with_loss": len(lossy),
            "lost_seqs_sample": {m: s[:20] for m, s in list(lossy.items())[:10]},
            "injected": inj,
            "network": net,
        }


# ---------------------------------------------------------------- parsing a payload fast

_SEQ = b'"seq":'
#: The largest seq a probe accounts (a match has a few hundred; a bitmap of this many seqs is
#: 125 kB).
MAX_PROBE_SEQ = 1_000_000
_SCHED = b'"scheduled_at":"'
_EPOCH_CACHE: dict[bytes, int] = {}


def _epoch_seconds(prefix: bytes) -> int:
    """Seconds since the epoch of ``YYYY-MM-DDTHH:MM:SS`` (UTC), cached per second."""
    cached = _EPOCH_CACHE.get(prefix)
    if cached is None:
        if len(_EPOCH_CACHE) > 4096:
            _EPOCH_CACHE.clear()
        p = prefix
        cached = calendar.timegm(
            (int(p[0:4]), int(p[5:7]), int(p[8:10]), int(p[11:13]), int(p[14:16]), int(p[17:19]))
        )
        _EPOCH_CACHE[prefix] = cached
    return cached


def parse_probe_fields(payload: bytes) -> tuple[int, float | None]:
    """``(seq, scheduled_at as epoch seconds)`` of an event payload, without decoding it all.

    A probe reads tens of thousands of events a second; full validation would cost more
    than the rest of the probe. ``scheduled_at`` is None where the event has none.

    Raises:
        ValueError: the payload has no ``seq`` or a malformed timestamp.
    """
    # The fast path reads what matchcast writes: `"seq":N,` and `"scheduled_at":"...SS.ffffffZ"`;
    # anything else (spaces, no fraction, +00:00) takes the careful path.
    i = payload.find(_SEQ)
    if i < 0:
        raise ValueError("no seq in payload")
    i += len(_SEQ)
    j = payload.find(b",", i)
    k = payload.find(_SCHED, j) if j > 0 else -1
    if k < 0:
        return _parse_carefully(payload)
    k += len(_SCHED)
    e = payload.find(b'"', k)
    if not 22 <= e - k <= 40 or payload[e - 1] != 90 or payload[k + 19] != 46:  # "Z", "."
        return _parse_carefully(payload)
    try:
        seq = int(payload[i:j])
        seconds = _epoch_seconds(payload[k : k + 19])
        frac = int(payload[k + 20 : e - 1])
    except ValueError:
        return _parse_carefully(payload)
    return _checked(seq), seconds + frac * _SCALE[e - k - 21]


def _checked(seq: int) -> int:
    """``seq`` if a probe can account it: from 1 to :data:`MAX_PROBE_SEQ` (each seq is a bit
    of a bitmap: a forged ``"seq": 99999999999`` asked for 12 GB, a ``0`` or ``-5`` indexed
    it from the end)."""
    if not 1 <= seq <= MAX_PROBE_SEQ:
        raise ValueError(f"seq {seq} is outside 1 to {MAX_PROBE_SEQ:,}")
    return seq


_SCALE = tuple(10.0**-n for n in range(32))


def _parse_carefully(payload: bytes) -> tuple[int, float | None]:
    i = payload.find(_SEQ)
    if i < 0:
        raise ValueError("no seq in payload")
    i += len(_SEQ)
    n = len(payload)
    while i < n and payload[i] in b" \t\r\n":
        i += 1
    j = i
    while j < n and 48 <= payload[j] <= 57:
        j += 1
    if j == i:
        raise ValueError("seq is not a number")
    if j - i > 9:
        raise ValueError("seq is too long a number")
    seq = _checked(int(payload[i:j]))
    k = payload.find(_SCHED, j)
    if k < 0:
        return seq, None
    k += len(_SCHED)
    ts = payload[k : payload.find(b'"', k)]
    if len(ts) > 40:  # a timestamp is at most 32 characters; read no further
        raise ValueError(f"scheduled_at {quote(ts)} is not a timestamp")
    if ts.endswith(b"Z"):
        body = ts[:-1]
    elif ts.endswith(b"+00:00"):
        body = ts[:-6]
    else:
        raise ValueError(f"scheduled_at {quote(ts)} is not UTC")
    if len(body) < 19:
        raise ValueError(f"scheduled_at {quote(ts)} is not a timestamp")
    try:
        seconds = _epoch_seconds(body[:19])
    except ValueError:
        raise ValueError(f"scheduled_at {quote(ts)} is not a timestamp") from None
    frac = 0.0
    if len(body) > 20 and body[19] == 46:  # "."
        digits = body[20:]
        frac = int(digits) / 10 ** len(digits)
    return seq, seconds + frac
