"""docs/verify.md's example consumers, in Python, JavaScript (mqtt.js) and shell (mosquitto_sub
and jq), each run as its own process and graded by the whole battery: every scenario passes.

Each needs its tools (node and ``npm ci --prefix examples/verify/js``; jq, mosquitto_sub and
mosquitto_pub): a test without them skips, unless MATCHCAST_REQUIRE_VERIFY_EXAMPLES=1 (as
``.ci/run`` sets) makes it fail."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from events import Topics
from matchcast.transport.connection import BrokerURL
from matchcast.transport.fastmqtt import FastClient
from matchcast.verify import VerifyOptions, run_verify

pytestmark = pytest.mark.mosquitto

REQUIRE_ENV = "MATCHCAST_REQUIRE_VERIFY_EXAMPLES"
EXAMPLES = Path(__file__).parents[2] / "examples" / "verify"


def _command(language: str) -> list[str]:
    """The example's command line, or a skip (a failure under REQUIRE_ENV) naming what is
    missing."""
    match language:
        case "python":
            return [sys.executable, str(EXAMPLES / "consumer.py")]
        case "js":
            node = shutil.which("node")
            missing = [] if node else ["node"]
            if not (EXAMPLES / "js" / "node_modules" / "mqtt").is_dir():
                missing.append("npm ci --prefix examples/verify/js")
            if not missing and node:
                return [node, str(EXAMPLES / "js" / "consumer.mjs")]
        case _:
            missing = [t for t in ("jq", "mosquitto_sub", "mosquitto_pub") if not shutil.which(t)]
            if not missing:
                return ["sh", str(EXAMPLES / "consumer.sh")]
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"the {language} example needs {', '.join(missing)} ({REQUIRE_ENV}=1)")
    pytest.skip(f"the {language} example needs {', '.join(missing)}")


async def _ready(conn: FastClient, topics: Topics, consumer_id: str) -> None:
    """Until the consumer answers a snapshot of a match of its own: it is subscribed."""
    probe = "probe"
    report = topics.consumer_state(consumer_id, probe)
    await conn.subscribe(report, qos=1)
    state = {"match_id": probe, "run": 1, "last_seq": 1, "score": {"AAA": 1}, "status": "live"}
    await conn.publish(topics.state(probe), json.dumps(state).encode(), qos=1, retain=True)
    async with asyncio.timeout(30):
        async for message in conn.messages():
            if message.topic == report and message.payload:
                break
    for topic in (topics.state(probe), report):
        await conn.publish(topic, b"", qos=1, retain=True)


@pytest.mark.parametrize("language", ["python", "js", "shell"])
async def test_the_example_consumer_passes_every_scenario(
    language: str, mosquitto_url: BrokerURL, topics: Topics, tmp_path: Path
) -> None:
    command = _command(language)
    consumer_id = f"{language}-example"
    args = ["--host", mosquitto_url.host, "--port", str(mosquitto_url.port)]
    args += ["--root", topics.root, "--id", consumer_id]
    log = tmp_path / "consumer.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *command, *args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        async with FastClient(mosquitto_url) as conn:
            await _ready(conn, topics, consumer_id)
            verdict = await run_verify(conn, VerifyOptions(consumer_id, topics, speed=None))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the shell example is a pipeline: all of it
        async with asyncio.timeout(10):
            await proc.wait()
    failed = {r.scenario.name: r.reason for r in verdict.results if not r.passed}
    assert failed == {}, log.read_text(errors="replace")[-2000:]
    assert all(r.reports for r in verdict.results)
