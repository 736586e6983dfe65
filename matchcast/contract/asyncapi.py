"""The topic API as an AsyncAPI 3.0 document, generated from the code.

:func:`asyncapi_document` builds it from :data:`events.TOPIC_TREE` (every topic: address,
flags, who publishes it and who reads it), the pydantic models (payload schemas: the event
union, the state snapshot, the replayer status, dead letters) and
:data:`events.SCHEMA_VERSION`. Nothing in
it is written by hand except prose, so it cannot drift from what goes on the wire.

Pydantic's JSON Schema is adapted to the AsyncAPI Schema Object on the way in:

- ``$defs`` move to ``components.schemas`` and every ``$ref`` follows them;
- each event schema is named after its ``type`` literal (``goal``, ``kick_off``), because an
  AsyncAPI ``discriminator`` is a property name whose value is the name of the schema, not
  OpenAPI's ``{propertyName, mapping}`` object;
- ``type`` is required in every event schema: decoding needs it to pick the model, even
  though each model has it as a default.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Literal

import yaml

from consumers import DeadLetter
from events import (
    CONTENT_TYPE,
    SCHEMA_VERSION,
    TOPIC_TREE,
    BaseEvent,
    ControlCommand,
    ControlReply,
    Event,
    EventAdapter,
    MatchState,
    TopicKind,
    Topics,
    encode_control,
    encode_event,
    encode_state,
)
from matchcast.contract.channels import CHANNELS, ChannelSpec
from matchcast.contract.status import ReplayerStatus
from matchcast.contract.wire_examples import (
    EVENT_TYPES,
    example_command,
    example_events,
    example_reply,
    example_state,
    example_status,
)
from matchcast.transport.mqtt import MqttClient

__all__ = [
    "ASYNCAPI_VERSION",
    "MQTT_BINDING_VERSION",
    "DocFormat",
    "asyncapi_document",
    "component_schemas",
    "dump",
]

ASYNCAPI_VERSION = "3.0.0"
#: The MQTT bindings version the AsyncAPI 3.0.0 JSON Schema accepts.
MQTT_BINDING_VERSION = "0.2.0"
DocFormat = Literal["yaml", "json"]

_SCHEMAS = "#/components/schemas/"
#: How the replayer connects: ``MqttClient``'s defaults.
_CONNECT = inspect.signature(MqttClient).parameters


def _parameters() -> dict[str, dict[str, Any]]:
    match_id = BaseEvent.model_fields["match_id"].description or "The match id"
    return {
        "root": {
            "description": "Topic root, `--root` on the command line (levels may contain `/`; "
            "no wildcards, and it does not start with `$`).",
            "default": Topics().root,
            "examples": [Topics().root],
        },
        "match_id": {
            "description": f"The match id. {match_id}. Subscribers put the single-level "
            "wildcard `+` here to receive every match.",
            "examples": [example_state().match_id],
        },
        "consumer": {
            "description": "A consumer's name: `Runner(name=...)` for its dead letters, "
            "`--consumer-id` of `matchcast load-consumer` for its reported states.",
            "examples": ["scoreboard"],
        },
        "request_id": {
            "description": "The command's `request_id`, chosen by its sender.",
            "examples": [example_command().request_id],
        },
        "replayer_id": {
            "description": "The replayer's id, `replay --replayer` (default `replayer-` and 8 hex "
            "digits). Its MQTT client id is `matchcast-{replayer_id}`.",
            "examples": [example_status().replayer_id],
        },
    }


# ---------------------------------------------------------------- schemas


def _walk_refs(node: Any, rename: dict[str, str]) -> Any:
    """``node`` with every ``$ref`` to a renamed component schema rewritten."""
    if isinstance(node, dict):
        out = {k: _walk_refs(v, rename) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith(_SCHEMAS):
            name = ref.removeprefix(_SCHEMAS)
            out["$ref"] = _SCHEMAS + rename.get(name, name)
        return out
    if isinstance(node, list):
        return [_walk_refs(v, rename) for v in node]
    return node


def _add(schemas: dict[str, Any], name: str, schema: dict[str, Any]) -> None:
    if name in schemas and schemas[name] != schema:
        raise RuntimeError(f"two different JSON Schemas are both named {name!r}")
    schemas[name] = schema


def component_schemas() -> dict[str, Any]:
    """Every payload schema, keyed by its name in ``components.schemas``.

    The event models are named by their ``type``; ``Event`` is the tagged union of them.
    """
    union = EventAdapter.json_schema(ref_template=_SCHEMAS + "{model}")
    defs: dict[str, Any] = union.pop("$defs")
    mapping: dict[str, str] = union["discriminator"]["mapping"]
    rename = {ref.removeprefix(_SCHEMAS): type_ for type_, ref in mapping.items()}
    schemas: dict[str, Any] = {}
    for type_ in EVENT_TYPES:
        class_name = next(c for c, t in rename.items() if t == type_)
        schema = _walk_refs(defs.pop(class_name), rename)
        schema["required"] = ["type", *[r for r in schema.get("required", []) if r != "type"]]
        _add(schemas, type_, schema)
    _add(
        schemas,
        "Event",
        {
            "title": "Event",
            "description": "Any event: the `type` property says which.",
            "oneOf": [_walk_refs(ref, rename) for ref in union["oneOf"]],
            "discriminator": "type",
        },
    )
    for name, schema in defs.items():
        _add(schemas, name, _walk_refs(schema, rename))
    for model in (MatchState, ReplayerStatus, DeadLetter, ControlCommand, ControlReply):
        schema = model.model_json_schema(ref_template=_SCHEMAS + "{model}")
        for name, sub in schema.pop("$defs", {}).items():
            _add(schemas, name, sub)
        _add(schemas, model.__name__, schema)
    return schemas


# ---------------------------------------------------------------- messages


def _mqtt_message_binding() -> dict[str, Any]:
    return {"mqtt": {"contentType": CONTENT_TYPE, "bindingVersion": MQTT_BINDING_VERSION}}


def _user_properties(props: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "object",
        "description": "MQTT 5 user properties. Absent where the broker speaks MQTT 3.1.1 "
        "(the embedded amqtt broker does): read the payload instead.",
        "properties": props,
    }


def _seq_header() -> dict[str, Any]:
    return {"type": "string", "pattern": "^[1-9][0-9]*$", "description": "`seq`, in decimal"}


def _summary(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0]


def _messages() -> dict[str, Any]:
    messages: dict[str, Any] = {}
    for event in example_events():
        messages[event.type] = _event_message(event)
    state = example_state()
    messages["state"] = {
        "name": "state",
        "title": "MatchState",
        "summary": _summary(MatchState.__doc__),
        "contentType": CONTENT_TYPE,
        "headers": _user_properties({"seq": _seq_header()}),
        "payload": {"$ref": _SCHEMAS + "MatchState"},
        "bindings": _mqtt_message_binding(),
        "examples": [
            {
                "name": "full-time",
                "headers": {"seq": str(state.last_seq)},
                "payload": json.loads(encode_state(state)),
            }
        ],
    }
    messages["status"] = _model_message(
        "status",
        ReplayerStatus,
        [
            {"name": s, "payload": json.loads(example_status(s).model_dump_json())}
            for s in ("online", "offline")
        ],
    )
    messages["control"] = _model_message(
        "control",
        ControlCommand,
        [{"name": "seek", "payload": json.loads(encode_control(example_command()))}],
    )
    messages["controlReply"] = _model_message(
        "controlReply",
        ControlReply,
        [{"name": "paused", "payload": json.loads(encode_control(example_reply()))}],
    )
    messages["deadletter"] = _model_message(
        "deadletter",
        DeadLetter,
        [
            {
                "name": "not-json",
                "payload": {
                    "consumer": "scoreboard",
                    "topic": Topics().events("wc2026-sf-arg-eng"),
                    "reason": "not JSON: Expecting property name enclosed in double quotes: "
                    "line 1 column 2 (char 1)",
                    "payload_base64": "e25vdCBqc29u",
                    "received_at": "2026-07-15T20:12:31.000000Z",
                },
            }
        ],
    )
    messages["event"] = {
        "name": "event",
        "title": "Event",
        "summary": "Any event, as one schema: the tagged union of the event messages on `type`.",
        "description": "Not listed on a channel, which lists one message per event type; "
        "here for tools that want a single payload schema for the events topic.",
        "contentType": CONTENT_TYPE,
        "payload": {"$ref": _SCHEMAS + "Event"},
        "bindings": _mqtt_message_binding(),
    }
    return messages


def _event_message(event: Event) -> dict[str, Any]:
    """The message of one event type, with ``event`` as its example."""
    model = type(event)
    payload = json.loads(encode_event(event))
    headers = {"seq": str(event.seq), "type": event.type}
    return {
        "name": event.type,
        "title": model.__name__,
        "summary": _summary(model.__doc__),
        "contentType": CONTENT_TYPE,
        "headers": _user_properties(
            {
                "seq": _seq_header(),
                "type": {"type": "string", "const": event.type, "description": "`type`"},
            }
        ),
        "payload": {"$ref": _SCHEMAS + event.type},
        "bindings": _mqtt_message_binding(),
        "examples": [{"name": f"{event.type}-example", "headers": headers, "payload": payload}],
    }


def _model_message(name: str, model: type, examples: list[dict[str, Any]]) -> dict[str, Any]:
    """A message whose payload is one model's schema, with its docstring as the summary."""
    return {
        "name": name,
        "title": model.__name__,
        "summary": _summary(model.__doc__),
        "contentType": CONTENT_TYPE,
        "payload": {"$ref": _SCHEMAS + model.__name__},
        "bindings": _mqtt_message_binding(),
        "examples": examples,
    }


#: The messages of each topic, as ``components.messages`` names them.
_TOPIC_MESSAGES: dict[TopicKind, tuple[str, ...]] = {
    "events": EVENT_TYPES,
    "state": ("state",),
    "status": ("status",),
    "deadletter": ("deadletter",),
    "consumer_state": ("state",),
    "control": ("control",),
    "reply": ("controlReply",),
}


# ---------------------------------------------------------------- channels, operations


def _channels() -> dict[str, Any]:
    """One channel per topic of :data:`events.TOPIC_TREE`, in its order."""
    channels: dict[str, Any] = {}
    for spec in TOPIC_TREE:
        flags = f"QoS {spec.qos}, {'retained' if spec.retain else 'not retained'}"
        if spec.expiry is not None:
            flags += f", MQTT 5 message expiry {spec.expiry} s"
        channels[spec.channel_id] = {
            "address": spec.address,
            "title": spec.title,
            "description": f"{spec.payload[0].upper()}{spec.payload[1:]}. {flags}.",
            "parameters": {p: {"$ref": f"#/components/parameters/{p}"} for p in spec.parameters},
            "messages": {
                m: {"$ref": f"#/components/messages/{m}"} for m in _TOPIC_MESSAGES[spec.kind]
            },
        }
    return channels


def _operation_binding(spec: ChannelSpec, action: str) -> dict[str, Any]:
    binding: dict[str, Any] = {"qos": spec.qos}
    if action == "send":
        binding["retain"] = spec.retain
        if spec.expiry is not None:
            binding["messageExpiryInterval"] = spec.expiry
    binding["bindingVersion"] = MQTT_BINDING_VERSION
    return {"mqtt": binding}


_SEND_SUMMARY: dict[TopicKind, str] = {
    "events": "The replayer publishes each event of a match when its time comes.",
    "state": "After each event the replayer publishes the state it leads to, retained; a "
    "replay started mid-match (`--from`) publishes the state at that point first.",
    "status": "The replayer announces itself online when it connects and offline when it "
    "stops; its last will says offline if the connection dies.",
}
_RECEIVE_SUMMARY: dict[TopicKind, str] = {
    "events": "Subscribers (`matchcast watch`, consumers) receive the events of one match, "
    f"or of all with `{Topics('{root}').events()}`. Duplicates (QoS 1) and gaps are told apart "
    "by `seq`.",
    "state": "Subscribers receive the retained state at once on subscribing, then after "
    "each event; the snapshot resynchronises a subscriber that missed events.",
    "status": "Monitoring tools learn whether a replayer is running.",
}


def _operation(spec: ChannelSpec, action: Literal["send", "receive"]) -> dict[str, Any]:
    """Publishing (``send``, tagged with the publisher) or reading (``receive``, tagged with
    the receiver) one topic."""
    ref = f"#/channels/{spec.channel_id}"
    summary = (_SEND_SUMMARY if action == "send" else _RECEIVE_SUMMARY).get(spec.kind)
    return {
        "action": action,
        "channel": {"$ref": ref},
        "title": f"{'Publish' if action == 'send' else 'Receive'} {spec.title.lower()}",
        **({"summary": summary} if summary else {}),
        "tags": [{"name": spec.publisher if action == "send" else spec.receiver}],
        "messages": [{"$ref": f"{ref}/messages/{m}"} for m in _TOPIC_MESSAGES[spec.kind]],
        "bindings": _operation_binding(spec, action),
    }


def _operations() -> dict[str, Any]:
    """Two operations per topic: the replayer's data topics all sends then all receives, the
    other topics send and receive side by side."""
    data = [spec for spec in TOPIC_TREE if spec in CHANNELS]
    pairs: list[tuple[ChannelSpec, Literal["send", "receive"]]] = [
        *((spec, "send") for spec in data),
        *((spec, "receive") for spec in data),
    ]
    for spec in TOPIC_TREE:
        if spec not in CHANNELS:
            pairs += [(spec, "send"), (spec, "receive")]
    return {
        f"{action}{spec.channel_id[0].upper()}{spec.channel_id[1:]}": _operation(spec, action)
        for spec, action in pairs
    }


# ---------------------------------------------------------------- servers, document


_DESCRIPTION = """\
Football matches replayed as a timed stream of events onto an MQTT broker.

Every payload is UTF-8 JSON (`{content_type}`). Events and state snapshots carry
`schema_version` (now `{version}`): a reader accepts every minor of its own major (a newer
minor's unknown fields ignored, its unknown event types skipped) and refuses another major.
They also carry `run`, the replay run's start in ms: a consumer drops a message of an older run
than the one it applied and starts the match again on a newer one. The versioning rule, the
topic tree and an example of every event are in docs/wire-format.md.

This document is generated by `matchcast asyncapi`; edit matchcast/contract/asyncapi.py, not
the output.
"""


def _servers() -> dict[str, Any]:
    variables = {
        "host": {
            "default": "127.0.0.1",
            "description": "Broker host (`--broker mqtt://HOST:PORT`).",
        },
        "port": {"default": "1883", "description": "Broker port; 8883 for `mqtts://`."},
    }
    status = next(c for c in CHANNELS if c.kind == "status")
    binding = {
        "mqtt": {
            "cleanSession": _CONNECT["clean_start"].default,
            "keepAlive": _CONNECT["keepalive"].default,
            "lastWill": {
                "topic": status.address,
                "qos": status.qos,
                "retain": status.retain,
                "message": example_status("offline").model_dump_json(),
            },
            "bindingVersion": MQTT_BINDING_VERSION,
        }
    }
    return {
        "mqtt5": {
            "host": "{host}:{port}",
            "protocol": "mqtt",
            "protocolVersion": "5",
            "title": "MQTT 5 broker",
            "summary": "Any MQTT 5 broker, such as mosquitto.",
            "description": "The replayer connects with MQTT 5 first and then sends the MQTT 5 "
            "properties: content type, message expiry on events, user properties.",
            "variables": variables,
            "bindings": binding,
        },
        "mqtt311": {
            "host": "{host}:{port}",
            "protocol": "mqtt",
            "protocolVersion": "3.1.1",
            "title": "MQTT 3.1.1 broker",
            "summary": "A broker that refuses MQTT 5, such as the embedded amqtt broker.",
            "description": "Where a broker refuses MQTT 5 the replayer falls back to 3.1.1 "
            "(`--protocol auto`): the same topics and payloads, without MQTT 5 properties.",
            "variables": variables,
            "bindings": binding,
        },
    }


def asyncapi_document() -> dict[str, Any]:
    """The AsyncAPI 3.0 document of the topic API, as plain data."""
    doc: dict[str, Any] = {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {
            "title": "matchcast",
            "version": SCHEMA_VERSION,
            "description": _DESCRIPTION.format(content_type=CONTENT_TYPE, version=SCHEMA_VERSION),
            "license": {"name": "MIT"},
            "tags": [
                {"name": "replayer", "description": "What `matchcast replay` publishes."},
                {"name": "subscriber", "description": "What a subscriber receives."},
                {
                    "name": "consumer",
                    "description": "What a consumer (`matchcast consume`, "
                    "`load-consumer`) publishes about itself.",
                },
                {"name": "tools", "description": "Monitoring and `matchcast load --verify-state`."},
                {
                    "name": "operator",
                    "description": "Who controls a replayer: `matchcast control`, "
                    "`matchcast web --control`.",
                },
            ],
        },
        "defaultContentType": CONTENT_TYPE,
        "servers": _servers(),
        "channels": _channels(),
        "operations": _operations(),
        "components": {
            "schemas": component_schemas(),
            "messages": _messages(),
            "parameters": _parameters(),
        },
    }
    return doc


# ---------------------------------------------------------------- output


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings, so descriptions read as prose; no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        """Write shared values out in full: ``&id001`` anchors only confuse a reader."""
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(doc: dict[str, Any], fmt: DocFormat = "yaml") -> str:
    """``doc`` as YAML or JSON text, ending in a newline; the same input gives the same text."""
    if fmt == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    text: str = yaml.dump(
        doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100, indent=2
    )
    return text
