"""ReactAgent: one pydantic-ai Agent per aklab agent, run on the actor's own thread.

It owns the agent's conversation (message history), runs one REACT loop per call, and
reports the usage of every model request and every tool call through callbacks. The
pydantic-ai ``Agent`` is built once; the output type is chosen per run.

- A run that fails (cancelled, provider error) keeps the usage it incurred, and the
  history keeps the run's closed prefix (the prompt and any finished steps), so the
  agent still knows what it was asked.
- A run-tier breach goes to ``LimitRecoveryCapability`` (one tool-free conclusion).
- With ``ModelConfig.context_length`` set, ``maybe_compact()`` compacts the history when
  the last request passed ``CompactionConfig.trigger_ratio`` of it (the size is that
  request's input plus output tokens: O(1), no re-count of the history).
- With ``on_stream`` given, ``RuntimeConfig.stream`` on and a model that can stream, a run
  whose output is StructuredOutput-like is streamed and its outgoing messages are
  published as they are written (``aklab.llm.streaming``); other runs are not streamed.
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
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.usage import UsageLimits

from aklab.llm.config import CompactionConfig, ModelConfig, RuntimeConfig
from aklab.llm.limits import AgentBudget, AgentUsageLimits, RunUsageLimitError, RunUsageLimits
from aklab.llm.models import build_model
from aklab.llm.recovery import LimitRecoveryCapability, NoFunctionTools, closed_history
from aklab.llm.streaming import DEFAULT_MIN_CHARS, OutputStreamer, StreamSink, model_can_stream, streams_messages
from aklab.llm.usage import LlmUsageEvent, ToolCallEvent

__all__ = ["SUMMARY_PROMPT", "ReactAgent"]

T = TypeVar("T")

UsageSink = Callable[[LlmUsageEvent], None]
ToolSink = Callable[[ToolCallEvent], None]

SUMMARY_PROMPT = (
    "Summarise the conversation so far for your own later use: the requests you received, "
    "who sent them, what you did, what you sent to whom, and what is still open. Be brief."
)


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
        compaction_cfg: CompactionConfig | None = None,
        limit_recovery: LimitRecoveryCapability | None = None,
        on_usage: UsageSink | None = None,
        on_tool_call: ToolSink | None = None,
        on_stream: StreamSink | None = None,
        stream_min_chars: int = DEFAULT_MIN_CHARS,
    ) -> None:
        self.name = name
        self.role = role
        self.model_cfg = model_cfg or ModelConfig()
        runtime = runtime_cfg or RuntimeConfig()
        self.run_usage_limits = run_usage_limits or RunUsageLimits()
        self.budget = AgentBudget(agent_usage_limits or AgentUsageLimits())
        self.compaction_cfg = compaction_cfg or CompactionConfig()
        self.limit_recovery = limit_recovery or LimitRecoveryCapability()
        self.on_usage = on_usage
        self.on_tool_call = on_tool_call
        self.on_stream = on_stream
        self.stream_min_chars = stream_min_chars
        self.messages: list[ModelMessage] = []
        self.system_prompt = system_prompt
        self.current_run_id: str | None = None
        self._model_label = self.model_cfg.label
        self._context_size = 0
        # One event loop per agent, closed with it: run_sync would leave a loop open
        # on every actor thread.
        self._loop = asyncio.new_event_loop()
        self._finalizer = weakref.finalize(self, self._loop.close)
        model = build_model(self.model_cfg)
        self._can_stream = runtime.stream and model_can_stream(model)
        self._agent: Agent[Any, Any] = Agent(
            model,
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

    # -- runs -------------------------------------------------------------------------------
    def run_sync(self, prompt: str | Sequence[Any], *, deps: Any = None, output_type: type[T]) -> T:
        """Run one REACT loop; the history grows by what the run added.

        Raises ``AgentUsageLimitError`` before starting when the lifetime budget is
        spent, ``RunUsageLimitError`` when the run went over its own limits and could
        not conclude.
        """
        try:
            return self._run(prompt, deps=deps, output_type=output_type, limits=self.run_usage_limits.to_pydantic_ai())
        except _Breach as breach:
            error = RunUsageLimitError(f"run limit reached: {_first_sentence(breach.cause)}")
            error.__cause__ = breach.cause
            result: T = self.limit_recovery.handle_limit_exceeded(self, error, breach.history, output_type, deps)
            return result

    def conclude(self, prompt: str, *, history: list[ModelMessage], output_type: type[T], deps: Any = None) -> T:
        """One tool-free request through ``output_type`` on ``history`` (limit recovery)."""
        self.messages = history
        return self._run(
            prompt,
            deps=deps,
            output_type=output_type,
            limits=UsageLimits(request_limit=1),
            capabilities=[NoFunctionTools()],
        )

    def _run(
        self,
        prompt: str | Sequence[Any],
        *,
        deps: Any,
        output_type: type[T],
        limits: UsageLimits,
        capabilities: Sequence[Any] = (),
    ) -> T:
        run_id = uuid.uuid4().hex
        self.budget.start_run(run_id)
        self.current_run_id = run_id
        started = time.time()
        before = len(self.messages)
        captured: list[ModelMessage] = []
        streamer = self._streamer(run_id, output_type)
        try:
            with capture_run_messages() as captured:
                result = self._loop.run_until_complete(
                    self._agent.run(
                        prompt,
                        deps=deps,
                        output_type=output_type,
                        message_history=self.messages,
                        usage_limits=limits,
                        capabilities=list(capabilities) or None,
                        event_stream_handler=streamer.handle if streamer is not None else None,
                    )
                )
        except UsageLimitExceeded as exc:
            if streamer is not None:
                streamer.abort()
            self._report(captured[before:], run_id, started)
            raise _Breach(exc, list(captured)) from exc
        except BaseException:
            if streamer is not None:
                streamer.abort()
            self._report(captured[before:], run_id, started)
            if captured:
                self.messages = closed_history(captured)
            raise
        finally:
            self.current_run_id = None
        self.messages = result.all_messages()
        if streamer is not None:
            streamer.finish(result.output)
        self._report(result.new_messages(), run_id, started)
        return result.output  # type: ignore[no-any-return]

    @property
    def streams(self) -> bool:
        """Will runs with a StructuredOutput-like output be streamed?"""
        return self._can_stream and self.on_stream is not None

    def _streamer(self, run_id: str, output_type: Any) -> OutputStreamer | None:
        sink = self.on_stream
        if sink is None or not self._can_stream or not streams_messages(output_type):
            return None
        return OutputStreamer(agent=self.name, run_id=run_id, sink=sink, min_chars=self.stream_min_chars)

    def _report(self, messages: Sequence[ModelMessage], run_id: str, started: float) -> None:
        responses = [m for m in messages if isinstance(m, ModelResponse)]
        if not responses:
            return
        duration = (time.time() - started) / len(responses)
        for response in responses:
            usage = response.usage
            self._context_size = usage.input_tokens + usage.output_tokens
            cost = usage.cost
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
                                agent=self.name, run_id=run_id, tool_name=part.tool_name, args=part.args_as_json_str()
                            )
                        )

    # -- history ----------------------------------------------------------------------------
    def _run_starts(self) -> list[int]:
        return [
            i
            for i, m in enumerate(self.messages)
            if isinstance(m, ModelRequest) and any(p.part_kind == "user-prompt" for p in m.parts)
        ]

    def _keep_from(self, cut: int, head: list[ModelMessage]) -> None:
        kept = self.messages[cut:]
        if kept and isinstance(kept[0], ModelRequest):
            # The cut request may also carry the previous run's tool returns (pydantic-ai
            # merges them): drop those, and keep the system prompt at the head.
            first = kept[0]
            parts = [p for p in first.parts if p.part_kind not in ("tool-return", "retry-prompt", "system-prompt")]
            kept[0] = dataclasses.replace(first, parts=parts)
        if self.system_prompt:
            if head and isinstance(head[0], ModelRequest):
                head[0] = dataclasses.replace(head[0], parts=[SystemPromptPart(self.system_prompt), *head[0].parts])
            elif kept and isinstance(kept[0], ModelRequest):
                kept[0] = dataclasses.replace(kept[0], parts=[SystemPromptPart(self.system_prompt), *kept[0].parts])
        self.messages = [*head, *kept]

    def compact_sliding(self, *, keep_runs: int) -> int:
        """Drop whole old runs, keeping the last ``keep_runs``; returns messages removed.

        A run starts at a request carrying a user prompt, so cutting there never
        separates a tool call from its result.
        """
        starts = self._run_starts()
        if len(starts) <= keep_runs:
            return 0
        cut = starts[-keep_runs] if keep_runs > 0 else len(self.messages)
        self._keep_from(cut, [])
        return cut

    def compact_summarize(self, *, keep_runs: int, deps: Any = None) -> int:
        """Replace all but the last ``keep_runs`` runs with a summary the model writes."""
        starts = self._run_starts()
        if len(starts) <= keep_runs:
            return 0
        cut = starts[-keep_runs] if keep_runs > 0 else len(self.messages)
        old, whole = self.messages[:cut], self.messages
        self.messages = closed_history(old)
        try:
            summary = self._run(
                SUMMARY_PROMPT,
                deps=deps,
                output_type=str,
                limits=UsageLimits(request_limit=1),
                capabilities=[NoFunctionTools()],
            )
        finally:
            self.messages = whole
        head: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart(f"Summary of the earlier conversation:\n{summary}")]),
            ModelResponse(parts=[TextPart("Noted.")]),
        ]
        self._keep_from(cut, head)
        return cut

    def compact(self, deps: Any = None) -> int:
        cfg = self.compaction_cfg
        if cfg.strategy == "summarize":
            return self.compact_summarize(keep_runs=cfg.keep_last, deps=deps)
        return self.compact_sliding(keep_runs=cfg.keep_last)

    def maybe_compact(self, deps: Any = None) -> int:
        """Compact if the last request filled the context past the trigger; messages removed.

        Call it before composing the next prompt, so that what the prompt relies on
        (e.g. context-update markers) is judged against the compacted history.
        """
        limit = self.model_cfg.context_length
        if not limit or self._context_size <= limit * self.compaction_cfg.trigger_ratio:
            return 0
        self._context_size = 0
        return self.compact(deps)

    def clear(self) -> None:
        """Forget the conversation (the system prompt is sent again on the next run)."""
        self.messages = []
        self._context_size = 0

    def close(self) -> None:
        """Release the event loop (called when the owning actor stops)."""
        self._finalizer()


def _first_sentence(error: Exception) -> str:
    """pydantic-ai's limit messages go on with advice and a link; keep the fact."""
    text = str(error)
    return text.split(". ", 1)[0].rstrip(".")


class _Breach(Exception):
    """Internal: a run-tier breach with the history it had reached."""

    def __init__(self, cause: UsageLimitExceeded, history: list[ModelMessage]) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.history = history
