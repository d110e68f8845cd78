"""ReactAgent: one pydantic-ai Agent per aklab agent, run on the actor's own thread.

It owns the agent's conversation (message history), runs one REACT loop per call, and
reports the usage of every model request and every tool call through callbacks. The
pydantic-ai ``Agent`` is built once; the output type is chosen per run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic_ai import Agent, capture_run_messages
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart, ToolCallPart

from aklab.llm.config import ModelConfig, RuntimeConfig
from aklab.llm.limits import AgentBudget, AgentUsageLimits, RunUsageLimitError, RunUsageLimits
from aklab.llm.models import build_model
from aklab.llm.usage import LlmUsageEvent, ToolCallEvent

__all__ = ["ReactAgent"]

T = TypeVar("T")

UsageSink = Callable[[LlmUsageEvent], None]
ToolSink = Callable[[ToolCallEvent], None]


class ReactAgent:
    """A REACT loop over pydantic-ai with a persistent history and usage reporting."""

    def __init__(
        self,
        *,
        name: str,
        role: str = "",
        model_cfg: ModelConfig | None = None,
        system_prompt: str = "",
        tools: Sequence[Any] = (),
        toolsets: Sequence[Any] = (),
        capabilities: Sequence[Any] = (),
        runtime_cfg: RuntimeConfig | None = None,
        run_usage_limits: RunUsageLimits | None = None,
        agent_usage_limits: AgentUsageLimits | None = None,
        on_usage: UsageSink | None = None,
        on_tool_call: ToolSink | None = None,
    ) -> None:
        self.name = name
        self.role = role
        self.model_cfg = model_cfg or ModelConfig()
        runtime = runtime_cfg or RuntimeConfig()
        self.run_usage_limits = run_usage_limits or RunUsageLimits()
        self.budget = AgentBudget(agent_usage_limits or AgentUsageLimits())
        self.on_usage = on_usage
        self.on_tool_call = on_tool_call
        self.messages: list[ModelMessage] = []
        self.system_prompt = system_prompt
        self.current_run_id: str | None = None
        # One event loop per agent, closed with it: run_sync would leave a loop open
        # on every actor thread.
        self._loop = asyncio.new_event_loop()
        self._finalizer = weakref.finalize(self, self._loop.close)
        self._model_label = self.model_cfg.label
        self._agent: Agent[Any, Any] = Agent(
            build_model(self.model_cfg),
            output_type=str,
            system_prompt=system_prompt,
            deps_type=object,
            tools=list(tools),
            toolsets=list(toolsets) or None,
            capabilities=list(capabilities) or None,
            retries=runtime.retries,
            end_strategy=runtime.end_strategy,
        )

    @property
    def agent(self) -> Agent[Any, Any]:
        return self._agent

    def run_sync(
        self,
        prompt: str | Sequence[Any],
        *,
        deps: Any = None,
        output_type: type[T],
    ) -> T:
        """Run one REACT loop; the history grows by what the run added.

        Raises ``AgentUsageLimitError`` before starting when the lifetime budget is
        spent, ``RunUsageLimitError`` when the run goes over its own limits.
        """
        run_id = uuid.uuid4().hex
        self.budget.start_run(run_id)
        self.current_run_id = run_id
        started = time.time()
        captured: list[ModelMessage] = []
        try:
            with capture_run_messages() as captured:
                result = self._loop.run_until_complete(
                    self._agent.run(
                        prompt,
                        deps=deps,
                        output_type=output_type,
                        message_history=self.messages,
                        usage_limits=self.run_usage_limits.to_pydantic_ai(),
                    )
                )
        except UsageLimitExceeded as exc:
            self._report(captured, run_id, started)
            raise RunUsageLimitError(f"{self.name}: run limit reached: {exc}") from exc
        except BaseException:
            self._report(captured, run_id, started)
            raise
        finally:
            self.current_run_id = None
        new = result.new_messages()
        self.messages = result.all_messages()
        self._report(new, run_id, started)
        return result.output  # type: ignore[no-any-return]

    def _report(self, messages: Sequence[ModelMessage], run_id: str, started: float) -> None:
        responses = [m for m in messages if isinstance(m, ModelResponse)]
        if not responses:
            return
        duration = (time.time() - started) / len(responses)
        for response in responses:
            usage = response.usage
            cost = getattr(usage, "cost", None)
            event = LlmUsageEvent(
                agent=self.name,
                role=self.role,
                run_id=run_id,
                model=response.model_name or self._model_label,
                requests=1,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                cost_usd=float(cost) if cost is not None else None,
                started_at=response.timestamp,
                duration_s=duration,
            )
            self.budget.record(event)
            if self.on_usage is not None:
                self.on_usage(event)
            if self.on_tool_call is not None:
                for part in response.parts:
                    if isinstance(part, ToolCallPart) and not part.tool_name.startswith("final_result"):
                        self.on_tool_call(
                            ToolCallEvent(
                                agent=self.name,
                                run_id=run_id,
                                tool_name=part.tool_name,
                                args=part.args_as_json_str(),
                            )
                        )

    def compact_sliding(self, *, keep_runs: int) -> int:
        """Drop whole old runs, keeping the last ``keep_runs``; returns messages removed.

        A run starts at a request carrying a user prompt, so cutting there never
        separates a tool call from its result.
        """
        starts = [
            i
            for i, m in enumerate(self.messages)
            if isinstance(m, ModelRequest) and any(p.part_kind == "user-prompt" for p in m.parts)
        ]
        if len(starts) <= keep_runs:
            return 0
        cut = starts[-keep_runs] if keep_runs > 0 else len(self.messages)
        kept = self.messages[cut:]
        if kept and isinstance(kept[0], ModelRequest):
            # The cut request may also carry the previous run's tool returns (pydantic-ai
            # merges them): drop those, and keep the system prompt at the head.
            first = kept[0]
            parts = [p for p in first.parts if p.part_kind not in ("tool-return", "retry-prompt", "system-prompt")]
            head = [SystemPromptPart(self.system_prompt)] if self.system_prompt else []
            kept[0] = dataclasses.replace(first, parts=[*head, *parts])
        self.messages = kept
        return cut

    def close(self) -> None:
        """Release the event loop (called when the owning actor stops)."""
        self._finalizer()

    def clear(self) -> None:
        """Forget the conversation (the system prompt is rebuilt on the next run)."""
        self.messages = []
