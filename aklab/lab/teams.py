"""Built-in teams: role cards plus which role the human talks to first."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from aklab.agent import AgentConfig
from aklab.core import AgentCard
from aklab.errors import ConfigError
from aklab.llm import ModelConfig, PromptTemplate

__all__ = ["BUILTIN_TEAMS", "TeamSpec", "builtin_team"]


@dataclass
class TeamSpec:
    """A team: its role cards, the entry role, and the roles started up front."""

    name: str
    cards: list[AgentCard]
    entry: str
    start: list[str] = field(default_factory=list)

    def with_model(self, model_cfg: ModelConfig) -> TeamSpec:
        cards = [
            c.model_copy(update={"config": c.config.model_copy(update={"model_cfg": model_cfg})}) for c in self.cards
        ]
        return TeamSpec(self.name, cards, self.entry, list(self.start))

    def map_models(self, change: Callable[[ModelConfig], ModelConfig]) -> TeamSpec:
        """This team with each role's model config passed through ``change`` (itself if
        none changed)."""
        cards, changed = [], False
        for c in self.cards:
            cfg = getattr(c.config, "model_cfg", None)
            new = change(cfg) if isinstance(cfg, ModelConfig) else cfg
            if new is not cfg:
                changed = True
                c = c.model_copy(update={"config": c.config.model_copy(update={"model_cfg": new})})
            cards.append(c)
        return TeamSpec(self.name, cards, self.entry, list(self.start)) if changed else self


def _card(role: str, description: str, prompt: str, routes_to: list[str] | None = None) -> AgentCard:
    return AgentCard(
        description=description,
        agent_class="aklab.agent.BaseAgent",
        config=AgentConfig(name=f"@{role}", role=role, prompt=PromptTemplate(template=prompt)),
        routes_to=routes_to or [],
    )


def _dev_team() -> TeamSpec:
    return TeamSpec(
        name="dev-team",
        cards=[
            _card(
                "Manager",
                "Coordinates the team and answers the human",
                "You are the Manager. Delegate work to the specialists you can hire, "
                "and report their results back to whoever asked.",
                routes_to=["Developer", "QA"],
            ),
            _card("Developer", "Designs and writes code", "You are a Developer. Answer with concrete steps."),
            _card("QA", "Plans and runs tests", "You are QA. Answer with a test plan."),
        ],
        entry="Manager",
    )


BUILTIN_TEAMS = {"dev-team": _dev_team}


def builtin_team(name: str) -> TeamSpec:
    try:
        return BUILTIN_TEAMS[name]()
    except KeyError:
        known = ", ".join(sorted(BUILTIN_TEAMS))
        raise ConfigError(f"no built-in team {name!r}; choose one of: {known}") from None
