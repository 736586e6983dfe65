"""A test kit for broker-side tests: a mosquitto process of your own, and a fault proxy.

A mosquitto process runs on a free port with a temp config.

matchcast's test suite and benchmarks use it so they never depend on a broker they did not
start; your own tests can too::

    broker = Mosquitto(mosquitto_binary()).start()
    try:
        ...  # connect to broker.url
    finally:
        broker.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matchcast.transport.broker import free_port

__all__ = [
    "REQUIRE_ENV",
    "FaultProxy",
    "Mosquitto",
    "clean_leftovers",
    "mosquitto_binary",
    "wait_port",
]

#: Set to 1 (as CI does) to make tests that need mosquitto fail, not skip, where it is missing.
REQUIRE_ENV = "MATCHCAST_REQUIRE_MOSQUITTO"


def mosquitto_binary() -> str | None:
    """Path of mosquitto, looking in sbin too (Debian installs it there)."""
    return shutil.which("mosquitto") or next(
        (p for p in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto") if os.path.exists(p)), None
    )


def wait_port(
    host: str, port: int, timeout: float = 10.0, *, alive: Callable[[], bool] | None = None
) -> None:
    """Return once ``host:port`` accepts TCP connections.

    Raises:
        TimeoutError: nothing listens there after ``timeout`` seconds, or, sooner, ``alive()``
            says the process that was to listen there has ended.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if alive is not None and not alive():
                raise TimeoutError(
                    f"nothing listens on {host}:{port}: the process that was to has ended"
                ) from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s") from None
            time.sleep(0.02)


@dataclass
class Mosquitto:
    """A mosquitto process of our own. ``extra`` lines go into its config file."""

    binary: str
    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    extra: list[str] = field(default_factory=list)
    persistence: bool = False
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mc-mosq-")))
    proc: subprocess.Popen[bytes] | None = None
    _finalizer: weakref.finalize[Any, Any] | None = field(default=None, repr=False)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    @property
    def url(self) -> str:
        """``mqtt://host:port`` of this broker."""
        return f"mqtt://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """Where mosquitto writes its log."""
        return self.workdir / "mosquitto.log"

    def config(self) -> str:
        """The config file's text."""
        lines = [
            f"listener {self.port} {self.host}",
            "allow_anonymous true",
            *(
                [
                    "persistence true",
                    f"persistence_location {self.workdir}/",
                    "autosave_interval 1",  # a SIGKILL loses at most a second of state
                ]
                if self.persistence
                else ["persistence false"]
            ),
            # Without it pipelined QoS 1 crawls (Nagle plus delayed ACK).
            "set_tcp_nodelay true",
            # The default of 1000 silently drops for a subscriber that falls behind.
            "max_queued_messages 100000",
            f"log_dest file {self.log_path}",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            *self.extra,
        ]
        return "\n".join(lines) + "\n"

    def start(self) -> Mosquitto:
        """Start it (again, after :meth:`kill`, on the same port) and wait until it listens.

        Raises:
            RuntimeError: it did not start; the message has mosquitto's own words.
        """
        # Started as root, mosquitto drops to the `mosquitto` user: let it write its log and
        # persistence file here.
        self.workdir.chmod(0o777)
        conf = self.workdir / "mosquitto.conf"
        conf.write_text(self.config())
        # A session of its own: a Ctrl-C at the terminal reaches the owner, whose stop() ends
        # the broker (and removes its folder), not the broker behind the owner's back.
        self.proc = subprocess.Popen(  # noqa: S603
            [self.binary, "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        # Who owns it, for clean_leftovers() after an owner that was SIGKILLed.
        (self.workdir / _OWNER).write_text(f"{os.getpid()} {self.proc.pid}\n")
        self._procs.append(self.proc)
        if self._finalizer is None:
            self._finalizer = weakref.finalize(self, _stop_and_remove, self._procs, self.workdir)
        proc = self.proc
        try:
            wait_port(self.host, self.port, alive=lambda: proc.poll() is None)
        except TimeoutError as timeout:
            self._end()  # its stderr still open: its words are read here
            err = proc.stderr.read().decode().strip() if proc.stderr else ""
            self.stop()
            raise RuntimeError(
                f"mosquitto did not start on {self.port}: {err or timeout}"
            ) from None
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        if self.proc and self.proc.stderr:
            self.proc.stderr.close()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers."""
        self._end()
        if self.proc and self.proc.stderr:
            self.proc.stderr.close()

    def _end(self) -> None:
        """SIGTERM, then SIGKILL if it lingers; its stderr is left open."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def close(self) -> None:
        """Stop it and remove its folder (config, log, persistence): nothing left behind. Also
        done at the interpreter's exit for a broker never closed."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self._finalizer is not None:
            self._finalizer.detach()

    def __enter__(self) -> Mosquitto:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def log(self) -> str:
        """What mosquitto logged so far."""
        return self.log_path.read_text() if self.log_path.exists() else ""


_OWNER = "owner.pid"


def _stop_and_remove(procs: list[subprocess.Popen[bytes]], workdir: Path) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
    shutil.rmtree(workdir, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_leftovers(prefixes: tuple[str, ...] = ("mc-mosq-", "mc-cluster-")) -> list[Path]:
    """Remove what an owner killed with SIGKILL left: each temp folder of these prefixes whose
    owner (its ``owner.pid``) is gone, after killing the broker it names if that still runs
    with this folder's config. Folders of a live owner, or with no owner file, are left alone.
    Returns the folders removed."""
    removed: list[Path] = []
    for folder in Path(tempfile.gettempdir()).iterdir():
        if not folder.name.startswith(prefixes) or not folder.is_dir():
            continue
        try:
            owner, _, broker = (folder / _OWNER).read_text().partition(" ")
            owner_pid, broker_pid = int(owner), int(broker)
        except (OSError, ValueError):
            continue
        if _alive(owner_pid):
            continue
        try:
            cmdline = Path(f"/proc/{broker_pid}/cmdline").read_bytes()
        except OSError:
            cmdline = b""
        if str(folder).encode() in cmdline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(broker_pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


class FaultProxy:
    """A TCP proxy between clients and a broker that can misbehave on demand.

    Point clients at ``proxy.port``; it forwards to ``upstream``. Faults:

    - ``latency`` seconds added to every chunk in both directions;
    - :meth:`drop` closes every connection at once (a broker or network crash);
    - :meth:`stall` keeps connections open but forwards nothing (a half-open link) until
      :meth:`resume`;
    - ``blackhole = True`` accepts new connections and forwards nothing on them;
    - ``refuse = True`` closes each new connection at once (a broker that is down).

    Runs in the caller's event loop::

        async with FaultProxy("127.0.0.1", broker_port) as proxy:
            ...  # connect to 127.0.0.1:proxy.port
    """

    def __init__(self, upstream_host: str, upstream_port: int, *, host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = host
        self.port = 0
        self.latency = 0.0
        self.blackhole = False
        self.refuse = False
        self.connections = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.drop()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def drop(self) -> None:
        """Close every open connection, both sides, without a goodbye."""
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def stall(self) -> None:
        """Stop forwarding in both directions; sockets stay open (half-open link)."""
        self._flowing.clear()

    def resume(self) -> None:
        """Forward again after :meth:`stall`."""
        self._flowing.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self.refuse:
            writer.transport.abort()
            return
        self._writers.add(writer)
        if self.blackhole:
            return  # keep it open, never answer
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers.add(up_writer)
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(src, dst))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while chunk := await src.read(65536):
                await self._flowing.wait()
                if self.latency:
                    await asyncio.sleep(self.latency)
                dst.write(chunk)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            dst.transport.abort()
            self._writers.discard(dst)
