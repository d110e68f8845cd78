"""B7 cancel: ``%stop`` during a run whose model steps take 200 ms.

One agent (@Worker) runs a long REACT loop: each model step sleeps 200 ms (an
``asyncio.sleep``, as a real provider call would wait) and calls a tool, for 20 steps.
Once step 2 has started, the benchmark waits ``offset`` and calls ``lab.stop()`` (what
``%stop`` calls); the run has ended when the agent publishes ``AgentBusyEvent(busy=False)``,
seen by a lab listener. Offsets 10, 100 and 190 ms into the step cover the worst case
(the stop lands just after a step started: almost a whole step to wait) to the best.

Budget: at most one step + 50 ms. The figure is the worst trial; the time after the step
in flight finished (what aklab adds) is reported alongside.

If the Lab has no ``stop`` (cancellation not built), the figure is reported as not yet
measurable rather than faked.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from bench.common import Figure

__all__ = ["measure", "run"]

ID = "B7"
STEP_S = 0.2
STEPS = 20
STOP_AT_STEP = 2
NOT_MEASURABLE = "not yet measurable (needs cancellation)"


def _cancellation_available() -> bool:
    from aklab.lab.session import Lab

    return callable(getattr(Lab, "stop", None))


class _Clock:
    """What the model and the lab listener saw, with perf_counter times."""

    def __init__(self) -> None:
        self.step_started: dict[int, float] = {}
        self.step_ended: dict[int, float] = {}
        self.at_step = threading.Event()
        self.ended = threading.Event()
        self.ended_at = 0.0


def _slow_model(clock: _Clock) -> Any:
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = 0
        for message in reversed(messages):  # tool returns of this run (O(steps), not O(history))
            if not isinstance(message, ModelRequest):
                continue
            kinds = {type(p) for p in message.parts}
            if ToolReturnPart not in kinds:
                break
            done += 1
        clock.step_started[done] = time.perf_counter()
        if done == STOP_AT_STEP:
            clock.at_step.set()
        await asyncio.sleep(STEP_S)
        clock.step_ended[done] = time.perf_counter()
        if done < STEPS:
            return ModelResponse(parts=[ToolCallPart("step", {})])
        args = {"messages": [{"recipient": "@Human", "message_type": "response", "message": "all steps done"}]}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    return FunctionModel(respond, model_name="slow-steps")


def _team(clock: _Clock) -> Any:
    from aklab.agent import AgentConfig, BaseAgent
    from aklab.core import AgentCard
    from aklab.lab.teams import TeamSpec
    from aklab.llm import ModelConfig, PromptTemplate
    from aklab.tools import ToolCard

    class StepTool(ToolCard):
        def get_tools(self, host: Any) -> list[Callable[..., Any]]:
            def step() -> str:
                """Do one step of the work."""
                return "step done"

            return [step]

    card = AgentCard(
        description="Works in slow steps",
        agent_class=BaseAgent,
        config=AgentConfig(
            name="@Worker",
            role="Worker",
            prompt=PromptTemplate(template="You are the Worker."),
            model_cfg=ModelConfig(model=_slow_model(clock)),
            tools=[StepTool()],
        ),
    )
    return TeamSpec(name="bench-cancel", cards=[card], entry="Worker")


def measure(offset_s: float) -> dict[str, float]:
    """One trial: stop ``offset_s`` into step ``STOP_AT_STEP``; seconds from stop to run ended."""
    from aklab.agent import AgentBusyEvent
    from aklab.core import EventMessage
    from aklab.lab import Lab

    clock = _Clock()
    lab = Lab(_team(clock))

    def listen(message: Any) -> None:
        if isinstance(message, EventMessage) and isinstance(message.event, AgentBusyEvent):
            if message.event.agent == "@Worker" and not message.event.busy:
                clock.ended_at = time.perf_counter()
                clock.ended.set()

    lab.recorder.listeners.append(listen)
    try:
        lab.send("Do the long job.")
        if not clock.at_step.wait(STEP_S * (STOP_AT_STEP + 10)):
            raise RuntimeError(f"the run never reached step {STOP_AT_STEP}")
        time.sleep(max(0.0, clock.step_started[STOP_AT_STEP] + offset_s - time.perf_counter()))
        stopped_at = time.perf_counter()
        stopped = lab.stop()
        stop_call = time.perf_counter() - stopped_at
        if not clock.ended.wait(STEP_S * STEPS * 2):
            raise RuntimeError("the run did not end after stop")
        if not lab.wait(30):
            raise RuntimeError("the team did not go quiet after stop")
    finally:
        lab.close()
    if stopped != ["@Worker"]:
        raise RuntimeError(f"stop cancelled {stopped}, expected ['@Worker']")
    last_step = max(clock.step_ended)
    if last_step >= STEPS:
        raise RuntimeError("the run finished every step: the stop had no effect")
    return {
        "offset_ms": offset_s * 1000,
        "stop_to_ended_ms": (clock.ended_at - stopped_at) * 1000,
        "after_step_ms": (clock.ended_at - clock.step_ended[last_step]) * 1000,
        "stop_call_ms": stop_call * 1000,
        "steps_run": last_step + 1,
    }


def run(*, smoke: bool = False, repeat: int = 3, context: dict[str, Any] | None = None) -> list[Figure]:
    workload = f"cancel: `%stop` (lab.stop()) during a run whose model steps take {STEP_S * 1000:.0f} ms"
    budget = (STEP_S + 0.05) * 1000
    if not _cancellation_available():
        return [
            Figure(ID, workload, "time from stop to run ended", None, "ms", budget_max=budget, status=NOT_MEASURABLE)
        ]
    offsets = [0.01] if smoke else [0.01, 0.1, 0.19] * max(1, repeat)
    trials = [measure(offset) for offset in offsets]
    worst = max(trials, key=lambda t: t["stop_to_ended_ms"])
    worst_after = max(t["after_step_ms"] for t in trials)
    return [
        Figure(
            ID,
            workload,
            "time from stop to run ended (worst trial)",
            worst["stop_to_ended_ms"],
            "ms",
            budget_max=budget,
            note=(
                f"worst at {worst['offset_ms']:.0f} ms into a step; after the step in flight ended: "
                f"≤ {worst_after:.1f} ms; {len(trials)} trial{'s' if len(trials) != 1 else ''}"
            ),
            details={"trials": trials},
        )
    ]
