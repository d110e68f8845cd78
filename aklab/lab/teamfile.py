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
Unknown keys are errors (a typo should not silently do nothing). Role names are unique.
Usage limits must be positive whole numbers (or left out for no cap).

A team file is read as UTF-8 (a byte-order mark is allowed); every mistake is one
``ConfigError`` line that names the file, the field and the fix.

**A team file can name code.** A tool given by a dotted path (``type = "mypkg.tools.Search"``)
and a role's ``agent_class`` are imported when the file is loaded, and importing a module
runs it. So only modules under ``aklab`` are imported by default; other top-level packages
must be trusted by whoever loads the file, never by the file itself:
``load_team_file(path, trust=["mypkg"])`` (also ``team_from_dict(..., trust=...)``), or the
environment variable ``AKLAB_TRUSTED_MODULES="mypkg,otherpkg"`` (comma-separated top-level
package names) for ``Lab("team.toml")`` and ``%aklab team team.toml``. A module outside
them is refused with a one-line error saying how to trust it.
"""

from __future__ import annotations

import difflib
import importlib
import math
import os
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aklab.agent import AgentConfig
from aklab.core import AgentCard
from aklab.errors import ConfigError
from aklab.lab.teams import TeamSpec
from aklab.llm import AgentUsageLimits, ModelConfig, PromptTemplate, RunUsageLimits
from aklab.tools import ToolCard

__all__ = ["TOOL_CARDS", "TRUST_ENV", "load_team_file", "team_from_dict", "trusted_modules"]

TOOL_CARDS = {
    "TeamTool": "aklab.tools.TeamTool",
    "MailboxTool": "aklab.tools.MailboxTool",
    "PlanningTool": "aklab.tools.PlanningTool",
    "WorkspaceTool": "aklab.tools.WorkspaceTool",
}

TRUST_ENV = "AKLAB_TRUSTED_MODULES"
"""Environment variable: comma-separated top-level packages a team file may import from."""


def trusted_modules(trust: Iterable[str] = ()) -> frozenset[str]:
    """``aklab``, the packages in ``trust`` and those named by ``$AKLAB_TRUSTED_MODULES``."""
    names = {"aklab", *trust, *os.environ.get(TRUST_ENV, "").split(",")}
    return frozenset(n.strip() for n in names if n and n.strip())


def _check_trusted(path: str, trusted: frozenset[str], *, where: str) -> None:
    """Refuse to import ``path`` unless its top-level package is trusted (importing runs code)."""
    top = path.split(".", 1)[0]
    if top not in trusted:
        raise ConfigError(
            f"{where}: {path!r} is code outside aklab, not trusted; to trust it, "
            f"pass trust=[{top!r}] to load_team_file or set {TRUST_ENV}={top}"
        )


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
    commands_from_agents: bool = False  # obey /commands from other agents too, not only from a person


class _Team(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    entry: str
    start: list[str] = Field(default_factory=list)
    model: str | dict[str, Any] | None = None
    roles: list[_Role]


def _tool(spec: str | dict[str, Any], *, where: str, trusted: frozenset[str]) -> ToolCard:
    data = {"type": spec} if isinstance(spec, str) else dict(spec)
    kind = str(data.pop("type", ""))
    path = TOOL_CARDS.get(kind, kind)
    module, _, attr = path.rpartition(".")
    if module:
        _check_trusted(path, trusted, where=where)
    try:
        cls = getattr(importlib.import_module(module), attr) if module else None
    except (ImportError, AttributeError):
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, ToolCard)):
        known = ", ".join(TOOL_CARDS)
        raise ConfigError(f"{where}: unknown tool {kind!r}: use one of {known}, or a dotted path to a ToolCard")
    try:
        card: ToolCard = cls(**data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {kind}: {_field_error(exc, kind)}") from exc
    except ConfigError as exc:  # a card that checks its own settings
        raise ConfigError(f"{where}: {exc}") from exc
    return card


def _field_error(exc: ValidationError, kind: str) -> str:
    """One line for the first problem of a tool's table, with what to write."""
    error = exc.errors()[0]
    field = ".".join(str(p) for p in error["loc"]) or "value"
    if error["type"] == "missing":
        return f"{field} is required: add {field} = ... to the tool's table, e.g. {{ type = {kind!r}, {field} = ... }}"
    if error["type"] == "extra_forbidden":
        return f"unknown option {field!r}: remove it"
    return f"{field}: {error['msg']}"


def _team_error(exc: ValidationError) -> str:
    """One line for a team file's problem. A misspelt key (``promt``, ``[[rolse]]``) is named
    first, with the key it resembles: its error says more than the "required" one it causes."""
    errors = exc.errors()
    for error in errors:
        if error["type"] != "extra_forbidden":
            continue
        *parent, key = (str(p) for p in error["loc"])
        model: type[BaseModel] | None = (
            _Team if not parent else _Role if len(parent) == 2 and parent[0] == "roles" else None
        )
        if len(parent) == 3 and parent[0] == "roles":  # a limits table
            tables: dict[str, type[BaseModel]] = {
                "run_usage_limits": RunUsageLimits,
                "agent_usage_limits": AgentUsageLimits,
            }
            model = tables.get(parent[2])
        if model is None:
            return f"{'.'.join([*parent, key])}: {error['msg']}"
        known = list(model.model_fields)
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})"
        return f"{'.'.join([*parent, key])}: unknown key{hint}"
    first = errors[0]
    return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"


def _check_limits(role: _Role, *, where: str) -> None:
    """Every usage limit a role sets is a positive whole number (a cap of 0 or -1 is a typo, not "no cap")."""
    for name in ("run_usage_limits", "agent_usage_limits"):
        limits = getattr(role, name)
        if limits is None:
            continue
        for field, value in limits.model_dump().items():
            if value is None or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if not math.isfinite(value) or value <= 0:
                raise ConfigError(
                    f"{where}.{name}.{field}: got {value!r}; a limit is a positive number (leave it out for no cap)"
                )


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


def team_from_dict(data: dict[str, Any], *, source: str = "team", trust: Iterable[str] = ()) -> TeamSpec:
    """A team from its settings (a parsed team file); see the module docstring for ``trust``."""
    trusted = trusted_modules(trust)
    try:
        team = _Team.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_team_error(exc)}") from exc
    seen: dict[str, int] = {}
    for i, role in enumerate(team.roles):
        if role.role in seen:
            raise ConfigError(
                f"{source}: roles.{seen[role.role]} and roles.{i} are both named {role.role!r}: "
                "give every role its own name"
            )
        seen[role.role] = i
    roles = set(seen)
    for missing in [team.entry, *team.start, *(t for r in team.roles for t in r.routes_to)]:
        if missing not in roles:
            raise ConfigError(f"{source}: role {missing!r} is used but not defined under [[roles]]")
    team_model = _model(team.model, where=f"{source}: model")
    cards = []
    for i, role in enumerate(team.roles):
        where = f"{source}: roles.{i}"
        _check_limits(role, where=where)
        if role.agent_class != _Role.model_fields["agent_class"].default:
            _check_trusted(role.agent_class, trusted, where=f"{where}.agent_class")
        model = team_model if role.model is None else _model(role.model, where=f"{source}: roles.{i}.model")
        config = AgentConfig(
            name=role.name or f"@{role.role}",
            role=role.role,
            description=role.description,
            prompt=PromptTemplate(template=role.prompt),
            model_cfg=model,
            tools=[_tool(t, where=f"{where}.tools.{j}", trusted=trusted) for j, t in enumerate(role.tools)],
            run_usage_limits=role.run_usage_limits or RunUsageLimits(),
            agent_usage_limits=role.agent_usage_limits or AgentUsageLimits(),
            commands_from_agents=role.commands_from_agents,
        )
        cards.append(
            AgentCard(
                description=role.description, agent_class=role.agent_class, config=config, routes_to=role.routes_to
            )
        )
    return TeamSpec(team.name, cards, team.entry, team.start)


def load_team_file(path: str | Path, *, trust: Iterable[str] = ()) -> TeamSpec:
    """Read a ``.toml``, ``.yaml`` or ``.yml`` team file (UTF-8, a byte-order mark allowed).

    ``trust``: top-level packages (besides ``aklab``) whose tools and agent classes the
    file may name; see the module docstring.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no team file at {path}")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 (byte {exc.start} is {raw[exc.start]:#04x}); save the team file as UTF-8"
        ) from exc
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
    return team_from_dict(data, source=str(path), trust=trust)
