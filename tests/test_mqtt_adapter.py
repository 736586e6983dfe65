"""The MQTT adapter: broker URLs, and MQTT 5 properties encoded exactly as paho would."""

import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from events import MessageProps
from matchcast.transport.aiomqtt_private import encode_properties
from matchcast.transport.connection import BrokerURL


@pytest.mark.parametrize(
    "props",
    [
        MessageProps(content_type="application/json"),
        MessageProps(
            content_type="application/json",
            message_expiry=3600,
            user=(("seq", "12"), ("type", "goal")),
        ),
        MessageProps(user=(("clé", "ü" * 300),)),
        MessageProps(message_expiry=0),
    ],
)
def test_our_property_encoding_equals_paho(props: MessageProps) -> None:
    reference = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    if props.content_type:
        reference.ContentType = props.content_type
    if props.message_expiry is not None:
        reference.MessageExpiryInterval = props.message_expiry
    if props.user:
        reference.UserProperty = list(props.user)
    ours = encode_properties(props)
    assert ours is not None
    assert ours.pack() == reference.pack()


def test_broker_urls_parse_and_never_show_the_password() -> None:
    url = BrokerURL.parse("mqtt://alice:s%40cret@broker.local:1884")
    assert (url.host, url.port, url.username, url.password, url.tls) == (
        "broker.local",
        1884,
        "alice",
        "s@cret",
        False,
    )
    assert str(url) == "mqtt://alice:***@broker.local:1884"
    assert BrokerURL.parse("mqtts://h").port == 8883
    assert BrokerURL.parse("127.0.0.1").port == 1883


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("http://h", "scheme must be"),
        ("mqtt://:1883", "has no host"),
        ("mqtt://u:pw@h:99999", "port must be"),
    ],
)
def test_bad_urls_say_what_is_wrong_without_the_password(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        BrokerURL.parse(raw)
    assert "pw" not in str(info.value)
