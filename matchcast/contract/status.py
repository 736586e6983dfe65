"""The retained status message of a replayer, as a model.

:func:`matchcast.app.status_payload` writes it from this model, which also gives the AsyncAPI
document and docs/wire-format.md its schema. It is not part of the versioned event schema: it
carries no ``schema_version``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from events import MatchPlayback, PlaybackState, Speed

__all__ = ["ReplayerStatus"]


class ReplayerStatus(BaseModel):
    """Whether a replayer is running, retained on its status topic.

    ``online`` when it connects; ``offline`` when it stops, or from its last will when the
    connection dies without a goodbye. While online it is published again on every change of
    playback (pause, seek, speed, ...; see docs/control.md), with ``state``, ``speed``,
    ``since`` and each match's ``playback``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["online", "offline"]
    replayer_id: str = Field(min_length=1, description="Names the status topic")
    matches: list[str] = Field(description="Match ids the replayer is replaying")
    at: AwareDatetime = Field(
        description="When the replayer wrote the message (UTC); for a last will, when it "
        "connected, since the broker publishes the will unchanged"
    )
    state: PlaybackState | None = Field(
        default=None, description="Playback of the replayer as a whole; absent before control"
    )
    speed: Speed | None = Field(default=None, description="Speed of the replayer as a whole")
    since: AwareDatetime | None = Field(default=None, description="When it entered its state")
    playback: list[MatchPlayback] = Field(
        default_factory=list, description="Where each match started is"
    )
