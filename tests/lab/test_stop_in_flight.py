"""Stop abandons the HTTP request in flight, on pydantic-ai's real OpenAI provider over loopback."""

from __future__ import annotations

import json
import threading
import time

import pytest

from aklab.core import EventMessage, Message
from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from aklab.llm.streaming import OutputStreamEvent
from tests.fakeserver import FakeOpenAI, echo, hang, stall, text

SOLO = {"name": "solo", "entry": "Solo", "roles": [{"role": "Solo", "prompt": "You are Solo."}]}


@pytest.mark.parametrize("mode", ["prompted", "tool"])
def test_stop_while_the_server_hangs_is_idle_within_half_a_second(fake_openai: FakeOpenAI, mode: str) -> None:
    fake_openai.default = echo
    fake_openai.push(hang())
    cfg = ModelConfig(
        provider="openai-compatible", model="fake", base_url=fake_openai.url, timeout=30, retries=0, output_mode=mode
    )
    lab = Lab(team_from_dict(SOLO), model=cfg)
    try:
        lab.send("What is 2+2?")
        assert fake_openai.wait_hanging(5), "the request never reached the server"
        started = time.monotonic()
        assert lab.stop() == ["@Solo"]
        assert lab.wait(5)
        assert time.monotonic() - started <= 0.5, "stop waited for the hanging request"
        assert [m.content for m in lab.replies()] == ["Run interrupted. (@Solo)"]
        usage = lab.usage(by="request")
        assert list(usage["requests"]) == [1] and not usage["ok"].iloc[0]  # sent, counted, size unknown
        fake_openai.push(text("4"))
        assert [m.content for m in lab.ask("Again: what is 2+2?", timeout=10)] == ["4"]
    finally:
        fake_openai.release()
        lab.close()


def test_the_stop_magic_returns_with_the_team_settled(
    fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """`%stop` waits for the run it interrupted to end: the next cell sees nobody busy and the
    stopped request counted, not a member still winding down."""
    from IPython.core.interactiveshell import InteractiveShell

    from aklab.lab import get_lab, set_lab

    fake_openai.push(hang())
    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext aklab")
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, timeout=30, retries=0)
    set_lab(Lab(team_from_dict(SOLO), model=cfg))
    try:
        lab = get_lab()
        shell.run_cell("%ask --bg What is 2+2?")
        assert fake_openai.wait_hanging(5), "the request never reached the server"
        capsys.readouterr()
        shell.run_cell("%stop")
        assert capsys.readouterr().out == "Stopped: interrupted the run of @Solo.\n"
        assert lab.busy() == []
        assert list(lab.usage(by="request")["requests"]) == [1]
    finally:
        fake_openai.release()
        set_lab(None)


def test_stopping_one_agent_interrupts_its_run_or_says_it_had_none(
    fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """`%stop @Agent` reports an interrupted run only when there was one in flight."""
    from IPython.core.interactiveshell import InteractiveShell

    from aklab.lab import set_lab

    fake_openai.default = echo
    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext aklab")
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, timeout=30, retries=0)
    lab = Lab(team_from_dict(SOLO), model=cfg)
    set_lab(lab)
    try:
        capsys.readouterr()
        shell.run_cell("%stop @Solo")
        assert capsys.readouterr().out == "Nothing was stopped: @Solo had no run in flight.\n"
        idle = lab.stop("@Solo")
        assert (list(idle), idle.idle) == ([], ["@Solo"])

        fake_openai.push(hang())
        lab.send("What is 2+2?")
        assert fake_openai.wait_hanging(5), "the request never reached the server"
        shell.run_cell("%stop @Solo")
        assert capsys.readouterr().out == "Stopped: interrupted the run of @Solo.\n"
        assert lab.wait(5)
        assert [m.content for m in lab.replies()] == ["Run interrupted. (@Solo)"]

        capsys.readouterr()
        shell.run_cell("%stop @Solo")  # the run has ended: nothing to stop again
        assert capsys.readouterr().out == "Nothing was stopped: @Solo had no run in flight.\n"
    finally:
        fake_openai.release()
        set_lab(None)


@pytest.mark.parametrize("how", ["stop", "interrupt", "/stop"])
def test_stop_while_a_stream_is_arriving_abandons_it_and_delivers_none_of_it(fake_openai: FakeOpenAI, how: str) -> None:
    """Tool mode streams (prompted mode's requests do not): the server has sent part of the
    output tool's arguments and holds the rest. Once the agent has read them (a draft of the
    message shows), stopping (``lab.stop``; ``lab.interrupt``, which also waits for the team
    to settle; or the human's ``/stop`` to the agent, a cancel that overtakes the mailbox)
    ends the stream at once, and what had arrived is never delivered."""
    half = {"recipient": "@Human", "message_type": "response", "message": "HALF WRITTEN " + "and more " * 6}
    fake_openai.push(stall(tool_args=json.dumps({"messages": [half]})[:-3]))
    cfg = ModelConfig(
        provider="openai-compatible", model="fake", base_url=fake_openai.url, timeout=30, retries=0, output_mode="tool"
    )
    drafted = threading.Event()

    def watch(record: Message) -> None:
        if isinstance(record, EventMessage) and isinstance(record.event, OutputStreamEvent):
            if record.event.text.startswith("HALF"):
                drafted.set()

    lab = Lab(team_from_dict(SOLO), model=cfg, store=False)
    lab.recorder.listeners.append(watch)
    try:
        lab.send("What is 2+2?")
        assert drafted.wait(5), "the agent never read the streamed arguments"
        assert fake_openai.wait_hanging(5) and fake_openai.bodies[0]["stream"] is True
        started = time.monotonic()
        if how == "/stop":
            lab.send("/stop", to="@Solo")
        else:
            assert (lab.stop() if how == "stop" else lab.interrupt()) == ["@Solo"]
        assert lab.wait(5)
        assert time.monotonic() - started <= 0.5, "stop waited for the stalled stream"
        assert [m.content for m in lab.replies()] == ["Run interrupted. (@Solo)"]
        assert not any("HALF" in m.content for m in lab.transcript())
        assert fake_openai.wait_for(lambda f: f.hanging == 0), "the client never hung up"
        fake_openai.push(text("4"))
        assert [m.content for m in lab.ask("Again: what is 2+2?", timeout=10)] == ["4"]
    finally:
        fake_openai.release()
        lab.close()
