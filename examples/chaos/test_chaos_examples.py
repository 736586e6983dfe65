"""docs/chaos.md's example: the naive score keeper goes wrong under chaos, the fixed one not."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixed import FixedScore
from naive import NaiveScore

from events import encode_event, encode_state
from matchcast.testbroker import REQUIRE_ENV, Mosquitto, mosquitto_binary
from simulator import ChaosSpec, apply_chaos, expand, resolve_matches, state_before
from tests._require import require

HERE = Path(__file__).parent
SEMI = resolve_matches("semifinal")[0]
TRUE_SCORE = {"ARG": 2, "ENG": 1}


def feed(keeper: NaiveScore | FixedScore, spec: str, seed: int = 1) -> dict[str, int]:
    """Feed ``keeper`` the semi-final's events as chaos ``spec`` sends them."""
    stream = expand(SEMI)
    out = apply_chaos(
        [s.event for s in stream],
        [0.0] * len(stream),
        state_before(SEMI, stream, 0),
        ChaosSpec.parse(spec),
        seed=seed,
        key=SEMI.match_id,
        run=1_000,
    )
    assert out.truth.score == TRUE_SCORE
    topic = f"matchcast/matches/{SEMI.match_id}/"
    for emission in out.emissions:
        if emission.event is not None:
            keeper.feed(topic + "events", encode_event(emission.event))
        elif emission.state is not None:
            keeper.feed(topic + "state", encode_state(emission.state))
    return keeper.scores()[SEMI.match_id]


def test_both_are_right_on_a_clean_stream() -> None:
    assert feed(NaiveScore(), "drop=0") == feed(FixedScore(), "drop=0") == TRUE_SCORE


@pytest.mark.parametrize("spec", ["duplicate=0.5", "correction=1"])
def test_the_naive_one_goes_wrong_under_duplicates_and_corrections(spec: str) -> None:
    assert feed(NaiveScore(), spec) != TRUE_SCORE


@pytest.mark.parametrize(
    "spec",
    [
        "duplicate=0.5",
        "correction=1",
        "reorder=0.3:5",
        "drop=0.2",
        "delay=0.2:100",
        "restart=60",
        "stale-state=0.3",
        "duplicate=0.2,reorder=0.2,drop=0.1,delay=0.1:50,restart=70,correction=1",
    ],
)
@pytest.mark.parametrize("seed", range(5))
def test_the_fixed_one_ends_at_the_truth(spec: str, seed: int) -> None:
    assert feed(FixedScore(), spec, seed) == TRUE_SCORE


def test_checking_a_separate_consumer_against_truth_json(tmp_path: Path) -> None:
    """As docs/chaos.md does it: replay with --truth, run the consumer, compare the files."""
    require(mosquitto_binary(), "mosquitto", REQUIRE_ENV, "apt-get install mosquitto")
    broker = Mosquitto(mosquitto_binary()).start()  # type: ignore[arg-type]
    try:
        results = {}
        for name in ("naive", "fixed"):
            root = f"chaos-example-{name}"
            consumer = subprocess.Popen(
                [
                    sys.executable,
                    str(HERE / f"{name}.py"),
                    "--port",
                    str(broker.port),
                    "--root",
                    root,
                    "--idle",
                    "1",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            truth = tmp_path / f"{name}-truth.json"
            matchcast = shutil.which("matchcast") or str(Path(sys.executable).parent / "matchcast")
            assert consumer.stderr is not None
            assert consumer.stderr.readline().strip() == "subscribed"  # then replay
            subprocess.run(
                [
                    matchcast,
                    "replay",
                    "--broker",
                    broker.url,
                    "--root",
                    root,
                    "--speed",
                    "max",
                    "--chaos",
                    "duplicate=0.3,correction=1",
                    "--seed",
                    "4",
                    "--truth",
                    str(truth),
                    "--chaos-log",
                    str(tmp_path / f"{name}.jsonl"),
                    "--log-format",
                    "json",
                ],
                check=True,
                capture_output=True,
                timeout=60,
            )
            out, _ = consumer.communicate(timeout=30)
            expected = {m: s["score"] for m, s in json.loads(truth.read_text())["matches"].items()}
            results[name] = json.loads(out) == expected
            log = (tmp_path / f"{name}.jsonl").read_text().splitlines()
            faults = [json.loads(line) for line in log]
            assert {f["fault"] for f in faults} == {"duplicate", "correction"}
    finally:
        broker.stop()
    assert results == {"naive": False, "fixed": True}
