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


def _signal_its_broker_owner(
    proc: subprocess.Popen[bytes], sig: signal.Signals, settle: float = 0.0
) -> None:
    """Once ``proc`` runs a mosquitto of its own, signal it; 10 s later the broker and its
    folder must be gone."""
    try:
        assert _until(lambda: _owned_by(proc.pid), 30)
        folder = _owned_by(proc.pid)[0]
        broker = _broker_pid(folder)
        time.sleep(settle)
        proc.send_signal(sig)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _until(lambda: not folder.exists() and _gone(broker))


def test_a_closed_mosquitto_leaves_no_folder_and_no_process() -> None:
    binary = mosquitto_binary()
    assert binary is not None
    with Mosquitto(binary) as broker:
        folder, proc = broker.workdir, broker.proc
        assert folder.exists() and proc is not None
    assert not folder.exists()
    assert proc.poll() is not None


def test_load_spawn_mosquitto_leaves_nothing_after_a_normal_exit() -> None:
    from matchcast.load._command import _spawned

    before = set(_owned_by(os.getpid()))  # this worker's others (the session's mosquitto)
    with _spawned(True) as url:
        assert url is not None
        folders = [f for f in _owned_by(os.getpid()) if f not in before]
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
    _signal_its_broker_owner(proc, sig, settle=1.0)  # into the run


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


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize(
    "args",
    [
        ("demo", "--speed", "60"),
        ("web", "--demo", "--speed", "60", "--port", "0"),
        ("replay", "semifinal", "--speed", "60"),
    ],
    ids=["demo", "web-demo", "replay"],
)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_command_stopped_by_a_signal_at_a_random_moment_leaves_no_process(
    args: tuple[str, ...], sig: signal.Signals
) -> None:
    """Each in a process group of its own: 10 s after the signal, nothing of the group runs
    (the embedded broker is in the process; nothing is written to disk)."""
    import random

    moment = random.uniform(0.2, 3.0)
    proc = subprocess.Popen(
        [sys.executable, "-m", "matchcast", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MATCHCAST_BROKER": ""},
        start_new_session=True,
    )
    try:
        time.sleep(moment)
        proc.send_signal(sig)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"{args[0]} still ran 10 s after {sig.name} at {moment:.2f} s")
    assert _until(lambda: _group_gone(proc.pid)), f"{sig.name} at {moment:.2f} s"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_pytest_run_stopped_by_a_signal_leaves_no_broker(sig: signal.Signals) -> None:
    """A test run's session mosquitto: stopped and its folder removed when the run is ended
    by SIGINT or SIGTERM (the fixtures' teardown runs)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            *("-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"),
            f"{Path(__file__).parent / '_held_run.py'}::test_holds_the_session_mosquitto",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _signal_its_broker_owner(proc, sig)
