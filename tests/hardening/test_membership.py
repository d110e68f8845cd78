"""Membership is bounded and firing is restricted: a model cannot grow the team without
limit, nor fire its own manager; a person cannot fire the entry agent by accident."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.agent import BaseAgent
from aklab.core import TeamGuard
from aklab.errors import RoutingError
from aklab.lab import Lab
from tests.hardening._team import card, incoming, reply, team


def _names(lab: Lab) -> list[str]:
    return sorted(a.name for a in lab.team())


def _tool_then_answer(tool: str, args: dict[str, Any]) -> FunctionModel:
    """Call ``tool`` once per ask, then tell the human what it returned."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = [p for p in last.parts if isinstance(p, ToolReturnPart) and p.tool_name == tool]
        if returned:
            return reply(info, [("@Human", "response", str(returned[-1].content))])
        sender, text = incoming(messages)
        if text.rstrip().endswith("hello"):
            return reply(info, [(sender, "response", "hi there")])
        return ModelResponse(parts=[ToolCallPart(tool, json.dumps(args))])

    return FunctionModel(model)


def test_naming_a_thousand_recipients_of_a_role_hires_only_a_few() -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sender, text = incoming(messages)
        if text.rstrip().endswith("hello"):
            return reply(info, [(sender, "response", "hi there")])
        if sender != "@Human":
            return reply(info, [("@Human", "response", "done")])
        return reply(info, [("Developer", "request", f"task {i}") for i in range(1_000)])

    manager = card("Manager", routes_to=["Developer"], model=FunctionModel(model))
    spec = team(manager, card("Developer"), entry="Manager")
    spec.start = ["Manager"]
    with Lab(spec) as lab:
        lab.ask("build everything", timeout=30)
        developers = [n for n in _names(lab) if n.startswith("@Developer")]
        assert len(developers) == TeamGuard().max_hires_per_turn
        assert len(lab.transcript()) == 1 + 8 + 8 + 8  # ask, tasks, answers, relays
        assert [m.content for m in lab.ask("hello", timeout=10)] == ["hi there"]


def test_hire_members_with_three_hundred_roles_is_capped_with_a_message_the_model_can_act_on() -> None:
    model = _tool_then_answer("hire_members", {"roles": ["Developer"] * 300})
    spec = team(card("Manager", routes_to=["Developer"], model=model), card("Developer"), entry="Manager")
    spec.start = ["Manager"]
    with Lab(spec) as lab:
        [answer] = lab.ask("hire", timeout=30)
        assert answer.content.count("hired @Developer") == 8
        assert "may hire at most 8 members per turn (TeamGuard.max_hires_per_turn)" in answer.content
        assert len(_names(lab)) == 2 + 8
        assert [m.content for m in lab.ask("hello", timeout=10)] == ["hi there"]


def test_the_team_size_is_capped() -> None:
    model = _tool_then_answer("hire_members", {"roles": ["Developer"] * 6})
    spec = team(card("Manager", routes_to=["Developer"], model=model), card("Developer"), entry="Manager")
    spec.start = ["Manager"]
    with Lab(spec, guard=TeamGuard(max_members=5)) as lab:
        [answer] = lab.ask("hire", timeout=30)
        assert answer.content.count("hired") == 3
        assert "the team is full: 5 members (TeamGuard.max_members)" in answer.content
        assert len(_names(lab)) == 5


def test_a_specialist_cannot_fire_its_manager_and_the_team_keeps_answering() -> None:
    offered: list[list[str]] = []

    def developer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append(sorted(t.name for t in info.function_tools))
        if "fire_members" in offered[-1]:
            return ModelResponse(parts=[ToolCallPart("fire_members", json.dumps({"names": ["@Manager"]}))])
        return reply(info, [("@Manager", "response", "I cannot fire anyone")])

    def manager(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sender, text = incoming(messages)
        if sender == "@Human" and not text.rstrip().endswith("hello"):
            return reply(info, [("@Developer", "request", "fire people")])
        return reply(info, [("@Human", "response", "hi there" if sender == "@Human" else "relayed")])

    spec = team(
        card("Manager", routes_to=["Developer"], model=FunctionModel(manager)),
        card("Developer", model=FunctionModel(developer)),
        entry="Manager",
    )
    with Lab(spec) as lab:
        lab.ask("go", timeout=20)
        assert offered and all("fire_members" not in tools and "hire_members" not in tools for tools in offered)
        assert _names(lab) == ["@Developer", "@Human", "@Manager"]
        assert [m.content for m in lab.ask("hello", timeout=10)] == ["hi there"]
        # and were the tool called anyway (a model inventing it), the host refuses
        developer_agent = lab.system.proxy_ask(lab.member("@Developer"), BaseAgent)
        with pytest.raises(RoutingError, match="@Developer may fire only members of the roles it routes to"):
            developer_agent.fire("@Manager")
        with pytest.raises(RoutingError, match="@Human is a person and cannot be fired"):
            developer_agent.fire("@Human")


def test_a_manager_may_fire_the_members_it_routes_to() -> None:
    model = _tool_then_answer("fire_members", {"names": ["@Developer"]})
    spec = team(card("Manager", routes_to=["Developer"], model=model), card("Developer"), entry="Manager")
    with Lab(spec) as lab:
        [answer] = lab.ask("fire", timeout=20)
        assert answer.content == "@Developer: fired"
        assert _names(lab) == ["@Human", "@Manager"]


@pytest.mark.parametrize(
    ("command", "answer"),
    [
        ("/fire_member @Manager", "is the team's entry agent and cannot be fired"),
        ("/fire_member @Human", "@Human is a person and cannot be fired"),
        ("/fire_member @Nobody", "@Nobody is not a member of the team"),
    ],
)
def test_a_person_cannot_fire_the_entry_agent_or_themselves_by_command(command: str, answer: str) -> None:
    with Lab("dev-team") as lab:
        lab.ask(command, timeout=10)
        assert any(answer in e for e in lab.errors()) or any(answer in m.content for m in lab.replies())
        assert lab.entry.is_alive()
        assert len(lab.ask("What is 2+2?", timeout=10)) >= 1


def test_a_person_may_fire_a_specialist_by_command() -> None:
    with Lab("dev-team") as lab:
        lab.ask("What is 2+2?", timeout=10)
        assert "@Developer" in _names(lab)
        [done] = lab.ask("/fire_member @Developer", timeout=10)
        assert done.content == "@Developer fired"
        assert "@Developer" not in _names(lab)
        assert len(lab.ask("What is 2+2?", timeout=10)) >= 1


def test_an_agent_that_names_itself_is_told_and_nothing_loops() -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return reply(info, [("@Manager", "request", "note to self")])

    with Lab(team(card("Manager", model=FunctionModel(model)), entry="Manager")) as lab:
        lab.ask("go", timeout=10)
        assert not [m for m in lab.transcript() if m.sender and m.sender.name == m.recipient.name]  # type: ignore[union-attr]
        said = " ".join(m.content for m in lab.replies())
        assert "@Manager did not reply to @Human: @Manager: @Manager is you; answer the sender" in said
        assert sum(e.requests for e in lab.recorder.usage) <= 4  # the first try and its retries
