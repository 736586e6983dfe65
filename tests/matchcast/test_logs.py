"""``--log-format json``: every line on the stream is JSON, the libraries' lines too."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from matchcast import redact
from matchcast.logs import configure_logging


@pytest.fixture
def out() -> Iterator[io.StringIO]:
    """A stream the logging is configured onto for one test, then put back."""
    config, root = structlog.get_config(), logging.getLogger()
    handlers, level = root.handlers[:], root.level
    stream = io.StringIO()
    try:
        yield stream
    finally:
        structlog.configure(**config)
        root.handlers[:] = handlers
        root.setLevel(level)
        redact.forget_all()


def _boom() -> None:
    raise RuntimeError("boom")


def test_library_lines_are_json_objects_like_ours(out: io.StringIO) -> None:
    configure_logging("json", "INFO", stream=out)
    structlog.get_logger().warning("replay.started", match_id="m1")
    logging.getLogger("aiohttp.server").warning("Error handling request from %s", "10.0.0.1")
    try:
        _boom()
    except RuntimeError:
        logging.getLogger("aiomqtt").exception("Task exception was never retrieved")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == [
        "replay.started",
        "Error handling request from 10.0.0.1",
        "Task exception was never retrieved",
    ]
    library = lines[1]
    assert (library["logger"], library["level"]) == ("aiohttp.server", "warning")
    assert "timestamp" in library
    assert lines[2]["exception"][0]["exc_type"] == "RuntimeError"


def test_library_lines_are_redacted_and_printable(out: io.StringIO) -> None:
    redact.remember("lib-Secret-99")
    configure_logging("json", "INFO", stream=out)
    logging.getLogger("paho").warning("login %s refused on \x1b[2J", "lib-Secret-99")
    (line,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert "lib-Secret-99" not in line["event"] and "\x1b" not in line["event"]


def test_a_second_configuration_replaces_the_first(out: io.StringIO) -> None:
    """Called again (tests, a command after the import-time default), the last stream and
    format hold, and a library line is written once."""
    configure_logging("console", "INFO", stream=io.StringIO())
    configure_logging("json", "INFO", stream=out)
    logging.getLogger("aiohttp.access").warning("refused")
    assert [json.loads(x)["event"] for x in out.getvalue().splitlines()] == ["refused"]


def test_library_info_stays_quiet_unless_debugging(out: io.StringIO) -> None:
    configure_logging("json", "INFO", stream=out)
    logging.getLogger("aiohttp.access").info("GET / 200")
    assert out.getvalue() == ""


def test_pahos_lost_socket_line_is_debug_not_an_error(out: io.StringIO) -> None:
    """A newcomer's failover run: paho's ``failed to receive on socket`` at error level, beside
    matchcast's own warning for the same loss, read as a failure. It is debug now; aiomqtt's
    line per message dropped from a full queue is counted and said as one of matchcast's,
    at most once a second; paho's other lines are kept as they were."""
    from matchcast.transport import mqtt

    paho = logging.getLogger("mqtt")
    configure_logging("json", "INFO", stream=out)
    paho.error("failed to receive on socket: %s", "[Errno 104] Connection reset by peer")
    mqtt._DROPPED._said_at = 0.0  # a test before may have said it within the second
    for _ in range(3):
        paho.warning("Message queue is full. Discarding message.")
    paho.warning("Something else")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["event"], line["level"]) for line in lines] == [
        ("broker.messages_dropped", "warning"),
        ("Something else", "warning"),
    ]
    configure_logging("json", "DEBUG", stream=out)
    paho.error("failed to receive on socket: %s", "[Errno 104] Connection reset by peer")
    last = json.loads(out.getvalue().splitlines()[-1])
    assert (last["level"], last["logger"]) == ("debug", "mqtt")
    assert last["event"].startswith("failed to receive on socket")
    assert len([f for f in paho.filters if type(f).__name__ == "_SocketErrorsAsDebug"]) == 1


async def test_a_log_line_while_the_live_view_draws_is_a_line_of_its_own() -> None:
    """Logging to standard error goes to whatever it is at each line: while the live view
    draws, rich's proxy, which prints the line above the view, never glued to its border."""
    import structlog
    from rich.console import Console

    from consumers.terminal import TerminalView
    from matchcast.testing import Harness

    screen = io.StringIO()
    configure_logging("console", "INFO")  # standard error, as the commands set it up
    view = TerminalView(Console(file=screen, force_terminal=True, width=80))
    with view:
        async with Harness(view.subscriber) as h:
            await h.play()
        structlog.get_logger("t").warning("replay.interrupted", last_seq=5)
    lines = screen.getvalue().splitlines()
    logged = [line for line in lines if "replay.interrupted" in line]
    assert logged, "the line went around the view"
    assert not any("╯" in line or "│" in line for line in logged), logged
