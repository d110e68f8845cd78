"""The reference design's code examples that apply, with imports changed to aklab."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.agent import AgentConfig, AgentMessage, BaseAgent, HumanProxy
from aklab.agent.custom_agent import CustomAgent, TriageMessage
from aklab.agent.usage_limits import WarningError
from aklab.core import ActorAddress, ActorSystem, ErrorMessage, EventSubscriber
from aklab.core import Message as CoreMessage
from aklab.llm import (
    AgentUsageLimits,
    ModelConfig,
    RunUsageLimits,
    ToolCallEvent,
    UsageLimits,
)
from aklab.llm.scripted import scripted_model
from tests.helpers import card, make_team


def test_the_event_subscriber_example_prints_messages_and_tool_calls(
    system: ActorSystem, capsys: pytest.CaptureFixture[str]
) -> None:
    from aklab.core import EventMessage, SentMessage

    class MessagePrinter(EventSubscriber):
        def on_message(self, message: CoreMessage) -> None:
            if isinstance(message, SentMessage):
                print(f"[{message.sender.name}] → {message.recipient.name}: {message.message.content}")  # type: ignore[union-attr,attr-defined]
            elif isinstance(message, EventMessage) and isinstance(message.event, ToolCallEvent):
                print(f"TOOL: {message.event.tool_name}")

    model = scripted_model([ModelResponse(parts=[ToolCallPart("team_roles", {})]), {"messages": []}])
    team = make_team(system, [card("Manager", model=model)])
    team.orchestrator.subscribe(MessagePrinter())
    manager = team.start("Manager")
    team.say(manager, "Plan the next sprint.")
    team.settle()
    # The scripted model then sends nothing: a human's request never ends in silence (issue 10).
    assert capsys.readouterr().out == (
        "[@Human] → @Manager: Plan the next sprint.\nTOOL: team_roles\n"
        "[@Manager] → @Human: @Manager did not reply to @Human: it sent nothing. Ask again or rephrase.\n"
    )


def test_both_usage_tiers_configure_as_in_the_example() -> None:
    config = AgentConfig(
        name="@Manager",
        role="Manager",
        model_cfg=ModelConfig(provider="openai", model="gpt-4.1"),
        run_usage_limits=RunUsageLimits(run_request_limit=50, total_tokens_limit=100_000),
        agent_usage_limits=AgentUsageLimits(agent_request_limit=200, total_tokens_limit=2_000_000),
    )
    assert config.run_usage_limits.to_pydantic_ai().request_limit == 50
    assert AgentConfig(name="@A", role="A").agent_usage_limits == AgentUsageLimits()


def test_the_old_usage_limits_spelling_still_works_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match="UsageLimits is deprecated"):
        old = UsageLimits(request_limit=50, total_tokens_limit=100_000)
    with pytest.warns(DeprecationWarning, match="usage_limits=...\\) is deprecated"):
        config = AgentConfig(name="@A", role="A", usage_limits=old)  # type: ignore[call-arg]
    assert config.run_usage_limits.run_request_limit == 50
    assert config.usage_limits.total_tokens_limit == 100_000
    with warnings.catch_warnings(), pytest.raises(ValueError, match="both were given"):
        warnings.simplefilter("ignore", DeprecationWarning)
        AgentConfig(name="@A", role="A", usage_limits=old, run_usage_limits=RunUsageLimits())  # type: ignore[call-arg]


def test_the_slash_command_examples(system: ActorSystem) -> None:
    team = make_team(system, [card("Manager", routes_to=["DevOpsEngineer"]), card("DevOpsEngineer")])
    manager = team.start("Manager")
    team.say(manager, "/team_members")
    team.say(manager, "/hire_member DevOpsEngineer")
    team.settle()
    team.say(manager, "/fire_member @DevOpsEngineer")
    team.settle()
    assert [m.content for m in team.inbox.messages] == [
        "- @Human (Human)\n- @Manager (Manager)",
        "@DevOpsEngineer (DevOpsEngineer)",
        "@DevOpsEngineer fired",
    ]


def test_the_registry_has_a_text_surface_and_a_typed_one(system: ActorSystem) -> None:
    team = make_team(system, [card("Manager", routes_to=["Developer"]), card("Developer")])
    manager = system.proxy_ask(team.start("Manager"), BaseAgent)
    assert manager.run_command("/hire_member Developer") == "@Developer (Developer)"
    native = manager.call_command("hire_member", "Developer")
    assert isinstance(native, ActorAddress) and native.name == "@Developer2"
    names = [d.name for d in manager.commands()]
    assert {"hire_member", "fire_member", "team_members", "team_roles", "stop", "compact", "clear"} <= set(names)
    assert not any(n.startswith("cmd_") for n in names)


def _triage(*handoffs: tuple[str, str]) -> dict[str, Any]:
    return {"handoffs": [{"recipient": r, "task": t} for r, t in handoffs]}


def test_a_second_agent_class_routes_its_own_output(system: ActorSystem) -> None:
    team = make_team(
        system,
        [
            card(
                "Triage",
                routes_to=["Developer"],
                model=scripted_model([_triage(("Developer", "fix login"))]),
                agent_class=CustomAgent,
            ),
            card("Developer", model=scripted_model([{"messages": []}])),
        ],
    )
    triage = team.start("Triage")
    system.tell(triage, TriageMessage(ticket="Login fails", severity="high"))
    team.settle()
    members = {a.role: a for a in team.orchestrator.get_team()}
    assert "Developer" in members
    assert system.proxy_ask(triage, CustomAgent).audited_requests() == 1  # extra capability ran


def test_a_breached_triage_still_concludes_in_its_own_output_type(system: ActorSystem) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if info.function_tools:
            return ModelResponse(parts=[ToolCallPart("team_roles", {})])
        args = _triage(("@Human", "partial: could not finish the analysis"))
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(args))])

    team = make_team(
        system,
        [
            card(
                "Triage",
                model=FunctionModel(model),
                agent_class=CustomAgent,
                run_usage_limits=RunUsageLimits(run_request_limit=2),
            )
        ],
    )
    triage = team.start("Triage")
    system.tell(triage, TriageMessage(ticket="Slow page"))
    team.settle()
    assert [m.content for m in team.inbox.messages] == ["partial: could not finish the analysis"]


def test_a_triage_with_no_handoffs_is_silent(system: ActorSystem) -> None:
    team = make_team(system, [card("Triage", model=scripted_model([_triage()]), agent_class=CustomAgent)])
    triage = team.start("Triage")
    system.tell(triage, TriageMessage(ticket="Nothing to do"))
    team.settle()
    assert team.inbox.messages == []


class Errors(EventSubscriber):
    def __init__(self) -> None:
        self.errors: list[ErrorMessage] = []

    def on_message(self, message: CoreMessage) -> None:
        if isinstance(message, ErrorMessage):
            self.errors.append(message)


def test_an_agent_tier_breach_tells_the_human_and_ends_the_turn_with_a_warning(system: ActorSystem) -> None:
    team = make_team(
        system,
        [
            card(
                "Manager",
                model=scripted_model([{"messages": []}], repeat_last=True),
                agent_usage_limits=AgentUsageLimits(agent_request_limit=1),
            )
        ],
    )
    errors = Errors()
    team.orchestrator.subscribe(errors)
    manager = team.start("Manager")
    team.say(manager, "one")
    team.say(manager, "two")
    team.settle()
    silence, notice = team.inbox.messages  # "one" was answered with nothing: that is said too (issue 10)
    assert silence.content == "@Manager did not reply to @Human: it sent nothing. Ask again or rephrase."
    assert notice.type == "notification" and notice.content.startswith("@Manager stopped: agent lifetime limit reached")
    assert [e.exception_type for e in errors.errors] == [WarningError.__name__]
    assert manager.is_alive()


def test_a_run_tier_conclusion_that_routes_nothing_tells_the_human_in_one_line(system: ActorSystem) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if info.function_tools:
            return ModelResponse(parts=[ToolCallPart("team_roles", {})])
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, '{"messages": []}')])

    team = make_team(
        system, [card("Manager", model=FunctionModel(model), run_usage_limits=RunUsageLimits(run_request_limit=2))]
    )
    manager = team.start("Manager")
    team.say(manager, "go")
    team.settle()
    assert [m.content for m in team.inbox.messages] == [
        "@Manager did not reply to @Human: it sent nothing. Ask again or rephrase."
    ]


def test_usage_summary_by_run_through_the_proxy(system: ActorSystem) -> None:
    team = make_team(system, [card("Manager", model=scripted_model([{"messages": []}], repeat_last=True))])
    manager = team.start("Manager")
    team.say(manager, "one")
    team.say(manager, "two")
    team.settle()
    summary = system.proxy_ask(manager, BaseAgent).get_usage_summary(by_run=True)
    assert summary.total.requests == 2 and summary.by_run is not None and len(summary.by_run) == 2
    assert summary.by_model["scripted"].input_tokens == 200


def test_the_human_proxy_example(system: ActorSystem) -> None:
    prompts: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(str(messages[-1]))
        ask = {"messages": [{"recipient": "@Human", "message_type": "request", "message": "Which day?"}]}
        args = ask if len(prompts) == 1 else {"messages": []}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(args))])

    team = make_team(system, [card("Manager", model=FunctionModel(model))])
    agent_addr = team.start("Manager")
    human_proxy = system.proxy_tell(team.human, HumanProxy)
    human_proxy.send(agent_addr, AgentMessage(content="Do X"))
    team.settle()
    [original_message] = team.inbox.messages
    human_proxy.process_human_input("My answer", original_message)
    team.settle()
    assert "You received a response from @Human." in prompts[1] and "My answer" in prompts[1]
