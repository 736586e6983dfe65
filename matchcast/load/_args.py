"""The options of one ``matchcast load`` as given, and what they mean for this process.

:class:`LoadArgs` holds the options (checked one by one by the command module); :func:`plan`
checks them together and works out this process's share: its matches and probes (a shard's,
or all), the run's :class:`~matchcast.load.LoadOptions` and the report's parameters.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from events import LOAD_ROOT, Topics, quote
from matchcast.load._errors import LoadError
from matchcast.load._run import LoadOptions
from matchcast.load._stages import StageError, Stages, parse_stages
from matchcast.load._workload import LoadShape, MatchTemplate
from matchcast.redact import redact_argv
from matchcast.transport.clients import ClientKind
from simulator import ChaosSpec, Match

__all__ = ["DEFAULT_DURATION_S", "DEFAULT_SPEED", "LoadArgs", "Plan", "plan"]

#: A run given none of --speed, --rate, --duration, --stages: this long, at this speed.
DEFAULT_DURATION_S = 30.0
DEFAULT_SPEED = "60"


@dataclass(frozen=True)
class LoadArgs:
    """The options of one ``matchcast load`` as given (its outputs aside), built once; the
    defaults are the command's.

    ``speed`` is None where not given; :meth:`honest` fills in the defaults and reads
    ``stages`` and ``subscriber_stages`` into ``parsed_stages`` and
    ``parsed_subscriber_stages``.
    """

    specs: list[str] | None = None
    feed: str = "full"  # simulator.Feed: full (wire 1.4) or lean (the events of 1.3)
    broker: str | None = None
    tls: tuple[Path | None, Path | None, Path | None, bool] = (None, None, None, False)
    spawn_mosquitto: bool = False
    matches: int | None = None
    subscribers: int = 1
    shared_group: str | None = None
    speed: str | None = None
    rate: float | None = None
    ramp: float | None = None
    duration: float | None = None
    qos: int = 0
    payload_size: int = 0
    states: bool = True
    publishers: int = 1
    max_inflight: int = 1000
    overrun_ms: float = 10.0
    drain_idle: float = 2.0
    client: ClientKind = ClientKind.fast
    root: str = LOAD_ROOT
    verify_state: bool = False
    expect_consumer: tuple[str, ...] = ()
    verify_timeout: float = 15.0
    workers: int = 1
    probe_workers: int = 0
    probe_only: bool = False
    shard: str | None = None
    start_at: float | None = None
    tag: str | None = None
    progress: bool = True
    keep: bool = False
    chaos: str | None = None
    seed: int = 0
    chaos_log: Path | None = None
    truth: Path | None = None
    protocol: str = "auto"
    stages: str | None = None
    subscriber_stages: str | None = None
    dask: str | None = None
    shards: int | None = None
    parsed_stages: Stages | None = field(default=None, compare=False)
    parsed_subscriber_stages: Stages | None = field(default=None, compare=False)

    @property
    def in_workers(self) -> bool:
        """Whether the run is shards on Dask (``--dask``, ``--workers``, ``--probe-workers``)."""
        return self.dask is not None or self.workers > 1 or self.probe_workers > 0

    def honest(self) -> LoadArgs:
        """These options with the defaults filled in, checked together.

        ``--speed`` is :data:`DEFAULT_SPEED` unless given (``max`` is a throughput test,
        asked for by name; ``--rate`` overrides either); given none of ``--speed``,
        ``--rate``, ``--duration`` and ``--stages``, a run lasts :data:`DEFAULT_DURATION_S`.
        ``--stages`` replaces ``--matches``, ``--ramp`` and ``--duration``: given together,
        exit 2.
        """
        import dataclasses  # noqa: PLC0415

        if self.stages is not None:
            given = [
                name
                for name, value in (
                    ("--matches", self.matches),
                    ("--ramp", self.ramp),
                    ("--duration", self.duration),
                )
                if value is not None
            ]
            if given:
                raise LoadError(
                    f"--stages sets the matches over time: drop {', '.join(given)} "
                    "(the stages' targets are the matches, their lengths the duration)",
                    2,
                )
            if self.chaos:
                raise LoadError("--stages and --chaos do not mix: use --matches", 2)
        if (self.shards is not None) != (self.dask is not None):
            raise LoadError("--dask ADDRESS and --shards N go together", 2)
        if self.dask is not None and self.workers > 1:
            raise LoadError("--dask runs its --shards on the cluster's workers: drop --workers", 2)
        if self.subscriber_stages is not None and (
            self.dask or self.shard or self.workers > 1 or self.probe_workers
        ):
            # A probe that joins knows what its own shard had sent, not the others' matches:
            # merged, it would owe what went before it listened.
            raise LoadError("--subscriber-stages runs in one process: drop --workers/--dask", 2)
        if self.subscriber_stages is not None and self.shared_group:
            raise LoadError(
                "--subscriber-stages and --shared-group do not mix: a group is one consumer", 2
            )
        shapeless = (self.speed, self.rate, self.duration, self.stages) == (None,) * 4
        return dataclasses.replace(
            self,
            parsed_stages=_stages(self.stages, "--stages"),
            parsed_subscriber_stages=_stages(self.subscriber_stages, "--subscriber-stages"),
            speed=self.speed or DEFAULT_SPEED,
            duration=DEFAULT_DURATION_S if shapeless else self.duration,
            matches=self.matches if self.matches is not None else 10,
            ramp=self.ramp or 0.0,
        )

    @property
    def total_matches(self) -> int:
        """Matches over all shards: ``--matches``, or the highest target of ``--stages``."""
        if self.parsed_stages is not None:
            return self.parsed_stages.peak
        return self.matches or 0


def _stages(text: str | None, option: str) -> Stages | None:
    try:
        return parse_stages(text, option) if text is not None else None
    except StageError as err:
        raise LoadError(str(err), 2) from None


@dataclass(frozen=True)
class Plan:
    """What the options of a load run mean for this process, checked: its share of the
    matches and probes (a shard's, or all), and the run's LoadOptions and report parameters."""

    topics: Topics
    protocol: str
    chaos: ChaosSpec | None
    shard: tuple[int, int] | None
    tag: str
    templates: list[MatchTemplate]
    options: LoadOptions
    parameters: dict[str, Any]


def _parse_shard(text: str) -> tuple[int, int]:
    i, sep, n = text.partition("/")
    try:
        shard = (int(i), int(n))
    except ValueError:
        shard = (-1, 0)
    if not sep or not 0 <= shard[0] < shard[1]:
        raise LoadError(f"--shard must be i/n with 0 <= i < n, e.g. 0/4, not {quote(text)}", 2)
    return shard


def _share(a: LoadArgs, shard: tuple[int, int] | None) -> tuple[int, int]:
    """The matches and probe subscribers of this process: all, or shard i of n's slice."""
    if a.probe_only and shard is None:
        raise LoadError("--probe-only goes with --shard i/n (--probe-workers sets both)", 2)
    total = a.total_matches
    if shard is None:
        return total, a.subscribers
    i, n = shard
    my_matches = 0 if a.probe_only else len(range(i, total, n))
    if my_matches == 0 and not a.probe_only:
        raise LoadError(
            f"--shard {a.shard}: no match falls to this shard with --matches {total}", 2
        )
    return my_matches, a.subscribers // n + (1 if i < a.subscribers % n else 0)


def plan(
    a: LoadArgs,
    *,
    sources: list[Match],
    topics: Topics,
    speed: float | None,
    chaos: ChaosSpec | None,
    protocol: str,
) -> Plan:
    """Check the options together (a bad one: :class:`LoadError`, exit 2) and work out this
    process's run, given the values the command module read (``speed`` None for max)."""
    if a.shared_group is not None and (
        not a.shared_group or any(c in a.shared_group for c in "/+#")
    ):
        raise LoadError(f"--shared-group {quote(a.shared_group)} must be a name without / + #", 2)
    the_shard = _parse_shard(a.shard) if a.shard else None
    if the_shard is not None and (a.workers > 1 or a.probe_workers or a.dask):
        raise LoadError(
            "--workers/--probe-workers/--dask and --shard do not mix: they run the shards "
            "themselves",
            2,
        )
    run_tag = a.tag or uuid.uuid4().hex[:4]
    my_matches, my_subscribers = _share(a, the_shard)
    shape = LoadShape(
        matches=my_matches,
        speed=speed,
        rate=a.rate,
        ramp_s=a.ramp or 0.0,
        duration_s=a.duration,
        qos=a.qos,
        payload_size=a.payload_size,
        states=a.states,
        tag=run_tag,
        total_matches=a.total_matches,
        stages=a.parsed_stages,
    )
    options = LoadOptions(
        shape=shape,
        topics=topics,
        subscribers=my_subscribers,
        subscriber_stages=a.parsed_subscriber_stages,
        shared_group=a.shared_group,
        publishers=0 if a.probe_only else a.publishers,
        max_inflight=a.max_inflight,
        overrun_ms=a.overrun_ms,
        drain_idle_s=a.drain_idle,
        verify_state=a.verify_state,
        verify_timeout_s=a.verify_timeout,
        expect_consumers=a.expect_consumer,
        shard=the_shard,
        start_at=a.start_at,
        chaos=chaos,
        seed=a.seed,
    )
    return Plan(
        topics=topics,
        protocol=protocol,
        chaos=chaos,
        shard=the_shard,
        tag=run_tag,
        templates=[MatchTemplate.build(m) for m in sources],
        options=options,
        parameters=_parameters(a, my_matches, my_subscribers, sources, topics, run_tag, chaos),
    )


def _parameters(
    a: LoadArgs,
    my_matches: int,
    my_subscribers: int,
    sources: list[Match],
    topics: Topics,
    run_tag: str,
    chaos: ChaosSpec | None,
) -> dict[str, Any]:
    """The report's ``parameters``: what was asked for, the defaults filled in."""
    return {
        "matches": my_matches,
        "total_matches": a.total_matches,
        "sources": [m.match_id for m in sources],
        "feed": str(a.feed),
        "subscribers": my_subscribers,
        "shared_group": a.shared_group,
        "speed": a.speed,
        "rate": a.rate,
        "ramp_s": a.ramp,
        "duration_s": a.duration,
        "stages": a.stages,
        "subscriber_stages": a.subscriber_stages,
        "qos": a.qos,
        "payload_size": a.payload_size,
        "states": a.states,
        "publishers": a.publishers,
        "max_inflight": a.max_inflight,
        "overrun_ms": a.overrun_ms,
        "client": a.client.value,
        "root": topics.root,
        "tag": run_tag,
        "shard": a.shard,
        "start_at": a.start_at,
        "workers": a.workers,
        "dask": a.dask,
        "chaos": str(chaos) if chaos is not None else None,
        "seed": a.seed if chaos is not None else None,
        "argv": redact_argv(sys.argv[1:]),
    }
