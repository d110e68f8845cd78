"""How BaseAgent assembles its tool cards and capabilities."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pydantic_ai.messages import ModelResponse, ToolCallPart

from aklab.agent import AgentMessage, BaseAgent
from aklab.agent.capabilities import is_cancel
from aklab.core import ActorAddress, ActorSystem, CancelMessage, EventSubscriber, Message
from aklab.llm.scripted import scripted_model
from aklab.tools import CommandsAnnouncedEvent, MailboxTool, TeamTool, ToolCard, ToolHost
from tests.helpers import card, make_team


class CountingCard(ToolCard):
    calls: ClassVar[dict[str, int]] = {}

    def _count(self, channel: str) -> None:
        CountingCard.calls[channel] = CountingCard.calls.get(channel, 0) + 1

    def get_tools(self, host: ToolHost) -> list[Callable[..., Any]]:
        self._count("tools")
        return []

    def get_system_prompts(self, host: ToolHost) -> list[str]:
        self._count("system")
        return ["Counting card is here."]

    def get_context_states(self, host: ToolHost) -> dict[str, Callable[[], str]]:
        self._count("context")
        return {}

    def get_commands(self, host: ToolHost) -> list[Callable[..., Any]]:
        self._count("commands")
        return []


class Announcements(EventSubscriber):
    def __init__(self) -> None:
        self.events: list[CommandsAnnouncedEvent] = []

    def on_message(self, message: Message) -> None:
        event = getattr(message, "event", None)
        if isinstance(event, CommandsAnnouncedEvent):
            self.events.append(event)


def test_each_channel_is_collected_once_at_start_and_commands_are_announced_once(system: ActorSystem) -> None:
    CountingCard.calls = {}
    team = make_team(system, [card("Manager", tools=[CountingCard()], model=scripted_model([{"messages": []}] * 3))])
    announced = Announcements()
    team.orchestrator.subscribe(announced)
    manager = team.start("Manager")
    for text in ["one", "two", "three"]:
        team.say(manager, text)
    team.settle()
    assert CountingCard.calls == {"tools": 1, "system": 1, "context": 1, "commands": 1}
    [event] = announced.events
    assert event.agent == "@Manager" and {"stop", "hire_member", "clear"} <= {c.name for c in event.commands}


def test_framework_cards_are_prepended_without_touching_the_config_and_a_supplied_one_wins(
    system: ActorSystem,
) -> None:
    mine = MailboxTool(read_mailbox=False)
    c = card("Manager", tools=[mine])
    team = make_team(system, [c])
    manager = team.start("Manager")
    team.settle()
    assert c.config.tools == [mine]  # type: ignore[attr-defined]
    tools = system.proxy_ask(manager, BaseAgent).commands()
    cards = {d.card for d in tools}
    assert {"TeamTool", "MailboxTool"} <= cards
    assert isinstance(TeamTool(), ToolCard)


def test_the_model_can_hire_and_fire_through_its_tools(system: ActorSystem) -> None:
    model = scripted_model(
        [
            ModelResponse(parts=[ToolCallPart("hire_members", {"roles": ["Developer", "Designer"]})]),
            ModelResponse(parts=[ToolCallPart("fire_members", {"names": ["@Developer", "@Nobody"]})]),
            {"messages": []},
        ]
    )
    team = make_team(system, [card("Manager", routes_to=["Developer"], model=model), card("Developer")])
    manager = team.start("Manager")
    team.say(manager, "staff up, then down")
    team.settle()
    assert [a.role for a in team.orchestrator.get_team()] == ["Human", "Manager"]


def test_is_cancel_recognises_both_surfaces_and_only_a_humans_stop() -> None:
    human = ActorAddress("h", "@Human", "Human", is_user_proxy=True)
    agent = ActorAddress("a", "@Dev", "Dev")
    assert is_cancel(CancelMessage())
    assert is_cancel(AgentMessage(content="/stop", sender=human))
    assert is_cancel(AgentMessage(content="  /stop now", sender=human))
    assert not is_cancel(AgentMessage(content="/stop", sender=agent))
    assert is_cancel(AgentMessage(content="/stop", sender=agent), allow_agents=True)
    assert not is_cancel(AgentMessage(content="/stopwatch", sender=human))
    assert not is_cancel(AgentMessage(content="please /stop", sender=human))
