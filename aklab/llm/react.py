"""ReactAgent: one pydantic-ai Agent per aklab agent, run on the actor's own thread.

It owns the agent's conversation (message history), runs one REACT loop per call, and
reports the usage of every model request and every tool call through callbacks. The
pydantic-ai ``Agent`` is built once; the output type is chosen per run.

- The model comes from its profile (``aklab.llm.profiles``): the settings that reach the
  wire, the output mode (``aklab.llm.output_modes``), the one label its usage rows carry.
- Every model request is reported once, as it ends, by a request tap: a response the
  run later drops (a cancel landing after it, a rejected output) still counts, and so
  does a request that failed. Tokens a server did not report are estimated and marked.
- A successful run keeps its history less its rejected attempts; a run that fails
  (cancelled, provider error) collapses to its prompt and a note that it got no answer
  (``aklab.llm.history``), so the agent still knows what it was asked; the next prompt
  joins that request, one user turn with no made-up answer before it.
- ``interrupt()`` (any thread) cancels the run's task: the HTTP request in flight is
  abandoned at once, and the run raises :class:`RunCancelledError`.
- A run-tier breach goes to ``LimitRecoveryCapability`` (one tool-free conclusion).
- Compaction is on by default: ``maybe_compact()`` compacts the history when the last
  request passed ``CompactionConfig.trigger_ratio`` of the model's context length
  (``ModelConfig.context_length``, else the profile's default; that request's input plus
  output tokens, reported or estimated); ``CompactionConfig(enabled=False)`` turns it off.
  A run refused for a full context is compacted and retried once either way.
- A tool that fails in any way (an exception, or ``SystemExit`` from a library calling
  ``sys.exit()``) becomes a retry prompt for the model, "tool X failed: SystemExit: 3", never
  the end of the run's thread; a value that cannot be sent to the model becomes its text.
  Cancellation (``asyncio.CancelledError``), ``KeyboardInterrupt``, ``GeneratorExit`` and
  pydantic-ai's and aklab's own control exceptions pass through untouched.
- A tool call cut off at max_tokens ends the run at once (``aklab.llm.cut_off``): asked
  again with the same limit, it would be cut again.
- With ``on_stream`` given, ``RuntimeConfig.stream`` on and a model that can stream, a run
  whose output is an output-tool call is streamed and its outgoing messages are
  published as they are written (``aklab.llm.streaming``); other runs are not streamed.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic_ai import Agent, ModelRetry, RunContext, capture_run_messages
from pydantic_ai.agent import AgentRetries
from pydantic_ai.capabilities import AbstractCapability
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

from aklab._text import one_line
from aklab.errors import AklabError, ModelError
from aklab.llm._loop import agent_loop
from aklab.llm.config import RECENT_RUNS, CompactionConfig, ModelConfig, RuntimeConfig
from aklab.llm.cut_off import cut_tool_call, incomplete
from aklab.llm.failures import RunCancelledError, describe_failure, is_context_overflow, is_cut_response
from aklab.llm.history import (
    RunLine,
    collapse_failed_run,
    estimate_tokens,
    fold_runs,
    join_prompt,
    message_chars,
    plain_run_line,
    prune_rejected,
    reopen,
    retell,
    run_starts,
    shrink_parts,
    unanswered,
)
from aklab.llm.limits import AgentBudget, AgentUsageLimits, RunUsageLimitError, RunUsageLimits
from aklab.llm.output_modes import RUN_FALLBACK, RUN_TIDIED, OutputPlan, plan_output
from aklab.llm.profiles import resolve
from aklab.llm.recovery import LimitRecoveryCapability, NoFunctionTools, closed_history
from aklab.llm.replay import Replay, in_process
from aklab.llm.streaming import DEFAULT_MIN_CHARS, OutputStreamer, StreamSink, model_can_stream
from aklab.llm.system_state import SplitState
from aklab.llm.usage import LlmUsageEvent, ToolCallEvent
from aklab.llm.user_turns import WireShape
from aklab.secrets import redact

__all__ = ["SUMMARY_PROMPT", "ReactAgent", "RunCancelledError"]

log = logging.getLogger("aklab.llm")


T = TypeVar("T")

UsageSink = Callable[[LlmUsageEvent], None]
ResponseSink = Callable[[ModelResponse, LlmUsageEvent], None]
RequestSink = Callable[[str], None]
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
        on_response: ResponseSink | None = None,
        on_request: RequestSink | None = None,
        stream_min_chars: int = DEFAULT_MIN_CHARS,
        run_line: RunLine | None = None,
        split_state: SplitState | None = None,
    ) -> None:
        self.name = name
        self.role = role
        self.model_cfg = model_cfg or ModelConfig()
        runtime = runtime_cfg or RuntimeConfig()
        self.run_usage_limits = run_usage_limits or RunUsageLimits()
        self.budget = AgentBudget(agent_usage_limits or AgentUsageLimits())
        self.compaction_cfg = compaction_cfg or CompactionConfig()
        self.limit_recovery = limit_recovery or LimitRecoveryCapability()
        # The current run's plain-text fallback and reachable names: a conclusion after a run
        # limit reads the model's answer as the run would have (a prose answer from a prompted
        # local model is a reply there too, not a failed conclusion).
        self._run_reading: tuple[Callable[[str], Any] | None, tuple[str, ...]] = (None, ())
        width = self.compaction_cfg.digest_line_chars
        self.run_line: RunLine = run_line or (lambda run: plain_run_line(run, width))
        self.on_usage = on_usage
        self.on_tool_call = on_tool_call
        self.on_stream = on_stream
        self.on_response = on_response
        """Called with each answer of a model outside this process as it arrives (and its
        usage), before the run goes on: a team with an event store stores it at once."""
        self.on_request = on_request
        """Called with the run id before each request to a model outside this process is sent
        (not for an answer given again from ``replay``): a team with an event store stores it."""
        self.replay: deque[ModelResponse] = deque()
        """Answers to give the next requests instead of asking the model, taken in order by
        the runs that come (a handling done again after a resume; see ``aklab.llm.replay``)."""
        self.stream_min_chars = stream_min_chars
        self.messages: list[ModelMessage] = []
        self.system_prompt = system_prompt
        self.current_run_id: str | None = None
        self._context_size = 0
        self._resolved = resolve(self.model_cfg, runtime)
        self.profile = self._resolved.profile
        self._model_label = self.profile.label
        self._context_length = self.model_cfg.context_length or self.profile.context_length
        self._timeout = self.model_cfg.timeout if self.model_cfg.timeout is not None else runtime.http_timeout
        self._output_retries = runtime.output_retries if runtime.output_retries is not None else runtime.retries
        # One event loop per agent, closed with it: run_sync would leave a loop open
        # on every actor thread. It does not poll for I/O it has none of (aklab.llm._loop).
        self._loop = agent_loop()
        self._finalizer = weakref.finalize(self, _close, self._loop, self._resolved)
        self._task: asyncio.Task[Any] | None = None
        self._task_lock = threading.Lock()
        self._tap = _RequestTap()
        if not in_process(self._resolved.model):
            if on_response is not None:
                self._tap.on_end = self._answered
            if on_request is not None:
                self._tap.on_start = self._requesting
        self._unfailed: list[ModelMessage] | None = None  # the history before the last run, if it failed
        #: Whether the last run's final answer stopped at the model's max_tokens (its finish
        #: reason "length"): what was written is used, and the agent says it was cut.
        self.last_cut = False
        #: Whether the last run's final answer came from an OpenAI chat server without a finish
        #: reason (a stream that just ended, say a proxy's cut): it may be cut short.
        self.last_unfinished = False
        #: Why the last automatic compaction's summary request failed (old runs were dropped
        #: instead), or None.
        self.summary_failed: str | None = None
        model = self._resolved.model
        self._can_stream = runtime.stream and model_can_stream(model)
        self._tells_finish = _tells_finish(model)
        self._agent: Agent[Any, Any] = _SchemaSharingAgent(
            model,
            output_type=str,
            system_prompt=system_prompt,
            deps_type=object,
            tools=list(tools),
            toolsets=list(toolsets) or None,
            # The tool guard and the request tap go in once: capabilities given per run
            # are combined and sorted by pydantic-ai on every run (~10% of a run's CPU).
            capabilities=[*capabilities, *self._wire(split_state), _TOOL_GUARD, self._tap],
            retries=AgentRetries(tools=runtime.retries, output=self._output_retries),
            end_strategy=runtime.end_strategy,
            model_settings=dict(self._resolved.settings) or None,  # type: ignore[arg-type]
        )

    @property
    def agent(self) -> Agent[Any, Any]:
        return self._agent

    def _wire(self, split_state: SplitState | None) -> list[Any]:
        """Capabilities that shape the request on the wire for this model's profile: the team's
        state in the system message where the profile asks for it, and one user message per
        turn for every model but the demo (which reads the parts, not a wire)."""
        split = split_state if self.profile.state_in_system else None
        join = self.profile.family != "demo"
        return [WireShape(split, join)] if split is not None or join else []

    # -- runs -------------------------------------------------------------------------------
    def run_sync(
        self,
        prompt: str | Sequence[Any],
        *,
        deps: Any = None,
        output_type: type[T],
        fallback: Callable[[str], T] | None = None,
        recipients: Sequence[str] = (),
    ) -> T:
        """Run one REACT loop; the history grows by what the run kept.

        ``fallback`` turns a plain-text answer into the output (the agent delivers it to
        the sender); ``recipients`` are the names the output may address (prompted mode
        limits the JSON to them).

        Raises ``AgentUsageLimitError`` before starting when the lifetime budget is
        spent, ``RunUsageLimitError`` when the run went over its own limits and could
        not conclude, ``RunCancelledError`` when interrupted.
        """
        self._run_reading = (fallback, tuple(recipients))
        plan = self._plan(output_type)
        limits = self.run_usage_limits.to_pydantic_ai()
        try:
            try:
                return self._run(prompt, deps=deps, output_type=output_type, limits=limits, plan=plan)
            except Exception as exc:
                if not self._worth_one_retry(exc):
                    raise
                return self._run(prompt, deps=deps, output_type=output_type, limits=limits, plan=plan)
        except _Breach as breach:
            error = RunUsageLimitError(f"run limit reached: {_first_sentence(breach.cause)}")
            error.__cause__ = breach.cause
            result: T = self.limit_recovery.handle_limit_exceeded(self, error, breach.history, output_type, deps)
            return result

    def _plan(self, output_type: type[Any]) -> OutputPlan:
        """How this agent's mode asks for ``output_type`` and reads the answer, with the current
        run's fallback and recipients (``_run_reading``)."""
        fallback, recipients = self._run_reading
        return plan_output(
            output_type,
            self.profile.output_mode,
            fallback=fallback,
            recipients=recipients,
            constrain_json=self.profile.constrain_json,
        )

    def conclude(self, prompt: str, *, history: list[ModelMessage], output_type: type[T], deps: Any = None) -> T:
        """One tool-free request through ``output_type`` on ``history`` (limit recovery), its
        answer read as the run that went over was reading its own (``run_sync``'s fallback and
        recipients)."""
        self.messages = history
        plan = self._plan(output_type)
        return self._run(
            prompt,
            deps=deps,
            output_type=output_type,
            limits=UsageLimits(request_limit=1),
            capabilities=[NoFunctionTools()],
            plan=plan,
        )

    def _run(
        self,
        prompt: str | Sequence[Any],
        *,
        deps: Any,
        output_type: type[T],
        limits: UsageLimits,
        capabilities: Sequence[Any] = (),
        plan: OutputPlan | None = None,
    ) -> T:
        plan = plan or OutputPlan(output_type=output_type, streams=True)
        run_id = uuid.uuid4().hex
        self.budget.start_run(run_id)
        self.current_run_id = run_id
        self._unfailed = None
        started = time.time()
        history = self.messages
        before = len(history)
        self.last_cut = False
        captured: list[ModelMessage] = []
        streamer = self._streamer(run_id, plan)
        tap = self._tap
        tap.reset()
        run_capabilities: Any = list(capabilities) or None
        if self.replay:  # per run: a wrap hook in every run would cost every request a task hand-off
            run_capabilities = [*capabilities, Replay(self.replay)]
        asked: str | Sequence[Any] | None = prompt
        pending = unanswered(history)
        if pending is not None:  # the last run got no answer: this prompt joins its request, one user turn
            before -= 1
            history = [*history[:before], join_prompt(pending, prompt)]
            asked = None  # pydantic-ai sends the history's last request
        coro = self._agent.run(
            asked,
            deps=deps,
            output_type=plan.output_type,
            message_history=history,
            usage_limits=limits,
            instructions=plan.instructions,
            model_settings=plan.settings or None,  # type: ignore[arg-type]
            capabilities=run_capabilities,
            event_stream_handler=streamer.handle if streamer is not None else None,
        )
        fallback = RUN_FALLBACK.set(plan.fallback)  # the task copies the context as it is created
        tidied: list[tuple[str, str]] = []
        tidied_token = RUN_TIDIED.set(tidied)
        try:
            with capture_run_messages() as captured:
                task = self._loop.create_task(coro)
                with self._task_lock:
                    self._task = task
                try:
                    result = self._loop.run_until_complete(task)
                except asyncio.CancelledError:
                    raise RunCancelledError("run interrupted") from None
                finally:
                    with self._task_lock:
                        self._task = None
        except UsageLimitExceeded as exc:
            if streamer is not None:
                streamer.abort()
            self._report(tap.take(), run_id, started)
            raise _Breach(exc, list(captured)) from exc
        except BaseException as exc:
            if streamer is not None:
                streamer.abort()
            self._report(tap.take(), run_id, started)
            # aklab's own errors stop a run (a stop, a team guard's limit); any other is the model's
            stopped = isinstance(exc, AklabError) and not isinstance(exc, ModelError)
            note = INTERRUPTED if stopped else FAILED
            self._unfailed = self.messages
            # What the run sent, or (stopped before it went out) what it was to send.
            self.messages = collapse_failed_run(history[:before], captured[before:] or history[before:], note)
            raise
        finally:
            self.current_run_id = None
            RUN_FALLBACK.reset(fallback)
            RUN_TIDIED.reset(tidied_token)
        messages = result.all_messages()
        final = next((m for m in reversed(messages[before:]) if isinstance(m, ModelResponse)), None)
        self.last_cut = final is not None and final.finish_reason == "length"
        # pydantic-ai writes "stop" for a missing finish reason; only the raw one it keeps tells.
        self.last_unfinished = (
            self._tells_finish and final is not None and "finish_reason" not in (final.provider_details or {})
        )
        self.messages = prune_rejected(messages, before)
        if tidied:
            self.messages = retell(self.messages, before, tidied)
        if streamer is not None:
            streamer.finish(result.output)
        self._report(tap.take(), run_id, started)
        return result.output  # type: ignore[no-any-return]

    def describe(self, exc: BaseException) -> str:
        """One line for the human: what failed and what to do."""
        return describe_failure(exc, timeout=self._timeout)

    def interrupt(self) -> bool:
        """Cancel the run in flight, from any thread; False when there is none."""
        with self._task_lock:
            task = self._task
            if task is None or task.done():
                return False
            self._loop.call_soon_threadsafe(task.cancel)
            return True

    def _worth_one_retry(self, exc: Exception) -> bool:
        """A full context (after compacting) or a response cut part-way (if retries are on) is asked again once."""
        if is_context_overflow(exc):
            return self._shrink_for_retry()
        retries = self.model_cfg.retries if self.model_cfg.retries is not None else 1
        if retries > 0 and is_cut_response(exc):
            self._drop_failed_trace()
            return True
        return False

    def _drop_failed_trace(self) -> None:
        if self._unfailed is not None:
            self.messages = self._unfailed  # the history before the failed run: it is asked again
            self._unfailed = None

    def _shrink_for_retry(self) -> bool:
        """After a full-context refusal: drop the failed run's trace, then fit the history in half."""
        self._drop_failed_trace()
        limit = self._context_length
        budget = (
            int(limit * self.compaction_cfg.trigger_ratio / 2)
            if limit
            else estimate_tokens(message_chars(self.messages) // 2)
        )
        self._context_size = 0
        return self.fit_tokens(budget) > 0 or not limit

    @property
    def streams(self) -> bool:
        """Will runs with a StructuredOutput-like output be streamed?"""
        return self._can_stream and self.on_stream is not None

    def _streamer(self, run_id: str, plan: OutputPlan) -> OutputStreamer | None:
        from aklab.llm.output_modes import messages_item_type

        sink = self.on_stream
        if sink is None or not self._can_stream or not plan.streams:
            return None
        target = plan.output_type[0] if isinstance(plan.output_type, list) else plan.output_type
        if messages_item_type(getattr(target, "output", target)) is None:
            return None
        return OutputStreamer(agent=self.name, run_id=run_id, sink=sink, min_chars=self.stream_min_chars)

    def _requesting(self) -> None:
        """The tap saw a request about to go out: tell ``on_request``."""
        run_id, sink = self.current_run_id, self.on_request
        if sink is None or run_id is None:
            return
        try:
            sink(run_id)
        except Exception:  # never into the run: the request goes out all the same
            log.exception("%s: storing a model request before it went out failed", self.name)

    def _answered(self, record: _Record) -> None:
        """The tap saw an answer arrive: hand it, with its usage, to ``on_response``."""
        run_id, sink = self.current_run_id, self.on_response
        if sink is None or run_id is None or record.response is None:
            return
        try:
            sink(record.response, self._usage_event(record, run_id, record.seconds or 0.0))
        except Exception:  # never into the run: the answer is in the history all the same
            log.exception("%s: storing a model answer as it arrived failed", self.name)

    def _report(self, records: Sequence[_Record], run_id: str, started: float) -> None:
        if not records:
            return
        now = time.time()
        for record in records:
            event = self._usage_event(record, run_id, now - started)
            if record.response is not None:
                self._context_size = event.total_tokens
            self.budget.record(event)
            if self.on_usage is not None:
                self.on_usage(event)
            response = record.response
            if self.on_tool_call is not None and response is not None:
                for part in response.parts:
                    if isinstance(part, ToolCallPart) and not part.tool_name.startswith("final_result"):
                        self.on_tool_call(
                            ToolCallEvent(
                                agent=self.name, run_id=run_id, tool_name=part.tool_name, args=part.args_as_json_str()
                            )
                        )

    # -- history ----------------------------------------------------------------------------
    def _run_starts(self) -> list[int]:
        return run_starts(self.messages)

    def fold(self, *, keep_runs: int) -> int:
        """Fold all but the last ``keep_runs`` runs into the digest; returns messages removed."""
        before = len(self.messages)
        self.messages, folded = fold_runs(
            self.messages,
            keep_runs=keep_runs,
            line_for_run=self.run_line,
            max_chars=self.compaction_cfg.digest_chars,
            system_prompt=self.system_prompt,
        )
        return before - len(self.messages) if folded else 0

    def maybe_fold(self) -> int:
        """Fold old runs once ``recent_runs`` and half as many again have piled up (when enabled)."""
        cfg = self.compaction_cfg
        recent = cfg.recent_runs or self.profile.recent_runs or RECENT_RUNS
        piled_up = len(self._run_starts()) > recent + max(1, recent // 2)
        if not (cfg.enabled and cfg.digest and piled_up):
            return 0
        return self.fold(keep_runs=recent)

    def _keep_from(self, cut: int, head: list[ModelMessage]) -> None:
        kept = self.messages[cut:]
        system = [SystemPromptPart(self.system_prompt)] if self.system_prompt else []
        if head and isinstance(head[0], ModelRequest):
            head[0] = dataclasses.replace(head[0], parts=[*system, *head[0].parts])
            system = []
        if kept and isinstance(kept[0], ModelRequest):
            kept[0] = reopen(kept[0], system)
        self.messages = [*head, *kept]

    def compact_sliding(self, *, keep_runs: int) -> int:
        """Drop whole old runs, keeping the last ``keep_runs``; returns messages removed.

        A run starts at a request carrying a user prompt, so cutting there never
        separates a tool call from its result.
        """
        if self.compaction_cfg.digest:
            return self.fold(keep_runs=keep_runs)
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
        folded = self.maybe_fold()
        limit = self._context_length if self.compaction_cfg.enabled else None
        if not limit or self._context_size <= limit * self.compaction_cfg.trigger_ratio:
            return folded
        size, self._context_size = self._context_size, 0
        try:
            removed = folded + self._compact_or_slide(deps)
        except RunCancelledError:
            self._context_size = size  # still full: the next turn compacts
            raise
        return removed + self.fit_tokens(int(limit * self.compaction_cfg.trigger_ratio / 2))

    def _compact_or_slide(self, deps: Any) -> int:
        """``compact``; if its summary request fails (not when it is interrupted), the old runs
        are dropped instead (sliding window) and ``summary_failed`` says why, so the turn that
        needed the room still runs."""
        self.summary_failed = None
        try:
            return self.compact(deps)
        except RunCancelledError:
            raise
        except Exception as exc:
            if self.compaction_cfg.strategy != "summarize":
                raise
            cause = exc.cause if isinstance(exc, _Breach) else exc
            self.summary_failed = self.describe(cause)
            log.warning("summary for compaction failed (%s); old runs dropped instead", self.summary_failed)
            return self.compact_sliding(keep_runs=self.compaction_cfg.keep_last)

    def fit_tokens(self, budget: int) -> int:
        """Drop old runs, then cut long parts, until the history's estimate fits ``budget`` tokens.

        Compaction keeps a number of runs; one long run (a big tool result, a rambling
        answer) can still overflow a small context, so this works by size.
        """
        removed = 0
        fixed = len(self.system_prompt)
        while self._run_starts()[1:] and estimate_tokens(message_chars(self.messages) + fixed) > budget:
            removed += self.compact_sliding(keep_runs=len(self._run_starts()) - 1)
        if estimate_tokens(message_chars(self.messages) + fixed) > budget:
            self.messages, cut = shrink_parts(self.messages, max(0, budget * 4 - fixed))
            removed += 1 if cut else 0
        return removed

    def clear(self) -> None:
        """Forget the conversation (the system prompt is sent again on the next run)."""
        self.messages = []
        self._context_size = 0

    def close(self) -> None:
        """Release the event loop and the model's HTTP client (called when the actor stops)."""
        self.interrupt()
        self._finalizer()

    def _usage_event(self, record: _Record, run_id: str, duration: float) -> LlmUsageEvent:
        response = record.response
        common: dict[str, Any] = {
            "agent": self.name,
            "role": self.role,
            "run_id": run_id,
            "model": self._model_label,
            "requests": 1,
            "duration_s": record.seconds if record.seconds is not None else duration,
            "started_at": record.started_at,
        }
        if response is None:  # failed or cut off: sent, but nothing is known of its size
            return LlmUsageEvent(
                **common,
                input_tokens=None,
                output_tokens=None,
                ok=False,
                cost_usd=0.0 if self.profile.local else None,
                cost_source="local" if self.profile.local else None,
            )
        usage = response.usage
        estimated = bool(getattr(usage, "unmeasured_requests", 0)) or (
            usage.input_tokens == 0 and usage.output_tokens == 0
        )
        if estimated:
            input_tokens = estimate_tokens(record.request_chars)
            output_tokens = estimate_tokens(message_chars([response]))
        else:
            input_tokens, output_tokens = usage.input_tokens, usage.output_tokens
        if self.profile.local:
            cost: float | None = 0.0
            source: str | None = "local"
        else:
            raw = usage.cost if not estimated else None
            cost = float(raw) if raw is not None else None
            source = "genai-prices" if cost is not None else None
        return LlmUsageEvent(
            **common,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cost_usd=cost,
            cost_source=source,
            estimated=estimated,
        )


def _close(loop: asyncio.AbstractEventLoop, resolved: Any) -> None:
    try:
        resolved.close()
    finally:
        loop.close()


@dataclass
class _Record:
    """One model request as the tap saw it end."""

    started_at: Any
    request: Any  # the ModelRequestContext, sized only if the server reports no tokens
    response: ModelResponse | None
    seconds: float | None = None

    @property
    def request_chars(self) -> int:
        """Characters the request sent: messages, instructions, tool schemas (roughly)."""
        if self.request is None:
            return 0
        params = self.request.model_request_parameters
        parts = getattr(params, "instruction_parts", None) or []
        extra = sum(len(str(getattr(p, "content", p))) for p in parts)
        tools = [*(getattr(params, "function_tools", None) or []), *(getattr(params, "output_tools", None) or [])]
        extra += sum(len(t.name) + len(t.description or "") + len(str(t.parameters_json_schema)) for t in tools)
        return message_chars(self.request.messages) + extra


@dataclass
class _RequestTap(AbstractCapability[Any]):
    """Records every model request of a run as it ends: responses and failures alike.

    Passed last among a run's capabilities, so that its ``after_*`` hooks run first
    (pydantic-ai calls them in reverse) and see a response before any other hook can
    drop it.
    """

    records: list[_Record] = field(default_factory=list)
    on_end: Callable[[_Record], None] | None = None  # told of each answer as it arrives
    on_start: Callable[[], None] | None = None  # told of each request before it is sent
    _started: float = 0.0
    _request: Any = None
    _pending: bool = False  # a request went out and has not ended (yet, or ever: cancelled)

    def reset(self) -> None:
        self.records = []
        self._pending = False

    def take(self) -> list[_Record]:
        if self._pending:  # cancelled in flight: it was sent, its size is unknown
            self._fail()
        out, self.records = self.records, []
        return out

    def _fail(self) -> None:
        from datetime import UTC, datetime

        self._pending = False
        started = datetime.fromtimestamp(self._started or time.time(), UTC)
        self.records.append(_Record(started, self._request, None, None))

    async def prepare_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        if self.on_start is not None:  # not for an answer given again (Replay): none is asked for
            self.on_start()
        self._started = time.time()
        self._request = request_context
        self._pending = True
        return request_context

    async def after_model_request(self, ctx: RunContext[Any], *, request_context: Any, response: Any) -> Any:
        self._pending = False
        record = _Record(response.timestamp, self._request, response, time.time() - self._started)
        self.records.append(record)
        if self.on_end is not None:
            self.on_end(record)
        cut = cut_tool_call(response)
        if cut is not None:  # recorded first: the request was made, and counts
            raise incomplete(cut, request_context)
        return response

    async def on_model_request_error(self, ctx: RunContext[Any], *, request_context: Any, error: Exception) -> Any:
        self._fail()
        raise error


_PASS_THROUGH: tuple[type[BaseException], ...] = (asyncio.CancelledError, KeyboardInterrupt, GeneratorExit)


def _is_control(exc: BaseException) -> bool:
    """An exception that steers the run (cancel, retry, defer, a limit): never turned into a retry."""
    if isinstance(exc, (*_PASS_THROUGH, AklabError)):
        return True
    return type(exc).__module__.split(".", 1)[0] == "pydantic_ai"


@dataclass
class _ToolGuard(AbstractCapability[Any]):
    """Innermost around every tool call: any failure is a retry prompt, never the thread's end.

    A tool raising ``SystemExit`` would otherwise end the run's event loop and the actor's
    thread with it (pykka then stops every actor of the process); a plain exception would
    end the run. A result that cannot be serialized for the model is replaced by its text.
    """

    async def wrap_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        try:
            result = await handler(args)
        except BaseException as exc:
            if _is_control(exc):
                raise
            text = str(exc) or repr(exc)
            raise ModelRetry(redact(one_line(f"tool {call.tool_name} failed: {type(exc).__name__}: {text}"))) from exc
        return _sendable(result)


def _tells_finish(model: Any) -> bool:
    """Does ``model`` keep the server's raw finish reason (an OpenAI chat model: every server
    aklab meets sends one, so its absence means the answer ended unannounced)?"""
    # By name, not by importing it: without the ``openai`` package (a demo-only install) the
    # import fails, and no model can be one then.
    return any(
        c.__name__ == "OpenAIChatModel" and c.__module__.startswith("pydantic_ai.models.openai")
        for c in type(model).__mro__
    )


#: What a failed or stopped run leaves after its prompt (``collapse_failed_run``): that it got
#: no answer, and that it is not to be taken up again unasked (a small model otherwise goes on
#: with a stopped question when the next message says little). On the user's side, joined to
#: the next prompt, not as the model's answer: SmolLM2-135M copied such an answer as its own
#: when the question was asked again, "[failed: ...]" in 6-8 of 24 sessions and this wording
#: in 22 of 24; joined to the next prompt, in none of 24, with as many answers right as without
#: a failure (tests/local/failed_line_trials.py; the same with a stop).
FAILED = "(No answer was sent: the model call failed. Take it up again only if asked to.)"
INTERRUPTED = "(No answer was sent: it was stopped. Take it up again only if asked to.)"

_TOOL_GUARD = _ToolGuard()


class _SchemaSharingAgent(Agent[Any, Any]):
    """pydantic-ai's ``Agent``, building the output schema of a run's output spec once.

    ``Agent.run(output_type=...)`` builds an ``OutputSchema`` (type adapters, JSON
    schemas) on every run, about a seventh of a run's CPU; aklab's output specs are cached
    objects (``plan_output``), so the schema built for one is reused by every run and
    agent. Keyed by identity, holding the spec so that its id cannot be reused.
    """

    def _prepare_output_schema(self, output_type: Any) -> Any:
        if output_type is None:
            return super()._prepare_output_schema(output_type)
        key = id(output_type)
        with _SCHEMAS_LOCK:
            hit = _SCHEMAS.get(key)
        if hit is not None and hit[0] is output_type:
            return _per_run(hit[1])
        schema = super()._prepare_output_schema(output_type)
        with _SCHEMAS_LOCK:
            if len(_SCHEMAS) >= 512:
                _SCHEMAS.clear()
            _SCHEMAS[key] = (output_type, schema)
        return _per_run(schema)


def _per_run(schema: Any) -> Any:
    """The schema with a toolset of its own: a run sets its retries and validators on it."""
    if schema.toolset is None:
        return schema
    run_schema = copy.copy(schema)
    run_schema.toolset = copy.copy(schema.toolset)
    run_schema.toolset.max_retries = None
    run_schema.toolset.output_validators = []
    return run_schema


_SCHEMAS: dict[int, tuple[Any, Any]] = {}
_SCHEMAS_LOCK = threading.Lock()


def _sendable(result: Any) -> Any:
    """``result`` if the model can be sent it (JSON, or content pydantic-ai knows), else its text."""
    import pydantic_core

    if result is None or isinstance(result, str | int | float | bool):
        return result
    try:
        pydantic_core.to_json(result, fallback=None)
    except Exception:
        try:
            return one_line(repr(result), 2000)
        except Exception:
            return f"<{type(result).__name__} object>"
    return result


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
