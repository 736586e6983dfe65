"""The broker list and the failover schedule both MQTT clients take their attempts from."""

from __future__ import annotations

import itertools

import pytest

from matchcast.transport.connection import BrokerURL, parse_brokers
from matchcast.transport.failover import Attempts, QuickLosses


def test_a_single_url_is_a_list_of_one() -> None:
    assert parse_brokers("mqtt://127.0.0.1:1883") == (BrokerURL.parse("mqtt://127.0.0.1:1883"),)


def test_a_comma_separated_list_keeps_its_order_and_credentials() -> None:
    urls = parse_brokers("mqtt://u:p@10.0.0.2:1883, 10.0.0.1:1884")
    assert [(u.host, u.port) for u in urls] == [("10.0.0.2", 1883), ("10.0.0.1", 1884)]
    assert (urls[0].username, urls[0].password) == ("u", "p")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no broker given"),
        (" , ", "no broker given"),
        ("mqtt://a:1,,mqtt://b:2", "empty entry"),
        ("mqtt://a:1,mqtt://a:1", "listed twice"),
        ("mqtt://a:1,mqtts://b:2", "mixes mqtt:// and mqtts://"),
        ("mqtt://a:1,http://b:2", "scheme must be mqtt://"),
    ],
)
def test_a_bad_list_is_refused_with_the_reason(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_brokers(text)


def test_a_password_in_a_bad_list_never_shows_in_the_error() -> None:
    with pytest.raises(ValueError) as err:
        parse_brokers("mqtt://u:s3cret@a:1,ftp://u:s3cret@b:2")
    assert "s3cret" not in str(err.value)


def _three() -> tuple[BrokerURL, ...]:
    return parse_brokers("mqtt://n1:1,mqtt://n2:2,mqtt://n3:3")


def test_a_first_connection_tries_each_broker_in_order_without_waiting() -> None:
    attempts = list(Attempts(_three()).first_pass())
    assert [(a.index, a.url.host, a.delay) for a in attempts] == [
        (0, "n1", 0.0),
        (1, "n2", 0.0),
        (2, "n3", 0.0),
    ]


def test_after_a_loss_the_next_node_goes_first_and_the_lost_one_last() -> None:
    schedule = Attempts(_three(), rng=lambda: 1.0)
    schedule.connected(1)
    order = [a.index for a in itertools.islice(schedule.after_loss(), 7)]
    assert order == [2, 0, 1, 2, 0, 1, 2]


def test_backoff_doubles_per_failed_pass_up_to_the_cap_with_full_jitter() -> None:
    schedule = Attempts(_three(), initial=0.1, cap=0.5, rng=lambda: 1.0)
    delays = [a.delay for a in itertools.islice(schedule.after_loss(), 12)]
    assert delays == [0.1] * 3 + [0.2] * 3 + [0.4] * 3 + [0.5] * 3
    jittered = Attempts(_three(), initial=0.1, cap=0.5, rng=lambda: 0.25)
    assert [a.delay for a in itertools.islice(jittered.after_loss(), 4)] == [0.025] * 3 + [0.05]


def test_one_broker_backs_off_as_before_from_the_first_retry() -> None:
    schedule = Attempts(parse_brokers("mqtt://only:1"), initial=0.1, cap=5.0, rng=lambda: 1.0)
    delays = [a.delay for a in itertools.islice(schedule.after_loss(), 8)]
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]


def test_a_lost_node_on_a_list_is_left_within_one_short_wait() -> None:
    """The failover bound: the first attempt on another node waits at most ``initial``."""
    schedule = Attempts(_three(), initial=0.1, cap=5.0)
    schedule.connected(0)
    first = next(schedule.after_loss())
    assert first.index == 1
    assert 0.0 <= first.delay <= 0.1


def test_a_failover_attempt_waits_briefly_first_and_longer_each_pass() -> None:
    """A surviving node that stalls a CONNECT (NATS during a JetStream election) costs the first
    pass 2 s, not the 10 s connect timeout; a merely slow node is still reached on a later pass."""
    schedule = Attempts(_three(), connect_timeout=10.0, failover_timeout=2.0)
    assert [a.timeout for a in schedule.first_pass()] == [10.0] * 3
    timeouts = [a.timeout for a in itertools.islice(schedule.after_loss(), 12)]
    assert timeouts == [2.0] * 3 + [4.0] * 3 + [8.0] * 3 + [10.0] * 3


def test_a_list_of_one_always_waits_the_full_connect_timeout() -> None:
    schedule = Attempts(parse_brokers("mqtt://only:1"), connect_timeout=10.0)
    assert {a.timeout for a in itertools.islice(schedule.after_loss(), 5)} == {10.0}


def test_a_connection_given_up_on_a_live_node_asks_that_node_first() -> None:
    """A session the node could not resume (RabbitMQ 3.10): the node is up, and on an engine
    that keeps retained messages per node it may be the only one with the match's snapshot."""
    schedule = Attempts(_three(), rng=lambda: 1.0)
    schedule.connected(1)
    order = [a.index for a in itertools.islice(schedule.after_loss(current_first=True), 5)]
    assert order == [1, 2, 0, 1, 2]


def test_quick_losses_double_the_wait_and_a_connection_that_lasted_resets_it() -> None:
    now = [0.0]
    losses = QuickLosses(initial=0.1, cap=5.0, stable=10.0, clock=lambda: now[0])
    waits = []
    for _ in range(9):
        losses.connected()
        now[0] += 1.0  # lost a second later
        waits.append(losses.wait())
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    losses.connected()
    now[0] += 10.0
    assert losses.wait() == 0.0
    assert losses.wait() == 0.1  # a failed attempt (no connection since) is a quick loss
    for _ in range(5000):  # no overflow however long it goes on
        assert losses.wait() <= 5.0


def test_a_connection_that_delivered_before_it_died_waits_only_the_initial_wait() -> None:
    """A broker killed every second (each connection delivered messages): the reader is back
    after ``initial`` each time, not after a doubling wait that outlasts its gap repair; a
    connection refused at once (no message through it) still doubles."""
    now = [0.0]
    losses = QuickLosses(initial=0.1, cap=5.0, stable=10.0, clock=lambda: now[0])
    for _ in range(6):
        losses.connected()
        losses.progress = True  # a message came through
        now[0] += 1.0
        assert losses.wait() == 0.1
    assert losses.wait() == 0.1  # then a failed attempt: quick, from the start again
    assert losses.wait() == 0.2
    losses.connected()
    now[0] += 0.05  # refused at once, nothing delivered: the storm case
    assert losses.wait() == 0.4


def test_a_connection_that_answered_and_broke_at_once_still_doubles() -> None:
    """Progress counts for a connection that lasted a while (a broker killed and restarted),
    not for one a broker answered and broke within moments (a PUBACK, then a poisoned packet):
    that is still a storm, and its waits double."""
    now = [0.0]
    losses = QuickLosses(initial=0.1, cap=5.0, stable=10.0, clock=lambda: now[0])
    waits = []
    for _ in range(4):
        losses.connected()
        losses.progress = True  # acknowledged something
        now[0] += 0.01
        waits.append(losses.wait())
    assert waits == [0.1, 0.2, 0.4, 0.8]
