"""Each request offers only the tools the agent can use at that moment."""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.lab import Lab
from tests.hardening._team import card, incoming, reply, team


def test_hire_fire_and_read_mailbox_are_offered_only_when_usable() -> None:
    offered: dict[str, list[list[str]]] = {"@Manager": [], "@Developer": []}

    def manager(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered["@Manager"].append(sorted(t.name for t in info.function_tools))
        sender, _ = incoming(messages)
        if sender == "@Human":
            return reply(info, [("Developer", "request", "do it")])
        return reply(info, [("@Human", "response", "done")])

    def developer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered["@Developer"].append(sorted(t.name for t in info.function_tools))
        return reply(info, [("@Manager", "response", "did it")])

    spec = team(
        card("Manager", routes_to=["Developer"], model=FunctionModel(manager)),
        card("Developer", model=FunctionModel(developer)),
        entry="Manager",
    )
    spec.start = ["Manager"]
    with Lab(spec) as lab:
        lab.ask("go", timeout=20)
        first, second = offered["@Manager"][0], offered["@Manager"][-1]
        assert first == ["hire_members"]  # nobody to fire yet, no mail waiting
        assert second == ["fire_members", "hire_members"]  # the Developer it hired can be fired
        assert offered["@Developer"] == [[]]  # a specialist with no roles: no team tools at all
