"""``%%ask`` / ``%ask`` in a real IPython shell: the value is the AskResult, shown once in
the chosen format; ``{name}`` expansion leaves other braces alone; errors fail the cell;
``%usage --by run`` fits a notebook; ``%config Aklab.*`` defaults."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell

from aklab.errors import AklabError, ConfigError, RoutingError
from aklab.lab import get_lab, set_lab
from aklab.lab._settings import settings
from aklab.lab.magics import UsageError, parse_ask_line
from aklab.lab.result import AskResult
from aklab.lab.session import AskTimeout, Lab
from aklab.llm import ModelConfig


@pytest.fixture
def shell(shell: InteractiveShell) -> Iterator[InteractiveShell]:
    """The shared shell (tests/lab/conftest.py), with the %config settings put back after."""
    yield shell
    for name in ("default_model", "default_team", "default_format", "timeout", "fail_on_notice"):
        setattr(settings(), name, settings().trait_defaults(name))


def run(shell: InteractiveShell, capsys: pytest.CaptureFixture[str], source: str) -> tuple[Any, str]:
    result = shell.run_cell(source)
    assert result.error_in_exec is None, capsys.readouterr().out
    return result.result, capsys.readouterr().out.removeprefix("Out[0]: \n")


def last_sent(text_of: str = "@Human") -> str:
    return next(m.content for m in reversed(get_lab().transcript()) if m.sender and m.sender.name == text_of)


def test_the_value_is_the_ask_result_shown_once_as_markdown(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    result, out = run(shell, capsys, "%%ask\nPlan the next sprint.\n")
    assert isinstance(result, AskResult) and shell.user_ns["_"] is result
    assert result.ask_id == get_lab().last_ask_id and result.totals()["requests"] == 3
    bundle, _ = shell.display_formatter.format(result)
    assert bundle["text/markdown"].startswith("**@Manager** *(response)*\n\nHere is what @Developer came back with")
    # printed once, as the value: no "→" lines printed besides it
    assert out.count("Here is what @Developer came back with") == 1 and "→" not in out
    # the saved text/plain has no ids or times
    assert not re.search(r"[0-9a-f]{32}|\d{2}:\d{2}:\d{2}", bundle["text/plain"])


def test_format_text_and_json_keep_the_result(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    text, out = run(shell, capsys, "%%ask --format text\nShip it.\n")
    assert isinstance(text, AskResult) and out.startswith("@Manager (response):\n")
    bundle, _ = shell.display_formatter.format(text)
    assert "text/markdown" not in bundle
    as_json, out = run(shell, capsys, "%%ask --format json\nShip it.\n")
    assert isinstance(as_json, AskResult) and as_json.ask_id
    shown = json.loads(out)
    assert shown[0]["sender"] == "@Manager" and "ask_id" not in shown[0]  # no ids in the saved output
    bundle, _ = shell.display_formatter.format(as_json)
    assert bundle["application/json"] == shown
    assert as_json.as_json()[0]["ask_id"] == as_json.ask_id  # the value keeps them
    with pytest.raises(UsageError, match="invalid choice: 'yaml'"):
        parse_ask_line("--format yaml hello")


def test_only_defined_names_are_expanded_and_other_braces_stay(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.user_ns["page"] = "the login page"
    run(shell, capsys, '%%ask\nPlan {page}; config {"retries": 3}; keep {missing} and {{page}}.\n')
    assert last_sent() == 'Plan the login page; config {"retries": 3}; keep {missing} and {page}.'
    run(shell, capsys, "%%ask\ndef f(x): return {x: 1}  # {page}\n")
    assert last_sent() == "def f(x): return {x: 1}  # the login page"


def test_the_one_line_ask(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    shell.user_ns["page"] = "the login page"
    run(shell, capsys, "%ask Plan it.")  # the Manager hires @Developer
    result, out = run(shell, capsys, "%ask --format text @Developer Review {page} --bg, please")
    assert isinstance(result, AskResult) and out.startswith("@Developer (response):")
    assert last_sent() == "Review the login page --bg, please"
    assert parse_ask_line("Developer, what now?")[0].agent is None  # without @ it is the question
    # a question mark at the end is a question, not IPython's help lookup
    result, out = run(shell, capsys, "%ask @Developer What is {page}?")
    assert isinstance(result, AskResult) and last_sent() == "What is the login page?"
    _, out = run(shell, capsys, "%%ask\n%ask inside a cell's text stays text?\n")
    assert last_sent() == "%ask inside a cell's text stays text?"
    args, text = parse_ask_line("@QA --timeout 5 test --bg {x}")  # options lead, the rest is the question
    assert (args.agent, args.timeout, args.bg, text) == ("@QA", 5.0, False, "test --bg {x}")


def test_an_ask_that_times_out_fails_the_cell_in_one_line(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    set_lab(Lab("dev-team", model=ModelConfig(demo_latency=2.0)))
    result = shell.run_cell("%%ask --timeout 0.05\nPlan it.\n")
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, AskTimeout)
    assert out.startswith("aklab: the team is still working after 0.05s") and "Traceback" not in out
    assert "its replies keep arriving (%transcript); %stop stops it" in out  # no lab.replies(): a notebook has no lab
    assert out.count("\n") == 1
    assert get_lab().wait(30)


def test_errors_fail_the_cell_and_show_one_line(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    for source, kind in [
        ("%%ask @Ghost\nhello\n", RoutingError),
        ("%ask @Ghost hello", RoutingError),
        ("%usage --by week", UsageError),
        ("%context 'two words'", UsageError),
        ("%aklab model nosuch:model", AklabError),
    ]:
        result = shell.run_cell(source)
        out = capsys.readouterr().out
        assert isinstance(result.error_in_exec, kind), source
        assert out.startswith("aklab: ") and "Traceback" not in out, (source, out)
    _, out = run(shell, capsys, "%ask Still working?")  # the team still answers
    assert "@Manager (response)" in out


def test_a_mistyped_command_fails_the_cell_naming_the_command_and_is_not_sent(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "/hire_membr QA" went to the model as text: SmolLM2 answered it with an essay.
    A word close to one of the agent's commands is a typo; other "/text" still goes."""
    before = len(get_lab().transcript())
    result = shell.run_cell("%ask /hire_membr QA")
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, ConfigError)
    assert out == (
        "aklab: @Manager has no command /hire_membr: did you mean /hire_member? "
        "(/help sent to @Manager lists its commands)\n"
    )
    assert len(get_lab().transcript()) == before  # nothing was sent
    _, out = run(shell, capsys, "%ask /hire_member QA")  # the command itself still runs
    assert "@QA (QA)" in out
    _, out = run(shell, capsys, "%ask /usr/bin/env is where?")  # no command's near miss: to the model
    assert "@Manager (response)" in out


def test_a_model_failure_is_said_once_as_the_agents_notice(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing listening at the server's address (Ollama not started): the cell shows the
    notice "@Manager could not answer: cannot reach the model server ...", and not that
    failure a second time as an "aklab: @Manager: ModelError: ..." line."""
    unreachable = ModelConfig.parse("openai-compatible:nothing", base_url="http://127.0.0.1:9/v1", retries=0)
    set_lab(Lab("dev-team", model=unreachable))
    result = shell.run_cell("%ask What is 2+2?")
    captured = capsys.readouterr()
    assert result.error_in_exec is None
    assert "@Manager could not answer: cannot reach the model server at http://127.0.0.1:9" in captured.out
    assert "ModelError" not in captured.out + captured.err
    assert get_lab().errors() and "ModelError" in get_lab().errors()[0]  # the library still lists it
    assert get_lab().errors(told=False) == []  # unless asked for what the human was not told


def test_with_fail_on_notice_an_ask_that_was_not_ok_shows_its_replies_then_fails_the_cell(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """For a notebook run as a pipeline: the model server is down (through pydantic-ai's
    OpenAI provider), the notice is shown, and the cell fails in one line saying why."""
    from aklab.lab.magics import AskNotOk

    unreachable = ModelConfig.parse("openai-compatible:nothing", base_url="http://127.0.0.1:9/v1", retries=0)
    set_lab(Lab("dev-team", model=unreachable))
    run(shell, capsys, "%config Aklab.fail_on_notice = True")
    result = shell.run_cell("%ask What is 2+2?")
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, AskNotOk) and "Traceback" not in out
    shown, _, last = out.rstrip().rpartition("\n")
    assert "@Manager could not answer: cannot reach the model server at http://127.0.0.1:9" in shown  # replies first
    assert last.startswith("aklab: the ask was not ok (it ended in a notice: @Manager could not answer: cannot reach")
    assert last.endswith("); the cell fails because Aklab.fail_on_notice is set")
    set_lab(None)
    _, out = run(shell, capsys, "%ask Plan it.")  # an ask that went through still passes
    assert "@Manager (response)" in out


def test_usage_by_run_fits_the_notebook_and_the_value_keeps_full_values(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    run(shell, capsys, "%ask Plan it.")
    frame, out = run(shell, capsys, "%usage --by run")
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == list(get_lab().usage(by="run").columns)  # every column
    assert all(len(run_id) == 32 for run_id in frame["run_id"])  # full ids
    assert max(len(line) for line in out.splitlines()) <= 90
    assert out.splitlines()[0].split() == ["run", "agent", "model", "req", "in", "out", "tokens", "cost", "$", "secs"]
    assert frame["run_id"].iloc[0][:8] in out and frame["run_id"].iloc[0] not in out
    html = frame._repr_html_()
    assert frame["run_id"].iloc[0][:8] in html and frame["run_id"].iloc[0] not in html
    derived = frame[["agent", "requests"]]
    assert type(derived) is pd.DataFrame  # derived frames display as usual


def test_usage_by_ask_gives_each_question_with_all_it_cost_and_fits_the_notebook(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    run(shell, capsys, "%ask Plan the login page, with every field it needs and how each is validated.")
    run(shell, capsys, "%ask Short one.")
    frame, out = run(shell, capsys, "%usage --by ask")
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == list(get_lab().usage(by="ask").columns)  # every column
    assert len(frame) == 2 and all(len(ask_id) == 32 for ask_id in frame["ask_id"])
    assert frame["question"].iloc[0].startswith("Plan the login page, with every field")  # whole in the value
    assert frame["agents"].iloc[0] == "@Manager, @Developer"
    per_agent = get_lab().usage()
    assert frame["total_tokens"].sum() == per_agent["total_tokens"].sum()  # every request in one ask
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["ask", "question", "agents"]
    assert max(len(line) for line in lines) <= 110
    assert frame["ask_id"].iloc[0][:8] in out and frame["ask_id"].iloc[0] not in out
    assert "Plan the login page, with ever…" in out and "validated" not in out
    assert "Short one." in out
    html = frame._repr_html_()
    assert frame["ask_id"].iloc[0][:8] in html and frame["ask_id"].iloc[0] not in html


def test_config_sets_the_defaults(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    set_lab(None)
    run(shell, capsys, '%config Aklab.default_model = "demo:demo-large"')
    run(shell, capsys, '%config Aklab.default_format = "text"')
    _, out = run(shell, capsys, "%aklab")
    assert "models: demo:demo-large" in out  # the lab started on the default model
    result, out = run(shell, capsys, "%ask Plan it.")
    assert isinstance(result, AskResult) and "text/markdown" not in shell.display_formatter.format(result)[0]
    shell.run_cell('%config Aklab.default_model = "gpt"')
    assert settings().default_model == "demo:demo-large"  # the bad value was refused
    shell.run_cell("%config Aklab.timeout = -1")
    assert settings().timeout == 300.0
    _, out = run(shell, capsys, "%config Aklab")
    assert "Aklab.default_model" in out and "Aklab.timeout" in out
