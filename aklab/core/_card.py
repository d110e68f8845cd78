"""AgentCard: a role blueprint the orchestrator can hire from."""

from __future__ import annotations

import importlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

from aklab.core._config import BaseConfig
from aklab.errors import ConfigError

__all__ = ["AgentCard"]


class AgentCard(BaseModel):
    """How to create a member of a role.

    ``role`` is read from ``config.role`` (the single source of truth); there is no
    ``role=`` constructor keyword, and passing one is rejected rather than ignored.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    description: str = ""
    skills: list[str] = Field(default_factory=list)
    agent_class: str | type[Any]
    config: SerializeAsAny[BaseConfig]
    routes_to: list[str] = Field(default_factory=list)

    @property
    def role(self) -> str:
        return self.config.role

    def get_config_copy(self) -> BaseConfig:
        """A fresh deep copy of the config, safe to hand to ``createActor``."""
        return self.config.model_copy(deep=True)

    def get_agent_class(self) -> type[Any]:
        """Resolve ``agent_class`` (a class or a dotted path) to the class."""
        if isinstance(self.agent_class, type):
            return self.agent_class
        module_name, _, attr = self.agent_class.rpartition(".")
        if not module_name:
            raise ConfigError(
                f"agent_class {self.agent_class!r} must be a dotted path like 'aklab.agent.BaseAgent' or a class"
            )
        try:
            return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot import agent_class {self.agent_class!r}: {exc}") from exc
