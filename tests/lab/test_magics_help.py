"""Help on every magic (``-h``/``--help``, ``%aklab help``, ``%%ask?``), ``%aklab list``,
and tab completion of members, subcommands and option values, in a real IPython shell."""

from __future__ import annotations

import warnings

import pytest
from IPython.core.completer import provisionalcompleter
from IPython.core.interactiveshell import InteractiveShell

from aklab.lab import get_lab
from aklab.lab._magic_show import PROVIDER_KEYS
from aklab.llm.profiles import FAMILY_MODULES

MAGICS = ["%aklab", "%ask", "%stop", "%usage", "%team", "%transcript", "%context"]


def out_of(shell: InteractiveShell, capsys: pytest.CaptureFixture[str], source: str) -> str:
    result = shell.run_cell(source)
    assert result.error_in_exec is None and result.error_before_exec is None, source
    return capsys.readouterr().out


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_every_magic_takes_help(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], magic: str, flag: str
) -> None:
    out = out_of(shell, capsys, f"{magic} {flag}")
    assert "Usage:" in out and magic.lstrip("%") in out
    assert "aklab" not in out.split("\n", 1)[0] or magic == "%aklab"
    import aklab.lab

    assert aklab.lab._lab is None  # help starts no team


def test_the_cell_magic_help_and_the_question_mark(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    out = out_of(shell, capsys, "%%ask --help\nignored\n")
    assert "%%ask [@Agent] [--bg] [--timeout S] [--out VAR] [--format markdown|text|json]" in out
    assert "{{ and }} give { and }" in out and "Examples:" in out
    info = shell.object_inspect("%%ask")
    assert info["found"] and "Examples:" in str(info["docstring"])
    info = shell.object_inspect("%aklab")
    assert info["found"] and "%aklab model provider:model" in str(info["docstring"])
    shell.run_cell("%%ask?")  # IPython's own help: the same docstring, and no ask sent
    assert get_lab().last_ask_id is None


def test_aklab_help_lists_every_magic_with_examples(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    out = out_of(shell, capsys, "%aklab help")
    for magic in ["%aklab", "%%ask / %ask", "%stop", "%usage", "%team", "%transcript", "%context"]:
        assert f"\n  {magic} " in out
    assert "Examples:" in out and "%config Aklab.default_model" in out
    assert "\n  %stop          " in out and "   %stop [@Agent]\n" in out  # not only "%stop" with no agent
    assert "%aklab team|model|dashboard|list|teams|resume|forget|recover|batch ..." in out  # not status alone
    assert out_of(shell, capsys, "%aklab --help").startswith("Start, switch and inspect the lab.\n\nUsage:")


def test_list_names_teams_and_providers_and_whether_keys_are_set_never_their_values(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert set(PROVIDER_KEYS) == set(FAMILY_MODULES)  # a new family says which key it reads
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    out = out_of(shell, capsys, "%aklab list")
    assert secret not in out
    assert "Built-in teams: dev-team" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ")}
    assert set(FAMILY_MODULES) <= set(rows)
    assert rows["openai"][-1] == "yes" and rows["anthropic"][-1] == "no" and rows["demo"][-1] == "-"
    assert rows["local"][1] == "4,096"
    assert "local:smollm2" in out.splitlines()[-1]  # whether aklab can serve it here, or how to install that


def test_list_says_how_local_smollm2_can_run_with_the_local_extra_and_without(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from aklab.errors import ConfigError
    from aklab.llm import local_server

    monkeypatch.setattr(local_server, "require_local_runtime", lambda: None)
    listed = out_of(shell, capsys, "%aklab list")
    assert "extra is installed; a team starts the bundled server" in listed
    assert "local:* replies are capped at 768 tokens and sampled at temperature 0.2 unless" in listed

    def missing() -> None:
        raise ConfigError("llama-cpp-python is not installed")

    monkeypatch.setattr(local_server, "require_local_runtime", missing)
    last = out_of(shell, capsys, "%aklab list").splitlines()[-1]
    assert "not installed here, so a team needs a server of yours" in last
    assert local_server.LOCAL_INSTALL_HINT in last


def complete(shell: InteractiveShell, line: str) -> list[str]:
    """What Tab offers at the end of ``line`` (the API JupyterLab uses)."""
    with warnings.catch_warnings(), provisionalcompleter():
        return [c.text for c in shell.Completer.completions(line, len(line))]


def test_tab_completes_members_subcommands_and_option_values(shell: InteractiveShell) -> None:
    import aklab.lab

    assert complete(shell, "%%ask @De") == ["@Developer"]  # a hireable role; not DeprecationWarning
    assert aklab.lab._lab is None  # completing started no team
    get_lab()
    assert complete(shell, "%%ask @De") == ["@Developer"]
    assert complete(shell, "%%ask @") == ["@Developer", "@Manager", "@QA"]
    assert complete(shell, "%%ask De") == ["Developer"]  # the name rule: @ optional
    assert complete(shell, "%%ask @Manager --f") == ["--format"]
    assert complete(shell, "%%ask --format ") == ["json", "markdown", "text"]
    assert complete(shell, "%ask @Ma") == ["@Manager"]
    assert complete(shell, "%aklab ") == [
        "batch",
        "dashboard",
        "forget",
        "help",
        "list",
        "model",
        "recover",
        "resume",
        "team",
        "teams",
    ]
    assert complete(shell, "%aklab m") == ["model"]
    assert complete(shell, "%aklab team ") == ["dev-team"]
    assert "local:" in complete(shell, "%aklab model ") and "openai:" in complete(shell, "%aklab model op")
    assert complete(shell, "%aklab model local:x --max") == ["--max-tokens"]
    assert complete(shell, "%usage --by ") == ["agent", "ask", "model", "request", "run"]
    assert complete(shell, "%context @M") == ["@Manager"]
    assert complete(shell, "%stop @Q") == ["@QA"]
    assert complete(shell, "%transcript @D") == ["@Developer"]
    assert complete(shell, "%context @Manager --") == ["--help", "--last"]
    assert complete(shell, "%transcript @Developer --l") == ["--last"]
    assert "@Manager" not in complete(shell, "%transcript --last ")  # a number goes there
    assert complete(shell, "%transcript --last 5 @M") == ["@Manager"]
    assert "@Manager" not in complete(shell, "%transcript Manager @")  # one member already named
    # the completion replaces the typed fragment, @ included
    with warnings.catch_warnings(), provisionalcompleter():
        [found] = list(shell.Completer.completions("%%ask @De", 9))
    assert (found.start, found.end, found.text) == (6, 9, "@Developer")
    # elsewhere aklab offers nothing and Python completion is untouched
    assert "DeprecationWarning" in complete(shell, "Deprec")
    assert "@Developer" not in complete(shell, "x = @De")
    assert complete(shell, "%%ask\n@De") == [] or "@Developer" not in complete(shell, "%%ask\n@De")
