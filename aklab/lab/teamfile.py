"""Team files: a team described in TOML or YAML.

.. code-block:: toml

    name = "research"
    entry = "Lead"                 # the role the human talks to first
    start = ["Lead"]               # roles started up front (default: the entry role)
    model = "demo:aklab-demo"      # default model of every role (provider:model)

    [[roles]]
    role = "Lead"
    description = "Plans the work and reports back"
    prompt = "You are the Lead. Delegate, then report."
    routes_to = ["Researcher"]     # roles this one may hire
    tools = ["PlanningTool", { type = "WorkspaceTool", root = "workspace" }]

    [[roles]]
    role = "Researcher"
    prompt = "You are a Researcher."
    model = "openai:gpt-4.1"       # per-role model

    [[roles]]
    role = "Coder"
    # a model with options: any ModelConfig field next to the spec
    model = { spec = "local:smollm2", max_tokens = 256, temperature = 0.2, timeout = 60 }

A ``model`` is a ``provider:model`` string or a table: ``spec`` plus any of ``base_url``,
``api_key_env``, ``temperature``, ``max_tokens``, ``timeout``, ``retries``,
``output_mode``, ``context_length``. A role's model replaces the team's.
Unknown keys are errors (a typo should not silently do nothing).
"""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aklab.agent import AgentConfig
from aklab.core import AgentCard
from aklab.errors import ConfigError
from aklab.lab.teams import TeamSpec
from aklab.llm import AgentUsageLimits, ModelConfig, PromptTemplate, RunUsageLimits
from aklab.tools import ToolCard

__all__ = ["TOOL_CARDS", "load_team_file", "team_from_dict"]

TOOL_CARDS = {
    "TeamTool": "aklab.tools.TeamTool",
    "MailboxTool": "aklab.tools.MailboxTool",
    "PlanningTool": "aklab.tools.PlanningTool",
    "WorkspaceTool": "aklab.tools.WorkspaceTool",
}


class _Role(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str
    name: str | None = None
    description: str = ""
    prompt: str = "You are a helpful assistant."
    routes_to: list[str] = Field(default_factory=list)
    tools: list[str | dict[str, Any]] = Field(default_factory=list)
    model: str | dict[str, Any] | None = None
    agent_class: str = "aklab.agent.BaseAgent"
    run_usage_limits: RunUsageLimits | None = None
    agent_usage_limits: AgentUsageLimits | None = None


class _Team(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    entry: str
    start: list[str] = Field(default_factory=list)
    model: str | dict[str, Any] | None = None
    roles: list[_Role]


def _tool(spec: str | dict[str, Any]) -> ToolCard:
    data = {"type": spec} if isinstance(spec, str) else dict(spec)
    kind = str(data.pop("type", ""))
    path = TOOL_CARDS.get(kind, kind)
    module, _, attr = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), attr) if module else None
    except (ImportError, AttributeError):
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, ToolCard)):
        known = ", ".join(TOOL_CARDS)
        raise ConfigError(f"unknown tool {kind!r}: use one of {known}, or a dotted path to a ToolCard")
    card: ToolCard = cls(**data)
    return card


def _model(value: str | dict[str, Any] | None, *, where: str) -> ModelConfig:
    """A ``model`` entry (string or table) as a ModelConfig; mistakes are a ConfigError naming ``where``."""
    if value is None:
        return ModelConfig()
    try:
        if isinstance(value, str):
            return ModelConfig.parse(value)
        options = dict(value)
        spec = options.pop("spec", None)
        if not isinstance(spec, str):
            raise ConfigError('a model table needs spec = "provider:model"')
        return ModelConfig.parse(spec, **options)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def team_from_dict(data: dict[str, Any], *, source: str = "team") -> TeamSpec:
    try:
        team = _Team.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{source}: {where}: {first['msg']}") from exc
    roles = {r.role for r in team.roles}
    for missing in [team.entry, *team.start, *(t for r in team.roles for t in r.routes_to)]:
        if missing not in roles:
            raise ConfigError(f"{source}: role {missing!r} is used but not defined under [[roles]]")
    team_model = _model(team.model, where=f"{source}: model")
    cards = []
    for i, role in enumerate(team.roles):
        model = team_model if role.model is None else _model(role.model, where=f"{source}: roles.{i}.model")
        config = AgentConfig(
            name=role.name or f"@{role.role}",
            role=role.role,
            description=role.description,
            prompt=PromptTemplate(template=role.prompt),
            model_cfg=model,
            tools=[_tool(t) for t in role.tools],
            run_usage_limits=role.run_usage_limits or RunUsageLimits(),
            agent_usage_limits=role.agent_usage_limits or AgentUsageLimits(),
        )
        cards.append(
            AgentCard(
                description=role.description, agent_class=role.agent_class, config=config, routes_to=role.routes_to
            )
        )
    return TeamSpec(team.name, cards, team.entry, team.start)


def load_team_file(path: str | Path) -> TeamSpec:
    """Read a ``.toml``, ``.yaml`` or ``.yml`` team file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no team file at {path}")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            raise ConfigError(f"{path}: a team file ends in .toml, .yaml or .yml")
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not valid {path.suffix[1:].upper()}: {exc}") from exc
    except Exception as exc:  # yaml.YAMLError and friends
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a table of team settings at the top level")
    return team_from_dict(data, source=str(path))
