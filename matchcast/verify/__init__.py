"""Grade any consumer: seeded scenarios of faults, its reports against the truth, a scorecard.

``matchcast verify --consumer ID`` plays a battery of short scenarios (:data:`SCENARIOS`),
each a named fault on a match of its own under the root ``matchcast-verify``, waits for the
consumer's report on ``{root}/consumers/{ID}/state/{match_id}`` after each, and compares it
with the truth. See docs/verify.md.
"""

from matchcast.verify._compare import (
    IGNORED_FIELDS,
    Difference,
    Divergence,
    agree,
    arrived,
    differences,
    first_divergence,
    state_fields,
)
from matchcast.verify._feed import Played, Sent, Step, Tap, play
from matchcast.verify._output import (
    REPORT_FORMAT,
    cause_line,
    junit_xml,
    report_json,
    scorecard,
    summary,
)
from matchcast.verify._reports import MAX_REPORTS, Report, Reports, read_report
from matchcast.verify._run import (
    DEFAULT_SPEED,
    SETTLE_S,
    TIMEOUT_S,
    Client,
    ScenarioResult,
    Verdict,
    VerifyOptions,
    run_verify,
)
from matchcast.verify._scenarios import (
    MATCH_FILE,
    SCENARIOS,
    Scenario,
    chaos_seed,
    scenario_match,
    select_scenarios,
)

__all__ = [
    "DEFAULT_SPEED",
    "IGNORED_FIELDS",
    "MATCH_FILE",
    "MAX_REPORTS",
    "REPORT_FORMAT",
    "SCENARIOS",
    "SETTLE_S",
    "TIMEOUT_S",
    "Client",
    "Difference",
    "Divergence",
    "Played",
    "Report",
    "Reports",
    "Scenario",
    "ScenarioResult",
    "Sent",
    "Step",
    "Tap",
    "Verdict",
    "VerifyOptions",
    "agree",
    "arrived",
    "cause_line",
    "chaos_seed",
    "differences",
    "first_divergence",
    "junit_xml",
    "play",
    "read_report",
    "report_json",
    "run_verify",
    "scenario_match",
    "scorecard",
    "select_scenarios",
    "state_fields",
    "summary",
]
