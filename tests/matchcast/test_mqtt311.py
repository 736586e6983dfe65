"""The MQTT 3.1.1 codec: every packet round-trips, split reads wait, hostile bytes are refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from matchcast.transport import mqtt311 as m

PACKETS: list[m.Packet] = [
    m.Connect("c1"),
    m.Connect(
        "consumer-1",
        clean_session=False,
        keepalive=30,
        will=m.Will("mc/status/r1", b'{"status":"offline"}', 1, True),
        username="alice",
        password=b"s3cret",
    ),
    m.Connect("", keepalive=65535, username="bob"),
    m.ConnAck(False, 0),
    m.ConnAck(True, 0),
    m.ConnAck(False, 1),
    m.ConnAck(False, 5),
    m.Publish("a/b", b""),
    m.Publish("a/b", b"x" * 200, 1, True, False, 1),
    m.Publish("ü/é", b"\x00\xff" * 40_000, 2, False, True, 65535),
    m.PubAck(1),
    m.PubRec(2),
    m.PubRel(3),
    m.PubComp(65535),
    m.Subscribe(7, (("a/+/c", 0), ("#", 2))),
    m.SubAck(7, (0, 1, 2, 0x80)),
    m.Unsubscribe(8, ("a/#", "b")),
    m.UnsubAck(8),
    m.PingReq(),
    m.PingResp(),
    m.Disconnect(),
]


def _decode_all(data: bytes) -> list[m.Packet]:
    out: list[m.Packet] = []
    off = 0
    while (f := m.frame(data, off)) is not None:
        out.append(m.decode(f[0], data, f[1], f[2]))
        off = f[2]
    assert off == len(data), "bytes left over"
    return out


@pytest.mark.parametrize("packet", PACKETS, ids=lambda p: type(p).__name__)
def test_every_packet_round_trips(packet: m.Packet) -> None:
    [back] = _decode_all(packet.encode())
    assert back == packet
    assert type(back) is type(packet)


def test_known_bytes_of_the_standard() -> None:
    """Bytes as the 3.1.1 standard's examples and mosquitto write them."""
    assert m.PingReq().encode() == b"\xc0\x00"
    assert m.Connect("a", keepalive=60).encode() == b"\x10\x0d\x00\x04MQTT\x04\x02\x00\x3c\x00\x01a"
    assert m.Publish("t", b"p", 1, False, False, 10).encode() == b"\x32\x06\x00\x01t\x00\x0ap"
    assert m.Subscribe(1, (("t", 1),)).encode() == b"\x82\x06\x00\x01\x00\x01t\x01"


def test_a_stream_split_anywhere_decodes_the_same() -> None:
    stream = b"".join(p.encode() for p in PACKETS)
    for cut in range(0, len(stream), 997):
        head = stream[:cut]
        off = 0
        got: list[m.Packet] = []
        while (f := m.frame(head, off)) is not None:
            got.append(m.decode(f[0], head, f[1], f[2]))
            off = f[2]
        rest = head[off:] + stream[cut:]
        assert got + _decode_all(rest) == PACKETS


def test_a_large_remaining_length_is_encoded_in_several_bytes() -> None:
    packet = m.Publish("t", b"x" * 2_000_000)
    data = packet.encode()
    assert data[1] & 0x80 and data[2] & 0x80 and not data[3] & 0x80
    assert m.frame(data[:-1]) is None  # not all there yet
    assert _decode_all(data) == [packet]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x00", "type 0"),
        (b"\xf0\x00", "type 15"),
        (b"\x36\x05\x00\x01t\x00\x01", "QoS 3"),
        (b"\x38\x04\x00\x01tp", "DUP set at QoS 0"),
        (b"\x30\x04\x00\x01+p", "wildcard"),
        (b"\x30\x03\x00\x00p", "empty"),
        (b"\x30\x04\x00\x01\xffp", "UTF-8"),
        (b"\x30\x04\x00\x01\x00p", "U\\+0000"),
        (b"\x30\x04\x00\x09tp", "9 bytes said"),
        (b"\x32\x05\x00\x01t\x00\x00", "packet id 0"),
        (b"\x32\x04\x00\x01t\x00", "no room"),
        (b"\x20\x02\x02\x00", "reserved flags"),
        (b"\x20\x02\x00\x09", "return code 9"),
        (b"\x20\x03\x00\x00\x00", "CONNACK of 3 bytes"),
        (b"\x20\x02\x01\x05", "session present"),
        (b"\x40\x03\x00\x01\x00", "PUBACK of 3 bytes"),
        (b"\x41\x02\x00\x01", "reserved flags"),
        (b"\x60\x02\x00\x01", "PUBREL with reserved flags"),
        (b"\x90\x03\x00\x01\x03", "SUBACK return codes"),
        (b"\x90\x02\x00\x01", "SUBACK return codes"),
        (b"\x80\x06\x00\x01\x00\x01t\x01", "SUBSCRIBE with reserved flags"),
        (b"\x82\x06\x00\x01\x00\x01t\x03", "QoS 0-2"),
        (b"\x82\x02\x00\x01", "without a topic filter"),
        (b"\xa2\x02\x00\x01", "without a topic filter"),
        (b"\xd0\x01\x00", "must be empty"),
        (b"\x10\x0c\x00\x04MQTT\x05\x02\x00\x3c\x00\x00", "not MQTT 3.1.1"),
        (b"\x10\x0c\x00\x04MQTT\x04\x03\x00\x3c\x00\x00", "reserved flag"),
        (b"\x10\x0c\x00\x04MQTT\x04\x40\x00\x3c\x00\x00", "password but no user"),
        (b"\x10\x0c\x00\x04MQTT\x04\x18\x00\x3c\x00\x00", "will QoS or retain"),
        (b"\x10\x0d\x00\x04MQTT\x04\x02\x00\x3c\x00\x00\x00", "left over"),
    ],
)
def test_malformed_packets_are_refused_with_what_is_wrong(data: bytes, message: str) -> None:
    f = m.frame(data)
    assert f is not None
    with pytest.raises(m.MalformedPacketError, match=message):
        m.decode(f[0], data, f[1], f[2])


def test_a_remaining_length_past_four_bytes_is_malformed() -> None:
    with pytest.raises(m.MalformedPacketError, match="four bytes"):
        m.frame(b"\x30\xff\xff\xff\xff\x01")


def test_what_cannot_be_sent_is_refused_before_it_is_sent() -> None:
    with pytest.raises(ValueError, match="password only with a user name"):
        m.Connect("c", password=b"x").encode()
    with pytest.raises(ValueError, match="needs a packet id"):
        m.encode_publish("t", b"", 1, False, None)
    with pytest.raises(ValueError, match="not in 1-65535"):
        m.PubAck(0).encode()
    with pytest.raises(ValueError, match="65535"):
        m.Publish("t" * 70_000, b"").encode()


@given(st.binary(max_size=300))
def test_hostile_bytes_are_a_malformed_packet_or_wait_never_anything_else(data: bytes) -> None:
    off = 0
    try:
        while (f := m.frame(data, off)) is not None:
            m.decode(f[0], data, f[1], f[2])
            off = f[2]
    except m.MalformedPacketError:
        return


@given(
    st.text(min_size=1, max_size=50).filter(lambda t: not ({"+", "#", "\x00"} & set(t))),
    st.binary(max_size=500),
    st.integers(0, 2),
    st.booleans(),
    st.integers(1, 65535),
)
def test_any_publish_round_trips(
    topic: str, payload: bytes, qos: int, retain: bool, pid: int
) -> None:
    packet = m.Publish(topic, payload, qos, retain, False, pid if qos else None)
    assert _decode_all(packet.encode()) == [packet]
