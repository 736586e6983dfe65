"""The AsyncAPI document: valid per the AsyncAPI parser, and true to what goes on the wire."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import matchcast.app.replay
from consumers import DeadLetter
from events import (
    CONTENT_TYPE,
    TOPIC_TREE,
    Message,
    MessageProps,
    Topics,
    decode_command,
    decode_event,
    decode_reply,
    decode_state,
)
from matchcast.cli import app
from matchcast.contract.asyncapi import MQTT_BINDING_VERSION, asyncapi_document, dump
from matchcast.contract.channels import CHANNELS, ChannelSpec
from matchcast.contract.status import ReplayerStatus
from matchcast.contract.wire_docs import ASYNCAPI_PATH, REGENERATE
from matchcast.contract.wire_examples import EVENT_TYPES
from matchcast.transport.connection import BrokerURL, WillSpec
from simulator import ReplayOptions, resolve_matches

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / "tools" / "asyncapi"
REQUIRE_ENV = "MATCHCAST_REQUIRE_ASYNCAPI"
INSTALL = "npm ci --prefix tools/asyncapi"

Validate = Callable[[Path], subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return asyncapi_document()


@pytest.fixture(scope="module")
def validate() -> Validate:
    """Runs tools/asyncapi/validate.mjs; skips where it cannot run, unless CI requires it."""
    node = shutil.which("node")
    if node is None:
        missing = "node is not installed"
    elif not (TOOLS / "node_modules" / "@asyncapi" / "parser").is_dir():
        missing = f"tools/asyncapi/node_modules is missing (run `{INSTALL}`)"
    else:
        missing = ""
    if missing:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"the AsyncAPI parser is required ({REQUIRE_ENV}=1) but {missing}")
        pytest.skip(f"AsyncAPI parser unavailable: {missing}")
    assert node is not None

    def run(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [node, str(TOOLS / "validate.mjs"), str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    return run


def _send_operation(doc: dict[str, Any], spec: ChannelSpec) -> dict[str, Any]:
    ref = f"#/channels/{spec.channel_id}"
    ops: list[dict[str, Any]] = [
        o
        for o in doc["operations"].values()
        if o["action"] == "send" and o["channel"]["$ref"] == ref
    ]
    assert len(ops) == 1, ops
    return ops[0]


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


# ---------------------------------------------------------------- the official parser


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_document_is_valid_per_the_asyncapi_parser(
    validate: Validate, doc: dict[str, Any], tmp_path: Path, fmt: str
) -> None:
    """@asyncapi/parser finds no error or warning, and every example matches its schema."""
    path = tmp_path / f"asyncapi.{fmt}"
    path.write_text(dump(doc, "json" if fmt == "json" else "yaml"))
    result = validate(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid AsyncAPI 3.0.0" in result.stdout


def _break_qos(d: dict[str, Any]) -> None:
    d["operations"]["sendMatchEvents"]["bindings"]["mqtt"]["qos"] = 3


def _break_ref(d: dict[str, Any]) -> None:
    d["components"]["schemas"]["goal"]["properties"]["clock"]["$ref"] = "#/components/schemas/X"


def _break_example(d: dict[str, Any]) -> None:
    d["components"]["messages"]["goal"]["examples"][0]["payload"]["seq"] = 0


def _break_parameter(d: dict[str, Any]) -> None:
    d["channels"]["matchEvents"]["address"] = "{root}/matches/{matchid}/events"


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        pytest.param(_break_qos, "qos", id="qos-out-of-range"),
        pytest.param(_break_ref, "does not exist", id="dangling-ref"),
        pytest.param(_break_example, "example-mismatch", id="example-off-schema"),
        pytest.param(_break_parameter, "matchid", id="undeclared-parameter"),
    ],
)
def test_broken_document_is_reported_invalid(
    validate: Validate,
    doc: dict[str, Any],
    tmp_path: Path,
    breakage: Callable[[dict[str, Any]], None],
    expected: str,
) -> None:
    """The validator is not a rubber stamp: a deliberately broken document fails."""
    broken = copy.deepcopy(doc)
    breakage(broken)
    path = tmp_path / "broken.yaml"
    path.write_text(dump(broken))
    result = validate(path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "INVALID" in result.stdout
    assert expected in result.stdout


# ---------------------------------------------------------------- structure


def test_committed_document_is_current(doc: dict[str, Any]) -> None:
    """docs/asyncapi.yaml is what the code generates now."""
    committed = (REPO / ASYNCAPI_PATH).read_text()
    assert committed == dump(doc), f"{ASYNCAPI_PATH} is stale: run `{REGENERATE}`"


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_cli_prints_the_document(doc: dict[str, Any], fmt: str) -> None:
    """`matchcast asyncapi --format FMT` prints the generated document."""
    result = CliRunner().invoke(app, ["asyncapi", "--format", fmt])
    assert result.exit_code == 0, result.output
    loaded = json.loads(result.stdout) if fmt == "json" else yaml.safe_load(result.stdout)
    assert loaded == doc


def test_cli_refuses_an_unknown_format() -> None:
    result = CliRunner().invoke(app, ["asyncapi", "--format", "xml"])
    assert result.exit_code == 2


def test_every_ref_resolves_inside_the_document(doc: dict[str, Any]) -> None:
    """No ``#/$defs/...`` left over from pydantic: every reference points into the document."""
    refs = set(_refs(doc))
    assert refs
    for ref in refs:
        assert ref.startswith("#/"), ref
        node: Any = doc
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]


def test_addresses_come_from_the_topic_tree(doc: dict[str, Any]) -> None:
    """Each channel address, filled in, is the topic `Topics` builds."""
    topics = Topics("some/root")
    built = {
        "events": topics.events("m1"),
        "state": topics.state("m1"),
        "status": topics.status("m1"),
    }
    for spec in CHANNELS:
        address = doc["channels"][spec.channel_id]["address"]
        assert address.format(root="some/root", match_id="m1", replayer_id="m1") == built[spec.kind]
        params = set(doc["channels"][spec.channel_id]["parameters"])
        assert params == {"root", "match_id" if spec.kind != "status" else "replayer_id"}
    assert doc["components"]["parameters"]["root"]["default"] == Topics().root


def test_servers_cover_both_protocol_versions(doc: dict[str, Any]) -> None:
    """MQTT 5, and 3.1.1 for the fallback, with MQTT bindings of the supported version."""
    servers = doc["servers"].values()
    assert {s["protocolVersion"] for s in servers} == {"5", "3.1.1"}
    assert all(s["protocol"] == "mqtt" for s in servers)
    assert all(s["bindings"]["mqtt"]["bindingVersion"] == MQTT_BINDING_VERSION for s in servers)


def test_every_event_type_is_a_message_and_a_union_member(doc: dict[str, Any]) -> None:
    """One message and one schema per `type`, named by it; the union is a oneOf on `type`."""
    schemas = doc["components"]["schemas"]
    assert list(doc["channels"]["matchEvents"]["messages"]) == list(EVENT_TYPES)
    assert schemas["Event"]["discriminator"] == "type"
    assert schemas["Event"]["oneOf"] == [{"$ref": f"#/components/schemas/{t}"} for t in EVENT_TYPES]
    for t in EVENT_TYPES:
        message = doc["components"]["messages"][t]
        assert message["name"] == t
        assert message["payload"] == {"$ref": f"#/components/schemas/{t}"}
        assert schemas[t]["properties"]["type"]["const"] == t
        assert "type" in schemas[t]["required"]
    assert doc["components"]["messages"]["event"]["payload"] == {
        "$ref": "#/components/schemas/Event"
    }


def test_examples_decode_with_the_codec(doc: dict[str, Any]) -> None:
    """Every message example is a payload matchcast's own decoder accepts."""
    for name, message in doc["components"]["messages"].items():
        for example in message.get("examples", []):
            payload = json.dumps(example["payload"]).encode()
            if name == "state":
                assert decode_state(payload).last_seq == int(example["headers"]["seq"])
            elif name == "status":
                ReplayerStatus.model_validate_json(payload)
            elif name == "control":
                assert decode_command(payload).command == "seek"
            elif name == "controlReply":
                assert decode_reply(payload).ok
            elif name == "deadletter":
                letter = DeadLetter.model_validate_json(payload)
                assert base64.b64decode(letter.payload_base64) == b"{not json"
            else:
                event = decode_event(payload)
                assert event.type == name == example["headers"]["type"]
                assert example["headers"]["seq"] == str(event.seq)


# ---------------------------------------------------------------- true to the replayer


class _FakeClient:
    """Stands in for MqttClient in run_replay: records the will and every publish."""

    made: list[_FakeClient]

    def __init__(self, url: BrokerURL, *, will: WillSpec | None = None, **_: Any) -> None:
        self.url = url
        self.will = will
        self.protocol_version = "5"
        self.reconnects = 0
        self.sent: list[tuple[str, bytes, int, bool, MessageProps | None]] = []
        self.made.append(self)

    async def __aenter__(self) -> _FakeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        self.sent.append((topic, payload, qos, retain, props))

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        self.subscribed = (topic_filter, qos)

    async def messages(self) -> AsyncIterator[Message]:
        """No command ever comes: wait until the replay ends and cancels the reader."""
        await asyncio.Event().wait()
        yield Message("", b"")  # pragma: no cover - never reached


async def test_bindings_are_what_the_replayer_does(
    doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """QoS, retain, expiry, user properties and the last will match a real replay's publishes."""
    _FakeClient.made = []
    monkeypatch.setattr(matchcast.app.replay, "MqttClient", _FakeClient)
    topics = Topics("mc-asyncapi")
    match = resolve_matches(None)[0]
    await matchcast.app.run_replay(
        [match],
        BrokerURL("127.0.0.1", 1883),
        ReplayOptions(speed=None, topics=topics),
        replayer_id="r1",
    )
    [client] = [c for c in _FakeClient.made if c.will is not None]
    ids = {"root": topics.root, "match_id": match.match_id, "replayer_id": "r1"}
    for spec in CHANNELS:
        topic = spec.address.format(**ids)
        sent = [s for s in client.sent if s[0] == topic]
        assert sent, f"nothing published on {topic}"
        if spec.kind == "status":  # the replayer ends removing its status: nothing left
            assert sent[-1][1] == b"" and sent[-1][3] is True
            sent = sent[:-1]
        binding = _send_operation(doc, spec)["bindings"]["mqtt"]
        assert {(qos, retain) for _, _, qos, retain, _ in sent} == {
            (binding["qos"], binding["retain"])
        }
        for _, payload, _, _, props in sent:
            assert props is not None
            assert props.content_type == CONTENT_TYPE
            assert props.message_expiry == binding.get("messageExpiryInterval")
            assert tuple(k for k, _ in props.user) == spec.user_properties
            if spec.kind == "status":
                ReplayerStatus.model_validate_json(payload)
    will = doc["servers"]["mqtt5"]["bindings"]["mqtt"]["lastWill"]
    assert client.will is not None
    assert client.will.topic == will["topic"].format(**ids)
    assert (client.will.qos, client.will.retain) == (will["qos"], will["retain"])
    assert ReplayerStatus.model_validate_json(client.will.payload).status == "offline"


def test_every_send_operation_says_whether_its_messages_are_retained() -> None:
    """A publisher's binding states its topic's retain flag, as the topic tree declares it:
    a consumer of the document need not guess that control commands and replies are not
    kept (the retained status and state topics are)."""
    retain = {t.channel_id: t.retain for t in TOPIC_TREE}
    operations = asyncapi_document()["operations"]
    stated = {
        op["channel"]["$ref"].rsplit("/", 1)[-1]: op["bindings"]["mqtt"].get("retain")
        for op in operations.values()
        if op["action"] == "send"
    }
    assert stated == retain
