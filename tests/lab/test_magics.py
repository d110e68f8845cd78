"""Every magic, in a real IPython shell."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.agent import AgentBusyEvent, BaseAgent
from aklab.core import EventMessage, Message
from aklab.errors import AklabError
from aklab.lab import get_lab, set_lab
from aklab.lab.magics import UsageError, parse_aklab, parse_ask, parse_member, parse_usage
from aklab.lab.result import AskResult
from aklab.lab.session import Lab
from aklab.lab.teams import TeamSpec
from aklab.llm import ModelConfig
from tests.helpers import card


def run(shell: InteractiveShell, capsys: pytest.CaptureFixture[str], source: str) -> tuple[Any, str]:
    result = shell.run_cell(source)
    return result.result, capsys.readouterr().out.removeprefix("Out[0]: \n")


def fails(shell: InteractiveShell, capsys: pytest.CaptureFixture[str], source: str) -> str:
    """Run a cell that must fail with one aklab line (no traceback); that line."""
    result = shell.run_cell(source)
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, AklabError), (source, out)
    assert "Traceback" not in out and out.startswith("aklab: "), out
    return out


def test_ask_then_usage(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    result, out = run(shell, capsys, "%%ask\nPlan the next sprint.\n")
    assert out.startswith("@Manager (response):\nHere is what @Developer came back with")
    assert isinstance(result, AskResult) and shell.user_ns["_"] is result
    frame, _ = run(shell, capsys, "%usage")
    assert isinstance(frame, pd.DataFrame) and list(frame["agent"]) == ["@Manager", "@Developer"]
    by_model, _ = run(shell, capsys, "%usage --by model")
    assert list(by_model["model"]) == ["demo:aklab-demo"]
    live, _ = run(shell, capsys, "%usage --live")
    assert repr(live) == "<UsagePanel: 3 requests by 2 agents>"


def test_ask_expands_variables_and_stores_the_replies(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.user_ns["page"] = "the login page"
    run(shell, capsys, "%%ask --out answers\nPlan {page}.\n")
    answers = shell.user_ns["answers"]
    assert len(answers) == 1 and 'on "Plan the login page."' in answers[0].content


def test_ask_can_address_a_member_and_errors_are_one_line(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    out = fails(shell, capsys, "%%ask @Ghost\nhello\n")
    assert out == "aklab: no team member @Ghost; members: @Human, @Manager\n"
    out = fails(shell, capsys, "%%ask --timeout soon\nhello\n")
    assert out == "aklab: --timeout must be a positive number of seconds, e.g. --timeout 60 (got 'soon')\n"
    out = fails(shell, capsys, "%%ask\n   \n")
    assert out == "aklab: nothing to ask: the message is empty\n"


def test_bad_usage_arguments_print_the_usage(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    out = fails(shell, capsys, "%usage --by day")
    assert "usage: %usage [--by {agent,run,model,ask,request}] [--live]" in out


def test_status_team_transcript_and_context(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run(shell, capsys, "%aklab")
    assert out.startswith("team 'dev-team', entry @Manager\nmembers: @Human, @Manager\nmodels: demo:aklab-demo")
    run(shell, capsys, "%%ask\nShip it.\n")
    _, out = run(shell, capsys, "%team")
    assert out == "@Human (Human)\n@Manager (Manager)\n@Developer (Developer)\n"
    _, out = run(shell, capsys, "%transcript @Developer")
    assert out.splitlines() == [
        "@Manager → @Developer (request): Ship it.",
        '@Developer → @Manager (response): Developer result for "Ship it.": (+3 lines)',
    ]
    _, out = run(shell, capsys, "%context @Developer")
    assert out.startswith("── @Developer\n**Context update 1** — current state.")
    _, out = run(shell, capsys, "%context @Nobody")
    assert out == "(no context updates of @Nobody: no such member; members: @Human, @Manager, @Developer)\n"
    _, by_name = run(shell, capsys, "%transcript Developer")
    assert by_name == run(shell, capsys, "%transcript @Developer")[1]  # one member-name rule
    _, out = run(shell, capsys, "%context Developer")
    assert out.startswith("── @Developer\n**Context update 1**")


def test_a_transcript_line_is_the_first_line_of_text_and_counts_the_rest() -> None:
    from aklab.lab._magic_show import transcript_line

    assert transcript_line("Ship it.") == "Ship it."
    assert transcript_line("```\n# Hello, World!\n```") == "# Hello, World!"  # a code answer: not "```"
    assert transcript_line("```python\ndef f():\n    return 1\n```\n\nDone.") == "def f(): (+2 lines)"
    assert transcript_line("\n\nPlan:\n1. a\n") == "Plan: (+1 line)"
    assert transcript_line("```") == "```"
    assert transcript_line("") == ""


def test_switching_team_and_model(shell: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    team_file = tmp_path / "solo.toml"
    team_file.write_text('name = "solo"\nentry = "Writer"\n[[roles]]\nrole = "Writer"\nprompt = "You are a Writer."\n')
    _, out = run(shell, capsys, f"%aklab team {team_file}")
    assert out.startswith("team 'solo', entry @Writer\nmembers: @Human, @Writer")
    _, out = run(shell, capsys, "%aklab model demo:demo-large")
    assert "models: demo:demo-large" in out
    _, out = run(shell, capsys, "%%ask\nWrite a haiku.\n")
    assert out.startswith('@Writer (response):\nWriter result for "Write a haiku."')
    out = fails(shell, capsys, "%aklab team nowhere")
    assert out == "aklab: no built-in team 'nowhere'; choose one of: dev-team\n"
    out = fails(shell, capsys, "%aklab model gpt")
    assert out.startswith("aklab: model spec 'gpt' must look like 'provider:model'")
    out = fails(shell, capsys, "%aklab frobnicate")
    assert "usage: %aklab [team NAME|PATH | model provider:model [options] | dashboard | list | teams | resume" in out


def test_a_background_ask_can_be_stopped(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the model call below blocks its thread and cannot be interrupted: %stop says so after its wait
    monkeypatch.setattr("aklab.lab.magics.STOP_SETTLE", 0.2)
    release, entered = threading.Event(), threading.Event()

    async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        entered.set()
        release.wait(10)  # blocks the run's event loop: the cancel cannot land before this returns
        args = {"messages": [{"recipient": "@Human", "message_type": "response", "message": "too late"}]}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(args))])

    set_lab(Lab(TeamSpec("slow", [card("Worker", model=FunctionModel(slow))], "Worker")))
    lab = get_lab()
    busy = threading.Event()

    def on_record(record: Message) -> None:
        if isinstance(record, EventMessage) and isinstance(record.event, AgentBusyEvent) and record.event.busy:
            busy.set()

    lab.recorder.listeners.append(on_record)
    _, out = run(shell, capsys, "%%ask --bg --out pending\nwork\n")
    assert out == "Sent to @Worker; the team works in the background. %stop stops it.\n"
    assert busy.wait(10) and entered.wait(10)
    _, out = run(shell, capsys, "%stop")
    assert out == (
        "Stopped: interrupted the run of @Worker.\n@Worker still winding down after 0.2 s (a tool or model call "
        "that does not yield to a stop); it ends when that call returns. %aklab shows who is busy.\n"
    )
    release.set()
    replies = shell.user_ns["pending"].wait(10)
    assert isinstance(replies, AskResult) and [r.content for r in replies] == ["Run interrupted. (@Worker)"]
    _, out = run(shell, capsys, "%stop")
    assert out == "Nothing was running.\n"
    out = fails(shell, capsys, "%stop @Ghost")
    assert out.startswith("aklab: no team member @Ghost")


def test_argument_parsing_is_separate_from_the_work() -> None:
    args = parse_ask("@Developer --timeout 5 --bg --out x")
    assert (args.agent, args.timeout, args.bg, args.out) == ("@Developer", 5.0, True, "x")
    assert parse_ask("").agent is None
    assert parse_usage("--by run --live") == ("run", True)
    assert parse_member("@A", "%stop") == "@A" and parse_member("", "%stop") is None
    assert parse_aklab("") == ("status", None) and parse_aklab("team x.toml") == ("team", "x.toml")
    assert parse_ask("Developer").agent == "@Developer"  # with or without @, as lab.member()
    assert parse_member("Manager", "%context") == "@Manager"
    with pytest.raises(UsageError, match="expected a member name like @Developer"):
        parse_ask("'De veloper'")
    with pytest.raises(UsageError, match="--out needs a variable name"):
        parse_ask("--out 1x")
    with pytest.raises(UsageError, match="positive"):
        parse_ask("--timeout 0")


def test_the_dashboard_magic_returns_the_live_panels(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    board, _ = run(shell, capsys, "%aklab dashboard")
    assert repr(board) == "<Dashboard: roster, transcript, context, usage>"
    again, _ = run(shell, capsys, "%aklab dashboard")
    assert again is board  # one per lab, reused


class FailingAgent(BaseAgent):
    def on_start(self) -> None:
        super().on_start()
        raise RuntimeError("no tools today")


def test_a_team_that_cannot_start_is_one_line_and_the_running_team_stays(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AKLAB_TRUSTED_MODULES", "tests")  # the failing agent class lives in the tests
    run(shell, capsys, "%aklab")
    before = get_lab()
    bad_model = tmp_path / "bad_model.toml"
    bad_model.write_text('name = "t"\nentry = "Writer"\n[[roles]]\nrole = "Writer"\nmodel = "nosuch:model"\n')
    out = fails(shell, capsys, f"%aklab team {bad_model}")
    assert out.startswith("aklab: unknown model provider 'nosuch'") and out.count("\n") == 1
    failing = tmp_path / "failing.toml"
    failing.write_text(
        'name = "t"\nentry = "Writer"\n[[roles]]\nrole = "Writer"\n'
        f'agent_class = "{FailingAgent.__module__}.FailingAgent"\n'
    )
    out = fails(shell, capsys, f"%aklab team {failing}")
    assert out == "aklab: @Writer failed to start: RuntimeError: no tools today\n"
    assert get_lab() is before
    _, out = run(shell, capsys, "%%ask\nShip it.\n")
    assert out.startswith("@Manager (response):")


def test_load_ext_imports_neither_pydantic_ai_nor_pandas() -> None:
    """``%load_ext aklab`` stays instant (bench B4): the heavy imports are left to the
    background warm-up (switched off here) and to the first magic that needs them."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "import aklab.lab\n"
        "aklab.lab._warm_up = lambda: None\n"
        "InteractiveShell.instance().run_line_magic('load_ext', 'aklab')\n"
        "print(sorted(m for m in ('pydantic_ai', 'pandas', 'pykka', 'ipywidgets') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_switching_the_team_while_it_works_says_which_ask_it_stopped(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """`%aklab model` (or team, resume) closes the running team, which interrupts its runs:
    the user is told which question went unanswered, instead of finding out later."""
    set_lab(Lab("dev-team", model=ModelConfig(demo_latency=30.0)))  # thinks long enough to be switched
    run(shell, capsys, "%ask --bg Plan the release.")
    _, out = run(shell, capsys, "%aklab model demo:aklab-demo")
    assert out.startswith(
        "note: the previous team was still working on 'Plan the release.'; the switch stopped it "
        "(ask again for an answer)\nteam 'dev-team'"
    )
    _, out = run(shell, capsys, "%aklab model demo:aklab-demo")  # an idle team: nothing to say
    assert out.startswith("team 'dev-team'")


def test_transcript_and_context_of_a_name_that_is_no_member_say_so(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    set_lab(Lab("dev-team"))
    _, out = run(shell, capsys, "%transcript @Nobdy")
    assert out == "(no messages of @Nobdy: no such member; members: @Human, @Manager)\n"
    _, out = run(shell, capsys, "%context Nobdy")
    assert out == "(no context updates of @Nobdy: no such member; members: @Human, @Manager)\n"
    _, out = run(shell, capsys, "%transcript @Manager")
    assert out == "(no messages of @Manager yet)\n"
