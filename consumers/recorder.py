"""The built-in recorder subscriber: writes the stream to a JSON Lines file.

The recording format, one JSON object per line:

- an event, exactly as it was on the wire (the JSON of ``{root}/matches/{id}/events``);
- ``{"snapshot": STATE}``, where STATE is a :class:`~events.MatchState` as on the state topic,
  written when the recorder started from a retained snapshot (it joined mid-match) or the
  runner resynchronised from one, so a recording always says what the score was.

Lines of several matches interleave in arrival order; each match's lines are in seq order.
``matchcast replay RECORDING.jsonl`` publishes a recording again with its original timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import structlog

from consumers._subscriber import Subscriber, on, on_start, on_state, on_stop
from events import Event, MatchState, encode_event, encode_state

__all__ = ["DEFAULT_PATH", "Recorder"]

_log = structlog.get_logger("matchcast.recorder")

DEFAULT_PATH = Path("matchcast-recording.jsonl")


class Recorder(Subscriber):
    """Appends every event (and adopted snapshot) to a JSON Lines file, flushed line by line.

    Args:
        path: the file; created with its parent directories.
        append: add to an existing file instead of starting it afresh.
    """

    def __init__(self, path: Path = DEFAULT_PATH, append: bool = False) -> None:
        super().__init__("recorder")
        self.path = Path(path)
        self.append = append
        self.written = 0
        self._file: BinaryIO | None = None

    @on_start
    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Unbuffered: each line is on disk when its handler returns.
        self._file = self.path.open("ab" if self.append else "wb", buffering=0)
        _log.info("recording.started", path=str(self.path), append=self.append)

    @on()
    def _event(self, event: Event, state: MatchState) -> None:
        self._write(encode_event(event))

    @on_state
    def _snapshot(self, state: MatchState) -> None:
        self._write(b'{"snapshot":' + encode_state(state) + b"}")

    @on_stop
    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            _log.info("recording.finished", path=str(self.path), lines=self.written)

    def _write(self, line: bytes) -> None:
        if self._file is None:
            raise RuntimeError("the recorder is not started (the runner calls its start hook)")
        self._file.write(line + b"\n")
        self.written += 1
