"""What every command does the same way: end in one clear line, run a coroutine, set up logs.

Bad arguments and unreachable brokers end in one clear line on standard error and a non-zero
exit (2 for bad input, 1 for a runtime failure), never a traceback: :func:`fail` says the line
and raises :class:`CommandExit`, which :func:`matchcast.cli.host.main` turns into the exit
code. :func:`run` runs a command's coroutine with Ctrl-C and SIGTERM as a clean cancel and the
known errors as such a line.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import uuid
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NoReturn, TypeVar

import structlog
from rich.console import Console
from rich.markup import escape

from consumers.printable import printable
from events import MESSAGE_LIMIT, BrokerError, MatchcastError, MatchFileError, Topics, clip, quote
from matchcast.cli.host import CommandExit
from matchcast.logs import LogFormat, configure_logging
from matchcast.redact import redact
from matchcast.transport.connection import BrokerURL, Protocol, describe

__all__ = [
    "CommandExit",
    "fail",
    "live_matches",
    "log",
    "reach_broker",
    "replayer_hint",
    "run",
    "run_until_interrupted",
    "say_when_absent",
    "setup_logs",
    "stderr",
]

T = TypeVar("T")

#: Standard error, for the lines a person reads. No emoji codes: user text such as
#: ``sim:abc`` must print as typed, not as ``sim🔤``.
stderr = Console(stderr=True, highlight=False, emoji=False)
#: The CLI's own log lines (warnings about the options given).
log = structlog.get_logger("matchcast.cli")


#: Lines an ``error:`` message shows (a match file's problems are at most MAX_PROBLEMS).
_MAX_LINES = 50


def fail(message: str, code: int = 1) -> NoReturn:
    """Say ``error: message`` on standard error and end the command with ``code``."""
    # Cut first: each line at MESSAGE_LIMIT (the input a message quotes is cut at 200
    # characters where it is quoted; this bounds the rest), so what follows takes no time on
    # a long string. Escaped: messages quote input ("matches[12]", "[/x]") that Rich would
    # read as markup; redacted: no secret in an error message; printable: they quote what a
    # broker sent (a replayer's id or error, a reason), whose terminal controls are shown,
    # never obeyed. Line by line, for a message of several lines (a match file's problems).
    lines = message.split("\n", _MAX_LINES)[:_MAX_LINES]
    shown = "\n".join(printable(redact(clip(line, MESSAGE_LIMIT))) for line in lines)
    stderr.print(f"[bold red]error:[/] {escape(shown)}", markup=True, soft_wrap=True)
    raise CommandExit(code)


def _first_error(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def run(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine; Ctrl-C and SIGTERM cancel it cleanly; known errors become one line."""

    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, task.cancel)
        return await coro_fn()

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        stderr.print("interrupted", markup=False)
        raise CommandExit(130) from None
    except KeyboardInterrupt:  # before the loop's handler was up
        stderr.print("interrupted", markup=False)
        raise CommandExit(130) from None
    except BaseExceptionGroup as group:
        err = _first_error(group)
        if isinstance(err, MatchcastError | OSError):
            fail(str(err), 2 if isinstance(err, MatchFileError) else 1)
        raise
    except MatchFileError as err:
        fail(str(err), 2)
    except (MatchcastError, OSError) as err:
        fail(str(err))


def run_until_interrupted(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T | None:
    """:func:`run` for the commands that Ctrl-C ends (watch, web, broker): exit 0, not 130."""
    try:
        return run(coro_fn)
    except CommandExit as e:
        if e.code != 130:
            raise
        return None


def setup_logs(fmt: str, verbose: int, quiet_default: bool) -> None:
    """``--log-format`` and ``-v``: warnings only by default where ``quiet_default``."""
    if fmt not in ("auto", "console", "json"):
        fail(f"--log-format must be auto, console or json, not {quote(fmt)}", 2)
    levels = ["WARNING" if quiet_default else "INFO", "INFO", "DEBUG"]
    lf: LogFormat = fmt  # type: ignore[assignment]
    configure_logging(lf, levels[min(verbose, 2)])


def _where(url: BrokerURL | Sequence[BrokerURL]) -> str:
    return str(url) if isinstance(url, BrokerURL) else describe(url)


async def reach_broker(url: BrokerURL | Sequence[BrokerURL], protocol: Protocol = "auto") -> None:
    """Connect once and leave, so an unreachable broker ends a command before it prints
    anything (a page's address, a stats line). ``protocol`` as for the command's own
    connection: told 3.1.1, no MQTT 5 CONNECT is tried first (3 s on a 3.1.1-only engine)."""
    from matchcast.transport.mqtt import MqttClient  # noqa: PLC0415

    check_id = f"matchcast-check-{uuid.uuid4().hex[:8]}"
    async with MqttClient(url, client_id=check_id, protocol=protocol):
        pass


async def live_matches(
    url: BrokerURL | Sequence[BrokerURL],
    topics: Topics,
    wait_s: float = 1.0,
    protocol: Protocol = "auto",
) -> list[str]:
    """The ids of the matches with a retained state on the broker (read for ``wait_s``)."""
    from matchcast.transport.mqtt import MqttClient  # noqa: PLC0415

    found: set[str] = set()
    list_id = f"matchcast-list-{uuid.uuid4().hex[:8]}"
    async with MqttClient(url, client_id=list_id, protocol=protocol) as client:
        await client.subscribe(topics.state(), qos=0)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                async for message in client.messages():
                    parsed = topics.parse(message.topic)
                    if parsed is not None and message.payload:
                        found.add(parsed[1])
    return sorted(found)


async def say_when_absent(
    url: BrokerURL | Sequence[BrokerURL],
    topics: Topics,
    match_id: str,
    seen: Callable[[], bool],
    after_s: float,
    protocol: Protocol = "auto",
) -> None:
    """If nothing of ``match_id`` has arrived after ``after_s`` seconds, say on standard error
    which matches the broker has, instead of waiting in silence. A hint, best effort: a broker
    that will not list them (it refuses the subscription, or drops the connection) costs the
    list, logged as ``match_list.unavailable``, never the command (it ended ``watch --match``
    with exit 1 on a node that refused the subscription, though the watch itself had moved to
    another node)."""
    await asyncio.sleep(after_s)
    if seen():
        return
    try:
        others = await live_matches(url, topics, protocol=protocol)
    except BrokerError as err:
        log.warning("match_list.unavailable", match_id=match_id, reason=err.reason)
        stderr.print(
            f"waiting for match {match_id}: nothing of it on {_where(url)} under "
            f"{topics.root}/ yet (the matches there could not be listed: {err.reason}).",
            markup=False,
            soft_wrap=True,
        )
        return
    listed = ", ".join(others[:10]) + (f" and {len(others) - 10} more" if len(others) > 10 else "")
    near = [m for m in others if match_id in m or m in match_id]
    stderr.print(
        f"waiting for match {match_id}: nothing of it on {_where(url)} under {topics.root}/ yet. "
        + (f"Matches there: {listed}." if others else "No match there yet.")
        + (f" Did you mean --match {near[0]}?" if near else ""),
        markup=False,
        soft_wrap=True,
    )


def replayer_hint(
    url: BrokerURL | Sequence[BrokerURL], topics: Topics
) -> Callable[[str, bool], None]:
    """For ``Runner(on_replayer=...)``: a line on standard error when a ``--replayer``'s status
    has not arrived (``replayer.not_found``), and another when it arrives after all."""

    def say(replayer_id: str, found: bool) -> None:
        if found:
            line = f"replayer {replayer_id} is there now: its status arrived"
        else:
            line = (
                f"waiting for replayer {replayer_id}: no status of it on {_where(url)} under "
                f"{topics.root}/ yet; still waiting (it may start later). "
                "`matchcast control status` (same --broker and --root) lists the replayers online."
            )
        stderr.print(line, markup=False, soft_wrap=True)

    return say
