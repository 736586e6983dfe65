"""Load-test accounting and payload templates: pure, no broker."""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import pytest

from events import (
    Topics,
    decode_event,
    decode_state,
    encode_event,
    encode_state,
    replay_state,
)
from matchcast.load import (
    ConsumerAccount,
    LatencySeries,
    LoadShape,
    MatchTemplate,
    Sender,
    StreamStats,
    decode_histogram,
    encode_histogram,
    format_timestamp,
    histogram_summary,
    match_ids,
    parse_probe_fields,
)
from simulator import expand, resolve_matches
from tests._fakes import RecordingPublisher

SEMI = resolve_matches("semifinal")[0]
TEMPLATE = MatchTemplate.build(SEMI)


def test_in_order_stream_has_no_anomalies() -> None:
    s = StreamStats()
    for seq in range(1, 11):
        s.record(seq)
    assert (s.received, s.unique, s.duplicates, s.reordered, s.max_displacement) == (
        10,
        10,
        0,
        0,
        0,
    )
    assert s.missing(10) == []


def test_duplicates_are_counted_and_not_unique() -> None:
    s = StreamStats()
    for seq in (1, 2, 2, 3, 1, 3, 3):
        s.record(seq)
    assert s.received == 7
    assert s.unique == 3
    assert s.duplicates == 4


def test_reordering_counts_late_arrivals_and_their_displacement() -> None:
    s = StreamStats()
    for seq in (1, 3, 2, 4, 8, 5, 6, 7):
        s.record(seq)
    assert s.reordered == 4  # 2 after 3; 5, 6, 7 after 8
    assert s.max_displacement == 3  # 5 arrived when 8 was the highest
    assert s.missing(8) == []


def test_gaps_and_a_missing_tail_are_loss() -> None:
    s = StreamStats()
    for seq in (1, 2, 5, 6, 9):
        s.record(seq)
    assert s.missing(10) == [3, 4, 7, 8, 10]


def test_large_seqs_grow_the_bitmap() -> None:
    s = StreamStats()
    s.record(10_000)
    s.record(10_000)
    assert s.duplicates == 1
    assert len(s.missing(10_000)) == 9_999


def test_consumer_totals_sum_streams_and_flag_unknown_matches() -> None:
    acc = ConsumerAccount("probe-0")
    for seq in (1, 2, 2, 4, 3):
        acc.record("a", seq, 0, 1000)
    acc.record("zzz", 1, 0, 1000)
    totals = acc.totals({"a": 5, "b": 2})
    assert totals["lost"] == 1 + 2  # a: 5; b: 1, 2
    assert totals["duplicates"] == 1
    assert totals["reordered"] == 1
    assert totals["max_displacement"] == 1
    assert totals["unexpected"] == 1
    assert totals["streams_with_loss"] == 2
    assert not acc.complete({"a": 5})
    assert acc.complete({"a": 4})


def test_latency_series_per_second_and_overall() -> None:
    series = LatencySeries()
    for v in range(1, 1001):
        series.add(0, v)
    series.add(1, 5_000)
    assert series.seconds() == [0, 1]
    assert series.count(0) == 1000
    assert series.histogram(1).get_max_value() == pytest.approx(5000, rel=1e-3)
    overall = series.histogram()
    assert overall.get_total_count() == 1001
    summary = histogram_summary(overall)
    assert summary["p50"] == pytest.approx(0.5, rel=0.01)


def test_sealed_seconds_keep_their_figures_and_take_late_values() -> None:
    series = LatencySeries()
    for v in range(1, 1001):
        series.add(0, v)
        series.add(1, v * 10)
    series.seal_before(1)
    assert series.counts(0) == {}  # compressed
    assert series.count(0) == 1000
    assert series.histogram(0).get_value_at_percentile(50) == pytest.approx(500, rel=1e-3)
    series.add(0, 5_000)  # a straggler for a sealed second
    series.seal_before(2)
    assert series.count(0) == 1001
    assert series.histogram(0).get_max_value() == pytest.approx(5_000, rel=1e-3)
    assert series.histogram().get_total_count() == 2001
    assert series.seconds() == [0, 1]


def test_histograms_survive_encoding_and_merge_by_adding_counts() -> None:
    a = LatencySeries()
    for v in range(1, 101):
        a.add(0, v * 100)
    hist = a.histogram()
    back = decode_histogram(encode_histogram(hist))
    assert back.get_total_count() == 100
    assert back.get_value_at_percentile(99) == hist.get_value_at_percentile(99)
    back.add(decode_histogram(encode_histogram(hist)))
    assert back.get_total_count() == 200


def test_template_renders_exactly_what_encode_event_would() -> None:
    """A copy's bytes equal pydantic's encoding of the same event under the copy's id."""
    emitted = dt.datetime(2026, 11, 29, 19, 0, 1, 123456, tzinfo=dt.UTC)
    scheduled = dt.datetime(2026, 11, 29, 19, 0, 0, 654321, tzinfo=dt.UTC)
    stream = expand(SEMI)
    for i in (0, 1, 50, len(stream) - 1):
        raw = TEMPLATE.event(
            i,
            b"copy-00001",
            format_timestamp(emitted.timestamp()),
            format_timestamp(scheduled.timestamp()),
            0,
        )
        expected = stream[i].event.model_copy(
            update={"match_id": "copy-00001", "emitted_at": emitted, "scheduled_at": scheduled}
        )
        assert raw == encode_event(expected)
        assert decode_event(raw) == expected


def test_template_states_are_the_reducer_output_under_the_copy_id() -> None:
    events = [s.event.model_copy(update={"match_id": "copy-2"}) for s in expand(SEMI)]
    final = replay_state("copy-2", events)
    raw = TEMPLATE.state(len(events) - 1, b"copy-2")
    assert raw == encode_state(final)
    assert decode_state(raw).score == {"ARG": 2, "ENG": 1}
    assert TEMPLATE.final_score == {"ARG": 2, "ENG": 1}


def test_padding_keeps_the_event_valid_json() -> None:
    raw = TEMPLATE.event(
        0, b"m", b"2026-01-01T00:00:00.000000Z", b"2026-01-01T00:00:00.000000Z", 600
    )
    assert len(raw) == 600
    assert decode_event(raw).seq == 1


def test_probe_parses_seq_and_schedule_like_the_full_decoder() -> None:
    now = time.time()
    raw = TEMPLATE.event(41, b"m-1", format_timestamp(now + 1), format_timestamp(now), 0)
    seq, scheduled = parse_probe_fields(raw)
    event = decode_event(raw)
    assert seq == event.seq == 42
    assert event.scheduled_at is not None
    assert scheduled == pytest.approx(event.scheduled_at.timestamp(), abs=1e-6)


def test_probe_reads_pydantic_timestamps_without_fraction_or_schedule() -> None:
    raw = encode_event(expand(SEMI)[0].event)
    assert parse_probe_fields(raw) == (1, None)
    with pytest.raises(ValueError, match="no seq"):
        parse_probe_fields(b"{}")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # what matchcast writes: the fast path
        (b'{"seq":7,"scheduled_at":"2026-07-15T19:00:01.250000Z"}', (7, 1784142001.25)),
        # what other writers may send: each takes the careful path, to the same answer
        (b'{"seq": 7 ,"scheduled_at":"2026-07-15T19:00:01.25Z"}', (7, 1784142001.25)),
        (b'{"seq":7,"scheduled_at":"2026-07-15T19:00:01Z"}', (7, 1784142001.0)),
        (b'{"seq":7,"scheduled_at":"2026-07-15T19:00:01.5+00:00"}', (7, 1784142001.5)),
        (b'{"scheduled_at":"2026-07-15T19:00:01.5Z","seq":7}', (7, None)),
        (b'{"seq":7}', (7, None)),
    ],
)
def test_probe_fast_and_careful_paths_agree(raw: bytes, expected: tuple[int, float]) -> None:
    seq, scheduled = parse_probe_fields(raw)
    assert seq == expected[0]
    assert scheduled == (pytest.approx(expected[1]) if expected[1] is not None else None)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b'{"seq":"x","scheduled_at":"2026-07-15T19:00:01.5Z"}', "not a number"),
        (b'{"seq":7,"scheduled_at":"2026-07-15T19:00:01.5+02:00"}', "not UTC"),
        (b'{"seq":7,"scheduled_at":"yesterdayZ"}', "not a timestamp"),
        (b'{"seq":7,"scheduled_at":"2026-07-15Tab:00:01.5Z"}', "not a timestamp"),
    ],
)
def test_probe_rejects_what_it_cannot_read(raw: bytes, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_probe_fields(raw)


def test_match_ids_are_distinct_valid_and_bounded() -> None:
    ids = {match_ids("x" * 70, "ab12", i) for i in range(1000)}
    assert len(ids) == 1000
    assert all(len(i) <= 64 for i in ids)


def test_shape_offsets_by_speed_rate_and_max() -> None:
    assert LoadShape(speed=None).offsets(TEMPLATE) is None
    by_rate = LoadShape(matches=4, rate=100).offsets(TEMPLATE)
    assert by_rate is not None
    assert by_rate[1] == pytest.approx(0.04)
    by_speed = LoadShape(speed=600, break_seconds=1).offsets(TEMPLATE)
    assert by_speed is not None
    assert by_speed[0] == 0
    assert by_speed[-1] > by_speed[1]
    assert LoadShape(matches=4, ramp_s=2).start_offset(3) == pytest.approx(1.5)


def test_the_load_package_exports_exactly_its_public_names() -> None:
    import matchcast.load as load

    assert load.__all__ == sorted(load.__all__, key=lambda n: (not n.isupper(), n))
    assert set(load.__all__) == {
        "CHECK_FIGURES", "PERCENTILES", "REPORT_FORMAT", "Check", "CheckError", "ClientFactory",
        "ConnectionHealth", "ConsumerAccount", "Rates", "evaluate_checks", "parse_check", "rates",
        "LatencySeries", "LoadClient", "LoadOptions", "LoadRun", "LoadShape", "MatchTemplate",
        "MergeError", "NowaitPublisher", "Progress", "RunnerMetrics", "Sender", "SenderStats",
        "SharedSource", "StateReporter", "StreamStats", "build_report", "collect_reported_states",
        "consumer_state_filter", "consumer_state_topic", "decode_histogram", "encode_histogram",
        "format_timestamp", "histogram_summary", "match_ids", "merge_reports", "read_reports", "new_histogram",
        "parse_probe_fields", "probe_filter", "render_table", "run_consumer", "submit",
        "verify_states", "write_chart",
        # the orchestration of a run (matchcast load) and its figures each second
        "DEFAULT_DURATION_S", "DEFAULT_SPEED", "ROW_KIND", "JsonLines",
        "LiveOptions", "LiveSink", "LoadArgs", "LoadError", "Plan", "Runtime", "Seconds",
        "StageError", "Stages", "TerminalView", "execute", "failures", "follow", "make_factory",
        "merge_files", "nothing_delivered", "output", "parse_duration", "parse_stages", "plan",
        "render_summary", "write_csv",
    }  # fmt: skip


async def test_at_max_speed_started_matches_take_turns_and_ramped_ones_join_late() -> None:
    """The max-speed sender: every match's events in seq order, round robin between the
    matches running, and a ramped match's first event no earlier than its start."""
    pub = RecordingPublisher()
    shape = LoadShape(matches=3, qos=0, states=False, ramp_s=0.3)
    sender = Sender([TEMPLATE], shape, [pub], topics=Topics("t"))
    stats = await sender.run()
    await asyncio.sleep(0)  # the last publishes' tasks
    by_match: dict[str, list[int]] = {}
    order = []
    for p in pub.sent:
        event = decode_event(p.payload)
        by_match.setdefault(event.match_id, []).append(event.seq)
        order.append(event.match_id)
    assert stats.events == 3 * len(TEMPLATE) == len(pub.sent)
    assert all(seqs == list(range(1, len(TEMPLATE) + 1)) for seqs in by_match.values())
    first, second, third = sorted(by_match, key=order.index)
    # match 1 starts 0.1 s after match 0, long after match 0 finished at max speed
    assert order[: len(TEMPLATE)] == [first] * len(TEMPLATE)
    starts = {m: order.index(m) for m in (first, second, third)}
    assert starts[second] == len(TEMPLATE)
    assert starts[third] == 2 * len(TEMPLATE)


async def test_at_max_speed_matches_running_together_alternate() -> None:
    pub = RecordingPublisher()
    shape = LoadShape(matches=2, qos=0, states=False)
    sender = Sender([TEMPLATE], shape, [pub], topics=Topics("t"))
    await sender.run()
    await asyncio.sleep(0)
    ids = [decode_event(p.payload).match_id for p in pub.sent]
    assert ids[:6] == [ids[0], ids[1]] * 3
    assert ids[0] != ids[1]
