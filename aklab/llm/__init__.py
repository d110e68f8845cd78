"""aklab.llm: models, prompts, the REACT loop over pydantic-ai, limits and usage."""

from aklab.llm.config import CompactionConfig, ModelConfig, PromptTemplate, RuntimeConfig
from aklab.llm.limits import (
    AgentBudget,
    AgentUsageLimitError,
    AgentUsageLimits,
    RunUsageLimitError,
    RunUsageLimits,
    UsageLimitError,
    UsageLimits,
)
from aklab.llm.usage import (
    AgentUsageSummary,
    LlmUsageEvent,
    ToolCallEvent,
    UsageTotals,
    aggregate_usage,
)


def __getattr__(name: str) -> object:
    # ReactAgent pulls in pydantic-ai; import it only when asked for.
    if name == "ReactAgent":
        from aklab.llm.react import ReactAgent

        return ReactAgent
    raise AttributeError(f"module 'aklab.llm' has no attribute {name!r}")


__all__ = [
    "AgentBudget",
    "AgentUsageLimitError",
    "AgentUsageLimits",
    "AgentUsageSummary",
    "CompactionConfig",
    "LlmUsageEvent",
    "ModelConfig",
    "PromptTemplate",
    "ReactAgent",
    "RunUsageLimitError",
    "RunUsageLimits",
    "RuntimeConfig",
    "ToolCallEvent",
    "UsageLimitError",
    "UsageLimits",
    "UsageTotals",
    "aggregate_usage",
]
