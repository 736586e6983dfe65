"""What matchcast starts, it stops and removes: the mosquitto of ``load --spawn-mosquitto`` and
of the test kit, on a normal exit, on SIGINT and SIGTERM; and what an owner killed with SIGKILL
left is cleaned by ``clean_leftovers`` (the test fixtures call it first)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from matchcast.testbroker import Mosquitto, clean_leftovers, mosquitto_binary

pytestmark = pytest.mark.mosquitto


def _owned_by(pid: int) -> list[Path]:
    """The mosquitto folders whose owner is ``pid``."""
    found = []
    for folder in Path(tempfile.gettempdir()).glob("mc-mosq-*"):
        try:
            owner = int((folder / "owner.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if owner == pid:
            found.append(folder)
    return found


def _broker_pid(folder: Path) -> int:
    return int((folder / "owner.pid").read_text().split()[1])


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"  # a zombie is gone


def _until(check: object, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_a_closed_mosquitto_leaves_no_folder_and_no_process() -> None:
    binary = mosquitto_binary()
    assert binary is not None
    with Mosquitto(binary) as broker:
        folder, proc = broker.workdir, broker.proc
        assert folder.exists() and proc is not None
    assert not folder.exists()
    assert proc.poll() is not None


def test_load_spawn_mosquitto_leaves_nothing_after_a_normal_exit() -> None:
    from matchcast.cli.load import _spawned

    with _spawned(True) as url:
        assert url is not None
        folders = _owned_by(os.getpid())
        assert len(folders) == 1
    assert not folders[0].exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_load_spawn_mosquitto_stopped_by_a_signal_leaves_nothing(
    sig: signal.Signals, tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            *("-m", "matchcast", "load", "--spawn-mosquitto", "--no-progress"),
            *("--matches", "2", "--speed", "60", "--report", str(tmp_path / "r.json")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MATCHCAST_BROKER": ""},
    )
    try:
        assert _until(lambda: _owned_by(proc.pid), 30)
        folder = _owned_by(proc.pid)[0]
        broker = _broker_pid(folder)
        time.sleep(1.0)  # into the run
        proc.send_signal(sig)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _until(lambda: not folder.exists() and _gone(broker))


def test_what_a_sigkilled_owner_left_is_cleaned() -> None:
    code = (
        "import sys, time\n"
        "from matchcast.testbroker import Mosquitto, mosquitto_binary\n"
        "b = Mosquitto(mosquitto_binary()).start()\n"
        "print(b.workdir, flush=True)\n"
        "time.sleep(60)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    folder = Path(owner.stdout.readline().strip())
    broker = _broker_pid(folder)
    owner.kill()
    owner.wait()
    owner.stdout.close()
    assert folder.exists() and not _gone(broker)  # what a SIGKILL leaves
    assert folder in clean_leftovers()
    assert not folder.exists()
    assert _until(lambda: _gone(broker))
