"""AgentConfig and AgentState."""

from __future__ import annotations

import warnings
from typing import Any

from pydantic import ConfigDict, Field, SerializeAsAny, model_validator

from aklab.core import BaseConfig, BaseState
from aklab.llm import (
    AgentUsageLimits,
    CompactionConfig,
    ModelConfig,
    PromptTemplate,
    RuntimeConfig,
    RunUsageLimits,
)
from aklab.tools import ToolCard, ToolState

__all__ = ["AgentConfig", "AgentState"]


class AgentConfig(BaseConfig):
    """Everything that defines an LLM agent. Defaults run offline on the demo model. A
    setting it does not have is an error (``AgentConfig(promt=...)`` would be lost)."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    name: str = "@Agent"
    role: str = "Agent"
    prompt: PromptTemplate = Field(default_factory=PromptTemplate)
    model_cfg: ModelConfig = Field(default_factory=ModelConfig)
    runtime_cfg: RuntimeConfig = Field(default_factory=RuntimeConfig)
    run_usage_limits: RunUsageLimits = Field(default_factory=RunUsageLimits)
    agent_usage_limits: AgentUsageLimits = Field(default_factory=AgentUsageLimits)
    compaction_cfg: CompactionConfig = Field(default_factory=CompactionConfig)
    tools: list[SerializeAsAny[ToolCard]] = Field(default_factory=list)
    commands_from_agents: bool = False
    """Obey ``/commands`` from other agents too. Off: only a human (a UserProxy) may
    command an agent, so a model cannot fire members by writing ``/fire_member``."""

    @model_validator(mode="before")
    @classmethod
    def _migrate_usage_limits(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "usage_limits" not in data:
            return data
        if "run_usage_limits" in data:
            raise ValueError("pass run_usage_limits only: usage_limits is its deprecated name, and both were given")
        warnings.warn(
            "AgentConfig(usage_limits=...) is deprecated: use run_usage_limits=RunUsageLimits(...)",
            DeprecationWarning,
            stacklevel=2,
        )
        data = dict(data)
        data["run_usage_limits"] = data.pop("usage_limits")
        return data

    @property
    def usage_limits(self) -> RunUsageLimits:
        """Deprecated: the run tier, ``run_usage_limits``."""
        return self.run_usage_limits


class AgentState(BaseState):
    backstory: str = ""
    tool_state: ToolState = Field(default_factory=ToolState)
