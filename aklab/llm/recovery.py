"""LimitRecoveryCapability: conclude a turn that ran out of its run budget.

When a run goes over its ``RunUsageLimits``, the agent usually still has lifetime budget
and most of what it needs: it can no longer call tools, but it can still answer. So, by
default, one more model request is made, with no function tools, through the same output
type, asking the model to answer now and to say plainly what it could not check or
finish. If that conclusion is declined or fails, the *original* breach is raised.

Override :meth:`handle_limit_exceeded` (or pass ``enabled=False``) to change the policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.tools import ToolDefinition

if TYPE_CHECKING:
    from aklab.llm.react import ReactAgent

__all__ = ["CONCLUSION_PROMPT", "LimitRecoveryCapability", "NoFunctionTools", "closed_history"]

CONCLUSION_PROMPT = (
    "You have reached the usage limit for this turn and can no longer call tools. "
    "Answer now with what you have, and state explicitly which parts you could not "
    "check or finish."
)


@dataclass
class NoFunctionTools(AbstractCapability[Any]):
    """Hide every function tool (output tools stay), for a tool-free request."""

    async def prepare_tools(self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        return []


def closed_history(messages: list[ModelMessage]) -> list[ModelMessage]:
    """``messages`` without a trailing response whose tool calls were never answered."""
    out = list(messages)
    while out and isinstance(out[-1], ModelResponse) and any(isinstance(p, ToolCallPart) for p in out[-1].parts):
        out.pop()
    return out


@dataclass
class LimitRecoveryCapability:
    enabled: bool = True
    prompt: str = CONCLUSION_PROMPT

    def handle_limit_exceeded(
        self, agent: ReactAgent, error: Exception, history: list[ModelMessage], output_type: type[Any], deps: Any
    ) -> Any:
        """Return a concluded output, or raise ``error`` (the original breach)."""
        if not self.enabled:
            raise error
        try:
            return agent.conclude(self.prompt, history=closed_history(history), output_type=output_type, deps=deps)
        except Exception:
            raise error from error.__cause__  # the original breach, not the failed conclusion
