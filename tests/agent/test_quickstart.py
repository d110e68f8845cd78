"""The reference README's Quick Start, imports changed to aklab and the model left at
the default (its ``model_cfg=`` line removed). Its 0.3 s sleep is gone too:
``createActor`` returns a ready address, and the test waits on the human's inbox."""

from __future__ import annotations

from aklab.agent import AgentConfig, AgentMessage, BaseAgent, HumanProxy
from aklab.core import ActorSystem, AgentCard, BaseConfig, Orchestrator
from aklab.llm import PromptTemplate


def test_the_quick_start_runs_and_the_human_receives_the_managers_answer() -> None:
    # Actor runtime + Orchestrator
    actor_system = ActorSystem()
    orchestrator_addr = actor_system.createActor(
        Orchestrator, config=BaseConfig(name="@Orchestrator", role="Orchestrator")
    )
    orchestrator_proxy = actor_system.proxy_ask(orchestrator_addr, Orchestrator)

    manager_card = AgentCard(
        description="Project manager who coordinates specialists",
        skills=["coordination", "delegation"],
        agent_class="aklab.agent.BaseAgent",
        config=AgentConfig(
            name="@Manager",
            role="Manager",
            prompt=PromptTemplate(template="You are a project manager. Delegate to specialists."),
        ),
        routes_to=["Developer", "QA"],  # roles this agent can hire on demand
    )
    orchestrator_proxy.register_agent_profiles([manager_card])

    human_addr = orchestrator_proxy.createActor(HumanProxy, config=BaseConfig(name="@Human", role="Human"))
    human_proxy = actor_system.proxy_tell(human_addr, HumanProxy)

    manager_addr = orchestrator_proxy.createActor(BaseAgent, config=manager_card.get_config_copy())

    human_proxy.send(manager_addr, AgentMessage(content="Plan the next sprint."))

    try:
        inbox = actor_system.proxy_ask(human_addr, HumanProxy).inbox
        assert inbox.wait_for(timeout=20)
        [answer] = inbox.messages
        assert answer.sender == manager_addr and answer.type == "response"
        assert "Plan the next sprint." in answer.content
    finally:
        actor_system.shutdown()
