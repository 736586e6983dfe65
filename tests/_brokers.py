"""Broker processes for the test suite: mosquitto on a free port with a temp config.

The suite never uses a broker it did not start, so it passes where nothing runs and is
isolated where something does.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from matchcast.broker import free_port

REQUIRE_ENV = "MATCHCAST_REQUIRE_MOSQUITTO"


def mosquitto_binary() -> str | None:
    """Path of mosquitto, looking in sbin too (Debian installs it there)."""
    return shutil.which("mosquitto") or next(
        (p for p in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto") if os.path.exists(p)), None
    )


def wait_port(host: str, port: int, timeout: float = 10.0) -> None:
    """Return once ``host:port`` accepts TCP connections."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
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
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mc-mosq-")))
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "mosquitto.log"

    def config(self) -> str:
        lines = [
            f"listener {self.port} {self.host}",
            "allow_anonymous true",
            "persistence false",
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
        conf = self.workdir / "mosquitto.conf"
        conf.write_text(self.config())
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            wait_port(self.host, self.port)
        except TimeoutError:
            self.stop()
            err = self.proc.stderr.read().decode() if self.proc and self.proc.stderr else ""
            raise RuntimeError(f"mosquitto did not start on {self.port}: {err}") from None
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc and self.proc.stderr:
            self.proc.stderr.close()

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""
