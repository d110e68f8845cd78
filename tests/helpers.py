"""Small builders shared by tests: a team with a human, on any model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aklab.agent import AgentConfig, AgentMessage, BaseAgent, HumanInbox, HumanProxy
from aklab.core import ActorAddress, ActorSystem, AgentCard, BaseConfig, Orchestrator
from aklab.llm import ModelConfig, PromptTemplate


def card(role: str, *, routes_to: list[str] | None = None, model: Any = None, **config: Any) -> AgentCard:
    model_cfg = config.pop("model_cfg", None) or (ModelConfig(model=model) if model is not None else ModelConfig())
    return AgentCard(
        description=f"{role} of the test team",
        agent_class=config.pop("agent_class", BaseAgent),
        config=AgentConfig(
            name=f"@{role}",
            role=role,
            prompt=PromptTemplate(template=f"You are the {role}."),
            model_cfg=model_cfg,
            **config,
        ),
        routes_to=routes_to or [],
    )


@dataclass
class Team:
    system: ActorSystem
    orchestrator: Orchestrator
    human: ActorAddress
    inbox: HumanInbox

    def start(self, role: str) -> ActorAddress:
        c = self.orchestrator.get_agent_card(role)
        assert c is not None
        return self.orchestrator.createActor(c.get_agent_class(), c.get_config_copy())

    def say(self, to: ActorAddress, text: str, type: str = "request") -> None:
        self.system.proxy_tell(self.human, HumanProxy).send(to, AgentMessage(content=text, type=type))

    def settle(self) -> None:
        assert self.system.wait_idle(20), "team did not go quiet"


def make_team(system: ActorSystem, cards: list[AgentCard]) -> Team:
    orch = system.createActor(Orchestrator, BaseConfig(name="@Orchestrator", role="Orchestrator"))
    proxy = system.proxy_ask(orch, Orchestrator)
    proxy.register_agent_profiles(cards)
    human = proxy.createActor(HumanProxy, BaseConfig(name="@Human", role="Human"))
    inbox = system.proxy_ask(human, HumanProxy).inbox
    return Team(system, proxy, human, inbox)
