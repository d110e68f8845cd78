from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import ClassVar

import pandas as pd
import pykka
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.agent import AgentBusyEvent, BaseAgent
from aklab.core import EventMessage, Message
from aklab.errors import ActorGoneError, ConfigError, RoutingError
from aklab.lab.frames import USAGE_COLUMNS, usage_frame
from aklab.lab.session import Lab
from aklab.lab.teams import TeamSpec
from aklab.llm import LlmUsageEvent, ModelConfig
from tests.helpers import card


@pytest.fixture
def lab() -> Iterator[Lab]:
    with Lab() as lab:
        yield lab


def test_ask_returns_what_reached_the_human_and_the_transcript_has_every_hop(lab: Lab) -> None:
    [reply] = lab.ask("Plan the login page", timeout=20)
    assert reply.sender is not None and reply.sender.name == "@Manager"
    hops = [(m.sender.name, m.recipient.name, m.type) for m in lab.transcript()]  # type: ignore[union-attr]
    assert hops == [
        ("@Human", "@Manager", "request"),
        ("@Manager", "@Developer", "request"),
        ("@Developer", "@Manager", "response"),
        ("@Manager", "@Human", "response"),
    ]


def test_a_long_session_keeps_delegating_after_old_turns_are_folded(lab: Lab) -> None:
    """After about six asks the Manager's oldest turns are folded into a digest, with the
    context update that listed the roles it can hire. The roles must come back: every ask
    of three rounds is answered by the specialist it names."""
    questions = {
        "Plan the login page.": "@Developer",
        "Plan the search box.": "@Developer",
        "Plan the settings screen.": "@Developer",
        "Plan the onboarding emails.": "@Developer",
        "Ask QA to test the login page.": "@QA",
    }
    for _ in range(3):
        for question, specialist in questions.items():
            [reply] = lab.ask(question, timeout=20)
            assert reply.content.startswith(f"Here is what {specialist} came back with"), (question, reply.content)


def test_a_listener_can_send_without_stalling_the_team(lab: Lab) -> None:
    """send() waits for the human's actor to store the message, except from a listener: it is
    fed while a record is delivered (on the human's thread, or a member's that delivers the
    records queued meanwhile), and waiting there would stall the team: there it queues."""
    from aklab.core import SentMessage

    followed = threading.Event()

    def follow_up(record: Message) -> None:
        first = isinstance(record, SentMessage) and record.message.content == "Plan the login page"
        if first and not followed.is_set() and record.recipient is not None and record.recipient.name == "@Manager":
            followed.set()
            lab.send("And the search box")

    lab.recorder.listeners.append(follow_up)
    lab.send("Plan the login page")
    assert followed.wait(10) and lab.wait(20)
    asked = [m.content for m in lab.transcript() if m.sender is not None and m.sender.name == "@Human"]
    assert asked == ["Plan the login page", "And the search box"]
    assert len(lab.replies()) == 2


def test_usage_has_one_row_per_agent_with_tokens(lab: Lab) -> None:
    lab.ask("Plan the login page", timeout=20)
    frame = lab.usage()
    assert list(frame.columns) == [
        "agent",
        "role",
        "model",
        "requests",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cost_usd",
    ]
    assert list(frame["agent"]) == ["@Manager", "@Developer"]
    assert list(frame["requests"]) == [2, 1]
    assert (frame["total_tokens"] == frame["input_tokens"] + frame["output_tokens"]).all()
    assert frame["cost_usd"].isna().all()  # the demo model has no price


def test_asking_an_unknown_member_or_nothing_is_a_clear_error(lab: Lab) -> None:
    with pytest.raises(RoutingError, match="no team member @Ghost; members: @Human, @Manager"):
        lab.ask("hello", to="@Ghost")
    with pytest.raises(ConfigError, match="empty"):
        lab.ask("   ")


def test_asking_an_entry_that_stopped_says_so_instead_of_returning_nothing(lab: Lab) -> None:
    assert lab.orchestrator.stop_member(lab.entry, force=True)
    assert lab.entry.ref.actor_stopped.wait(10)
    with pytest.raises(ActorGoneError, match=r"@Manager is not running \(see lab.errors\(\)\); start the team again"):
        lab.ask("hello", timeout=5)


def test_asking_a_closed_lab_says_it_is_closed_and_how_to_go_on() -> None:
    lab = Lab(store=False)
    lab.close()
    with pytest.raises(ConfigError, match=r"this lab is closed \(lab.close\(\)\): start a new one"):
        lab.ask("hello", timeout=5)


def _event(agent: str, run: str, cost: float | None, tokens: int = 10) -> LlmUsageEvent:
    return LlmUsageEvent(
        agent=agent,
        role=agent.strip("@"),
        run_id=run,
        model="m",
        input_tokens=tokens,
        output_tokens=1,
        cost_usd=cost,
    )


def test_usage_frames_keep_a_fixed_column_order_and_unknown_cost_stays_unknown() -> None:
    events = [
        _event("@A", "r1", 0.5),
        _event("@A", "r1", 0.25),
        _event("@B", "r2", None),
        _event("@B", "r3", 0.1),
    ]
    by_run = usage_frame(events, by="run")
    assert list(by_run.columns) == USAGE_COLUMNS
    assert list(by_run["cost_usd"].isna()) == [False, True, False]
    assert by_run["cost_usd"].iloc[0] == pytest.approx(0.75)
    by_agent = usage_frame(events, by="agent")
    assert by_agent.set_index("agent")["cost_usd"].isna().to_dict() == {"@A": False, "@B": True}
    assert list(usage_frame(events, by="model")["requests"]) == [4]
    assert len(usage_frame(events, by="request")) == 4
    assert usage_frame([], by="agent").empty
    with pytest.raises(ConfigError, match="choose agent, run, model, ask or request"):
        usage_frame(events, by="day")
    assert isinstance(by_run, pd.DataFrame)


def test_a_group_whose_token_counts_are_all_unknown_shows_them_unknown_not_zero() -> None:
    """A request cut off before any answer (a stop, a dead server) has no counts; a run that
    made only such requests must not read as a run that used 0 tokens."""
    cut = LlmUsageEvent(agent="@A", role="A", run_id="r1", model="m", input_tokens=None, output_tokens=None, ok=False)
    events = [cut, _event("@A", "r2", 0.1), _event("@B", "r3", 0.1)]
    by_run = usage_frame(events, by="run").set_index("run_id")
    assert by_run[["input_tokens", "output_tokens", "total_tokens"]].loc["r1"].isna().all()
    assert (by_run.loc["r1", "requests"], by_run.loc["r2", "total_tokens"]) == (1, 11)
    by_agent = usage_frame(events, by="agent").set_index("agent")
    assert by_agent.loc["@A", "input_tokens"] == 10  # the known counts of the group, summed


def test_an_estimate_prices_the_same_tokens_on_a_real_model() -> None:
    from aklab.lab.frames import estimate_cost

    frame = usage_frame([_event("@A", "r1", None, tokens=1000)], by="agent")
    estimate = estimate_cost(frame, "gpt-4o-mini", provider="openai")
    assert estimate.name == "cost_usd_as_gpt-4o-mini"
    assert estimate.iloc[0] == pytest.approx(1000 * 0.15e-6 + 1 * 0.6e-6)
    with pytest.raises(ConfigError, match="no price for 'no-such-model'"):
        estimate_cost(frame, "no-such-model", provider="openai")


# -- a team that cannot start, stops, or is left running ----------------------------------
def _aklab_threads() -> set[threading.Thread]:
    """Live threads of aklab's actors (pykka names them after the actor class)."""
    names = ("Orchestrator-", "HumanProxy-", "BaseAgent-", "FailingAgent-", "NotingAgent-")
    return {t for t in threading.enumerate() if t.name.startswith(names)}


def _assert_no_new_actor_threads(before: set[threading.Thread]) -> None:
    left = _aklab_threads() - before
    for thread in left:
        thread.join(10)  # a stopped actor's thread ends just after its on_stop
    assert [t.name for t in left if t.is_alive()] == []
    assert pykka.ActorRegistry.get_all() == []


def test_a_model_that_cannot_be_built_fails_the_lab_before_any_actor_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    before = _aklab_threads()
    with pytest.raises(ConfigError, match="unknown model provider 'nosuch'") as raised:
        Lab(model="nosuch:model")
    assert "\n" not in str(raised.value)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        Lab(model=ModelConfig(provider="openai", model="gpt-4.1"))
    bad_role = TeamSpec(
        "t", [card("Writer"), card("Critic", model_cfg=ModelConfig(provider="nosuch", model="x"))], "Writer"
    )
    with pytest.raises(ConfigError, match="nosuch"):
        Lab(bad_role)  # the model of every role is built, not only the entry's
    assert _aklab_threads() == before and pykka.ActorRegistry.get_all() == []


class FailingAgent(BaseAgent):
    def on_start(self) -> None:
        super().on_start()
        raise RuntimeError("the tool card could not load")


class NotingAgent(BaseAgent):
    stopped: ClassVar[list[str]] = []

    def on_stop(self) -> None:
        super().on_stop()
        NotingAgent.stopped.append(self.config.name)


def test_a_lab_whose_member_cannot_start_raises_and_stops_every_actor_it_started() -> None:
    before = _aklab_threads()
    spec = TeamSpec("t", [card("Writer", agent_class=NotingAgent), card("Critic", agent_class=FailingAgent)], "Writer")
    spec.start = ["Critic"]
    with pytest.raises(ActorGoneError, match="@Critic failed to start: RuntimeError: the tool card could not load"):
        Lab(spec)
    _assert_no_new_actor_threads(before)
    with pytest.raises(ActorGoneError, match="@Critic failed to start"), Lab(spec):
        pass
    _assert_no_new_actor_threads(before)


class FailsOnceMailArrives(BaseAgent):
    """Fails to start only after a message is queued for it: the message must not be lost."""

    def on_start(self) -> None:
        super().on_start()
        arrived = threading.Event()
        self.mailbox.classifier = lambda m: True
        self.mailbox.on_tagged = arrived.set
        if not len(self.mailbox):  # (mail may have come before the hook was set)
            arrived.wait(10)
        raise RuntimeError("the tool card could not load")


def test_a_hired_member_that_cannot_start_leaves_the_roster_and_the_ask_ends_in_a_notice() -> None:
    spec = TeamSpec(
        "t",
        [card("Manager", routes_to=["Developer"]), card("Developer", agent_class=FailsOnceMailArrives)],
        "Manager",
    )
    with Lab(spec) as lab:
        lab.ask("Plan the login page", timeout=20)  # the demo Manager hires a Developer and delegates
        assert [m.name for m in lab.team()] == ["@Human", "@Manager"]
        assert lab.errors() == [
            "@Developer: RuntimeError: the tool card could not load",
            "@Manager: ActorGoneError: AgentMessage to @Developer was not delivered: "
            "@Developer failed to start (RuntimeError: the tool card could not load)",
        ]
        with pytest.raises(RoutingError, match="no team member @Developer"):
            lab.send("hello", to="@Developer")


def test_close_stops_every_member_so_each_releases_its_model() -> None:
    NotingAgent.stopped.clear()
    spec = TeamSpec(
        "t",
        [card("Manager", routes_to=["Developer"], agent_class=NotingAgent), card("Developer", agent_class=NotingAgent)],
        "Manager",
    )
    lab = Lab(spec)
    lab.ask("Plan the login page", timeout=20)
    assert sorted(m.name for m in lab.team()) == ["@Developer", "@Human", "@Manager"]
    lab.close()
    assert sorted(NotingAgent.stopped) == ["@Developer", "@Manager"]


def _hanging_lab() -> tuple[Lab, threading.Event]:
    async def hang(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(60)  # a server that never answers; only a cancel ends it
        raise AssertionError("not cancelled")

    lab = Lab(TeamSpec("hang", [card("Worker", model=FunctionModel(hang))], "Worker"))
    busy = threading.Event()

    def on_record(record: Message) -> None:
        if isinstance(record, EventMessage) and isinstance(record.event, AgentBusyEvent) and record.event.busy:
            busy.set()

    lab.recorder.listeners.append(on_record)
    return lab, busy


def test_stop_cancels_a_model_request_in_flight() -> None:
    lab, busy = _hanging_lab()
    with lab:
        lab.send("work")
        assert busy.wait(10)
        assert lab.stop() == ["@Worker"]
        assert lab.wait(5), "the stop waited for the request in flight"
        assert [r.content for r in lab.replies()] == ["Run interrupted. (@Worker)"]


def test_close_does_not_wait_for_a_model_request_in_flight() -> None:
    lab, busy = _hanging_lab()
    lab.send("work")
    assert busy.wait(10)
    started = time.monotonic()
    lab.close()
    assert time.monotonic() - started < 5


def test_a_script_exits_without_close() -> None:
    script = textwrap.dedent(
        """
        from aklab.lab import Lab
        lab = Lab()
        [reply] = lab.ask("Plan the login page", timeout=20)
        print(reply.sender.name, flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, "@Manager\n"), done.stderr


def test_asking_a_role_not_hired_yet_says_how_to_hire_one() -> None:
    with Lab(store=False) as lab:
        with pytest.raises(RoutingError) as caught:
            lab.send("Write hello world", to="@Developer")
        text = str(caught.value)
        assert text.startswith("no team member @Developer yet: Developer is a role this team hires on demand")
        assert "sending @Manager '/hire_member Developer'" in text and text.endswith("members: @Human, @Manager")
        assert [m.content for m in lab.ask("/hire_member Developer", timeout=20)] == ["@Developer (Developer)"]
        assert lab.ask("Write hello world", to="@Developer", timeout=20)  # the advice worked
        with pytest.raises(RoutingError, match=r"^no team member @Ghost; members: @Human, @Manager, @Developer$"):
            lab.send("hi", to="@Ghost")  # not a role either: no hiring advice


def test_status_names_the_server_each_model_is_asked_at_and_no_credentials() -> None:
    from aklab.llm import ModelConfig

    cfg = ModelConfig.parse("openai-compatible:qwen3", base_url="http://user:pw@gpu-box:8000/v1")
    with Lab(model=cfg, store=False) as lab:  # built, never asked: no request reaches gpu-box
        status = lab.status()
    assert "model server: http://gpu-box:8000/v1 (openai-compatible:qwen3)" in status and "pw" not in status
    with Lab(store=False) as demo:
        assert "model server" not in demo.status()  # the demo model runs in this process
