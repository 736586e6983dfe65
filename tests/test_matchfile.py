"""The semifinal is data: a validated match file whose facts say where they come from."""

import json
import re
from pathlib import Path

import pytest
import yaml

from events import MatchFileError, Period
from simulator import GoalIncident, PossessionIncident, bundled_path, load_match, resolve_matches

SEMI = bundled_path("semifinal")


def test_the_bundled_semifinal_holds_the_article_facts() -> None:
    m = load_match(SEMI)
    assert (m.home.code, m.home.name, m.home.manager) == ("ARG", "Argentina", "Lionel Scaloni")
    assert (m.away.code, m.away.name, m.away.manager) == ("ENG", "England", "Thomas Tuchel")
    assert m.venue is not None and m.venue.name == "Mercedes-Benz Stadium"
    assert m.venue.city == "Atlanta"
    assert str(m.kickoff.date) == "2026-07-15"
    assert m.competition.stage == "Semi-final"
    goals = [i for i in m.timeline if isinstance(i, GoalIncident)]
    assert [(g.clock.label, g.team, g.scorer, g.method) for g in goals] == [
        ("55'", "ENG", "Anthony Gordon", "open_play"),
        ("86'", "ARG", "Enzo Fernández", "header"),
        ("90+2'", "ARG", "Lautaro Martínez", "header"),
    ]
    assert "cross from the right" in (goals[1].detail or "")
    assert "five yards" in (goals[2].detail or "")
    (poss,) = [i for i in m.timeline if isinstance(i, PossessionIncident)]
    assert poss.share["ENG"] == 12
    assert dict(m.result.score) == {"ARG": 2, "ENG": 1}


def test_every_fact_says_whether_it_is_from_the_article_or_assumed() -> None:
    m = load_match(SEMI)
    facts = [m.competition, m.kickoff, m.home, m.away, m.result, *m.periods, *m.timeline]
    assert m.venue is not None
    facts.append(m.venue)
    assert all(f.source in ("article", "assumption") for f in facts)
    assert {p.source for p in m.periods} == {"assumption"}  # the article gives no added time
    assert m.kickoff.source == "assumption"  # the hour is ours
    told = [i for i in m.timeline if i.type in ("goal", "possession")]
    assert len(told) == 4 and all(i.source == "article" for i in told)
    # The full feed is the article's only as far as it goes: the rest is assumed, with why.
    assumed = [i for i in m.timeline if i not in told]
    assert assumed and all(i.source == "assumption" and i.note for i in assumed)


def _write(tmp_path: Path, data: object, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


def _semi_data() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load(SEMI.read_text())


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["timeline"][0].update(minute="fifty"),
            "timeline.0.goal.minute: Input should be a valid integer",
        ),
        (lambda d: d["home"].update(code="argentina"), "home.code: String should match pattern"),
        (
            lambda d: d["timeline"][0].update(team="FRA"),
            "timeline.0.team: FRA is neither ARG nor ENG",
        ),
        (
            lambda d: d["result"].update(score={"ARG": 3, "ENG": 1}),
            "says ARG 3-1 ENG but the goals in the timeline add up to ARG 2-1 ENG",
        ),
        (lambda d: d["timeline"][3].update(added=9), "past the 5 added minute(s) of 2H"),
        (lambda d: d.pop("home"), "home: Field required"),
        (
            lambda d: d["timeline"].insert(
                4, {"type": "red_card", "minute": 3, "source": "assumption"}
            ),
            "timeline.4: Input tag 'red_card'",
        ),
    ],
)
def test_a_bad_file_names_the_file_the_field_and_what_was_expected(
    tmp_path: Path, mutate, expected: str
) -> None:  # type: ignore[no-untyped-def]
    data = _semi_data()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(MatchFileError) as info:
        load_match(path)
    assert info.value.path == path
    assert str(path) in str(info.value)
    plain = [re.sub(r" \(line \d+, column \d+\)", "", p) for p in info.value.problems]
    assert any(expected in p for p in plain), info.value.problems


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_bad_field_names_its_line_and_column_in_the_file(tmp_path: Path, suffix: str) -> None:
    text = SEMI.read_text()
    if suffix == ".json":
        text = json.dumps(yaml.safe_load(text), indent=2, default=str)
    lines = text.splitlines()
    row = next(
        i for i, line in enumerate(lines) if line.strip().startswith(("minute:", '"minute":'))
    )
    lines[row] = lines[row].replace("55", '"fifty"' if suffix == ".json" else "fifty", 1)
    column = lines[row].index("fifty")
    path = tmp_path / f"m{suffix}"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MatchFileError) as info:
        load_match(path)
    (problem,) = info.value.problems
    value_at = column - 1 if suffix == ".json" else column  # a JSON string starts at its quote
    assert problem.startswith(
        f"timeline.0.goal.minute (line {row + 1}, column {value_at + 1}): Input should be"
    ), problem


def test_a_missing_field_names_the_line_of_the_mapping_it_is_missing_from(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("match_id: x\nhome:\n  code: ARG\n")
    with pytest.raises(MatchFileError) as info:
        load_match(path)
    assert "home.name (line 3, column 3): Field required" in info.value.problems
    assert "competition: Field required" in info.value.problems  # the top level: no line


def test_a_whole_file_rule_names_the_line_of_the_field_it_blames(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(SEMI.read_text().replace("    team: ENG\n", "    team: FRA\n", 1))
    with pytest.raises(MatchFileError) as info:
        load_match(path)
    row = path.read_text().splitlines().index("    team: FRA") + 1
    assert f"timeline.0.team (line {row}, column 11): FRA is neither ARG nor ENG" in (
        info.value.problems
    )


def test_unreadable_and_missing_files_are_match_file_errors(tmp_path: Path) -> None:
    with pytest.raises(MatchFileError, match="no such file"):
        load_match(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("teams: [unclosed")
    with pytest.raises(MatchFileError, match="not valid YAML"):
        load_match(bad)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{")
    with pytest.raises(MatchFileError, match="not valid JSON"):
        load_match(bad_json)
    listy = _write(tmp_path, [1, 2])
    with pytest.raises(MatchFileError, match="expected a mapping"):
        load_match(listy)


def test_any_match_file_in_the_format_is_accepted_json_too(tmp_path: Path) -> None:
    import json

    data = _semi_data()
    data["match_id"] = "friendly-1"
    data["timeline"] = [t for t in data["timeline"] if t["type"] != "goal"]
    data["result"]["score"] = {"ARG": 0, "ENG": 0}
    data["competition"]["knockout"] = False
    path = tmp_path / "friendly.json"
    path.write_text(json.dumps(data, default=str))
    (m,) = resolve_matches(str(path))
    assert m.match_id == "friendly-1"
    assert m.winner is None
    assert [p.period for p in m.periods] == [Period.FIRST_HALF, Period.SECOND_HALF]


def test_an_unknown_spec_lists_what_exists() -> None:
    with pytest.raises(MatchFileError, match="semifinal"):
        resolve_matches("no-such-match")
