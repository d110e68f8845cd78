"""Scenarios from every shape and file, and checks that score answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aklab.batch import Scenario, load_scenarios
from aklab.batch._scenario import normalize
from aklab.batch.checks import CheckContext, contains, equals, matches, score
from aklab.errors import ConfigError
from tests.batch.helpers import WordCount


def test_questions_turn_lists_and_scenarios_become_numbered_scenarios() -> None:
    items = normalize(["one?", ["two", "and three"], Scenario("mine", "four?", metadata={"k": 1})])
    assert [s.id for s in items] == ["s1", "s2", "mine"]
    assert items[1].turns == ("two", "and three")
    assert items[2].metadata == {"k": 1}


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ([], "no scenarios"),
        ([Scenario("a", "x"), Scenario("a", "y")], "appears twice"),
        (["ok", 3], "got int"),
        ("just one question", "one string"),
        ([["turn", ""]], "non-empty"),
    ],
)
def test_bad_scenarios_are_refused_in_one_line(given: object, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        normalize(given)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_a_check_must_be_callable_or_an_evaluator() -> None:
    with pytest.raises(ConfigError, match="check must be"):
        Scenario("x", "q", check="yes")  # type: ignore[arg-type]


def test_csv_jsonl_and_yaml_files_load_the_same_scenarios(tmp_path: Path) -> None:
    csv_file = tmp_path / "s.csv"
    csv_file.write_text("id,question,expected,topic\nlogin,Plan the login page,plan,auth\nmulti,,,ui\n")
    with pytest.raises(ConfigError, match=r"s\.csv.*'multi'.*question"):
        load_scenarios(csv_file)
    csv_file.write_text(
        'id,question,turns,expected,topic\nlogin,Plan the login page,,plan,auth\nm,,"[""a"", ""b""]",,ui\n'
    )
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text(
        json.dumps({"id": "login", "question": "Plan the login page", "expected": "plan", "topic": "auth"})
        + "\n\n"
        + json.dumps({"id": "m", "turns": ["a", "b"], "topic": "ui"})
        + "\n"
    )
    yaml_file = tmp_path / "s.yaml"
    yaml_file.write_text(
        "scenarios:\n"
        "  - {id: login, question: Plan the login page, expected: plan, topic: auth}\n"
        "  - {id: m, turns: [a, b], topic: ui}\n"
    )
    loaded = [load_scenarios(p) for p in (csv_file, jsonl, yaml_file)]
    for items in loaded:
        assert [(s.id, s.turns, s.expected, dict(s.metadata)) for s in items] == [
            ("login", ("Plan the login page",), "plan", {"topic": "auth"}),
            ("m", ("a", "b"), None, {"topic": "ui"}),
        ]
    assert [s.id for s in normalize(str(yaml_file))] == ["login", "m"]


def test_unreadable_or_missing_files_say_which_and_why(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "fine", "question": "hi"}\n\n{not json\n')
    with pytest.raises(ConfigError, match=r"^scenario file 'bad\.jsonl' cannot be read: line 3, column 2: Expecting"):
        load_scenarios(bad)  # the file's line, not a column of the line's own JSON
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("- id: a\n  question: hi\n- id: b\n  turns: [\n")
    with pytest.raises(ConfigError, match=r"^scenario file 'bad\.yaml' cannot be read: line 5: "):
        load_scenarios(bad_yaml)
    renamed = tmp_path / "renamed.csv"
    renamed.write_text("id,prompt\nq1,hello\n")
    with pytest.raises(ConfigError, match=r"scenario 'q1': give a 'question' or 'turns' field \(it has: id, prompt\)"):
        load_scenarios(renamed)  # what the file has instead, so a renamed column is seen at once
    with pytest.raises(ConfigError, match="no scenario file"):
        load_scenarios(tmp_path / "missing.csv")
    odd = tmp_path / "s.txt"
    odd.write_text("x")
    with pytest.raises(ConfigError, match=r"use \.csv, \.jsonl"):
        load_scenarios(odd)


def test_a_csv_row_with_more_cells_than_the_header_is_refused_not_cut(tmp_path: Path) -> None:
    """An unquoted comma in a question put the rest in cells past the header, which were
    dropped: "Plan the login page, then test it" ran as "Plan the login page"."""
    path = tmp_path / "evals.csv"
    path.write_text("id,question,expected\nq1,Plan the search box,steps\nq2,Plan the login page, then test it,steps\n")
    with pytest.raises(ConfigError, match=r"^scenario file 'evals\.csv': line 3 has 4 cells where the header has 3 "):
        load_scenarios(path)
    path.write_text('id,question,expected\nq2,"Plan the login page, then test it",steps\n')
    assert load_scenarios(path)[0].turns == ("Plan the login page, then test it",)


def test_a_malformed_turns_cell_or_metadata_is_a_config_error_naming_the_scenario(tmp_path: Path) -> None:
    """They raised a bare JSONDecodeError / ValueError, naming neither the file nor the row."""
    path = tmp_path / "evals.csv"
    path.write_text('id,turns\nq1,"[""Plan it"", ""Test it"""\n')
    not_json = r"^scenario file 'evals\.csv': scenario 'q1': its turns .* are not a JSON list"
    with pytest.raises(ConfigError, match=not_json):
        load_scenarios(path)
    meta = tmp_path / "evals.yaml"
    meta.write_text("- id: a\n  question: Plan A\n  metadata: oops\n")
    with pytest.raises(ConfigError, match=r"^scenario file 'evals\.yaml': scenario 'a': metadata must be a mapping"):
        load_scenarios(meta)


def test_checks_score_answers_as_floats() -> None:
    ctx = CheckContext(("q",), "The answer is 42.", expected_output="42", metadata={})
    assert score(None, ctx.output, ctx) == 1.0  # expected alone: contains
    assert score(None, "nothing", CheckContext(("q",), "nothing")) is None
    assert score(contains("ANSWER"), ctx.output, ctx) == 1.0
    assert score(contains("ANSWER", case=True), ctx.output, ctx) == 0.0
    assert score(equals(" the answer is 42. "), ctx.output, ctx) == 1.0
    assert score(matches(r"\b\d+\b"), ctx.output, ctx) == 1.0
    assert score(lambda a: 0.25, ctx.output, ctx) == 0.25
    assert score(WordCount(minimum=10), ctx.output, ctx) == 0.5  # mean of False and 1.0
    with pytest.raises(TypeError, match="return a bool or a number"):
        score(lambda a: "yes", ctx.output, ctx)
