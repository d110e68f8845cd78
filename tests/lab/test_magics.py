"""The magics, in a real IPython shell."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell

from aklab.lab import set_lab
from aklab.lab.magics import UsageError, parse_ask, parse_usage


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext aklab")
    yield ip
    set_lab(None)


def test_ask_then_usage_in_a_shell(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    shell.run_cell("%%ask\nPlan the next sprint.\n")
    out = capsys.readouterr().out
    assert out.startswith("@Manager → @Human (response):\nHere is what @Developer came back with")
    result = shell.run_cell("%usage")
    assert isinstance(result.result, pd.DataFrame)
    assert list(result.result["agent"]) == ["@Manager", "@Developer"]
    by_model = shell.run_cell("%usage --by model").result
    assert list(by_model["model"]) == ["aklab-demo"]


def test_ask_can_address_a_member_and_errors_are_one_line(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.run_cell("%%ask @Ghost\nhello\n")
    assert capsys.readouterr().out == "aklab: no team member @Ghost; members: @Human, @Manager\n"
    shell.run_cell("%%ask --timeout soon\nhello\n")
    out = capsys.readouterr().out
    assert out.startswith("aklab: argument --timeout: invalid float value: 'soon'\nusage: %%ask")


def test_bad_usage_arguments_print_the_usage(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    assert shell.run_cell("%usage --by day").result is None
    assert "usage: %usage [--by {agent,run,model,request}]" in capsys.readouterr().out


def test_argument_parsing_is_separate_from_the_work() -> None:
    args = parse_ask("@Developer --timeout 5")
    assert (args.agent, args.timeout) == ("@Developer", 5.0)
    assert parse_ask("").agent is None
    assert parse_usage("--by run") == "run"
    with pytest.raises(UsageError, match="expected @Member"):
        parse_ask("Developer")
