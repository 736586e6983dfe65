"""Load testing: many matches onto a broker, probe subscribers, and honest numbers.

``matchcast load`` drives copies of matches under distinct ids onto a broker and measures what
subscribers receive: loss, duplicates, reordering, latency from each event's schedule, publish
failures, sender overrun and connection health. See :class:`LoadRun`.
"""

from matchcast.load._accounting import (
    PERCENTILES,
    ConsumerAccount,
    LatencySeries,
    StreamStats,
    decode_histogram,
    encode_histogram,
    histogram_summary,
    new_histogram,
    parse_probe_fields,
)
from matchcast.load._args import DEFAULT_DURATION_S, DEFAULT_SPEED, LoadArgs, Plan, plan
from matchcast.load._chart import Rates, rates, write_chart
from matchcast.load._checks import CHECK_FIGURES, Check, CheckError, evaluate_checks, parse_check
from matchcast.load._command import Runtime, execute
from matchcast.load._consume import SharedSource, run_consumer
from matchcast.load._errors import LoadError
from matchcast.load._live import ROW_KIND, JsonLines, LiveSink, Seconds, TerminalView, follow
from matchcast.load._merge import MergeError, merge_reports, read_reports
from matchcast.load._metrics import RunnerMetrics
from matchcast.load._output import failures, merge_files, nothing_delivered, output, write_csv
from matchcast.load._report import REPORT_FORMAT, build_report, render_table
from matchcast.load._run import (
    ClientFactory,
    ConnectionHealth,
    LoadClient,
    LoadOptions,
    LoadRun,
    Progress,
    probe_filter,
)
from matchcast.load._sender import NowaitPublisher, Sender, SenderStats, submit
from matchcast.load._session import LiveOptions, make_factory
from matchcast.load._stages import StageError, Stages, parse_duration, parse_stages
from matchcast.load._summary import render_summary
from matchcast.load._verify import (
    StateReporter,
    collect_reported_states,
    consumer_state_filter,
    consumer_state_topic,
    verify_states,
)
from matchcast.load._workload import LoadShape, MatchTemplate, format_timestamp, match_ids

__all__ = [
    "CHECK_FIGURES",
    "DEFAULT_DURATION_S",
    "DEFAULT_SPEED",
    "PERCENTILES",
    "REPORT_FORMAT",
    "ROW_KIND",
    "Check",
    "CheckError",
    "ClientFactory",
    "ConnectionHealth",
    "ConsumerAccount",
    "JsonLines",
    "LatencySeries",
    "LiveOptions",
    "LiveSink",
    "LoadArgs",
    "LoadClient",
    "LoadError",
    "LoadOptions",
    "LoadRun",
    "LoadShape",
    "MatchTemplate",
    "MergeError",
    "NowaitPublisher",
    "Plan",
    "Progress",
    "Rates",
    "RunnerMetrics",
    "Runtime",
    "Seconds",
    "Sender",
    "SenderStats",
    "SharedSource",
    "StageError",
    "Stages",
    "StateReporter",
    "StreamStats",
    "TerminalView",
    "build_report",
    "collect_reported_states",
    "consumer_state_filter",
    "consumer_state_topic",
    "decode_histogram",
    "encode_histogram",
    "evaluate_checks",
    "execute",
    "failures",
    "follow",
    "format_timestamp",
    "histogram_summary",
    "make_factory",
    "match_ids",
    "merge_files",
    "merge_reports",
    "new_histogram",
    "nothing_delivered",
    "output",
    "parse_check",
    "parse_duration",
    "parse_probe_fields",
    "parse_stages",
    "plan",
    "probe_filter",
    "rates",
    "read_reports",
    "render_summary",
    "render_table",
    "run_consumer",
    "submit",
    "verify_states",
    "write_chart",
    "write_csv",
]
