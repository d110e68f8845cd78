"""B1 relay: 200 human messages in sequence, three LLM turns each, against a floor.

Per message the Manager requests the Developer (hired on first use), the Developer
responds, the Manager responds to the human: 3 turns, 600 for 200 messages.

The floor is the same run calls on bare pydantic-ai: a recording pass (untimed) runs the
aklab workload once and keeps, for every ``Agent.run`` aklab made, the prompt, the message
history and the output. The floor then replays exactly those calls, in the same order, on
one bare ``pydantic_ai.Agent`` per member, built the way ``ReactAgent`` builds its agent
(same ``FunctionModel`` function on a fresh brain, same system prompt, same function tools
so the model sees the same tool definitions, same output type and run limits) but without
aklab's capabilities (mailbox, recipient check: those are aklab's cost), on one event loop,
in the same process. Its outputs are checked against the recorded ones, so both sides did
the same work. Both clocks start after the agents that exist up front are built (aklab's
Manager, the floor's two agents); aklab's hiring of the Developer is inside its clock.

Two comparisons: whole runs interleaved (floor, aklab, floor, ...; best of each is the
budgeted figure) and lockstep (per message, the floor's three calls then aklab's turn).
"""

from __future__ import annotations

import asyncio
import gc
import queue
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from bench.common import Figure, context_switches, relay_brain, relay_messages, relay_team

__all__ = ["run", "run_relay"]

ID = "B1"
WORKLOAD = "relay: {n} human messages in sequence, Manager → Developer → Manager → Human ({turns} LLM turns)"
ASK_TIMEOUT = 120.0
#: A second, unbudgeted comparison on short conversations, where aklab's share is largest.
SHORT_MESSAGES = 20
SHORT_REPEAT = 7
#: This machine kind is a shared VM whose speed drifts by 10-30 % between runs a minute
#: apart; B1 takes at least this many interleaved pairs, whatever ``--repeat`` says.
MIN_REPEAT = 3
LOCKSTEP_ROUNDS = 3


@dataclass
class RecordedCall:
    agent: str
    role: str
    prompt: Any
    history: list[Any]
    output: Any


@dataclass
class Recording:
    calls: list[RecordedCall]
    system_prompts: dict[str, str]
    """Per member: the system prompt its ReactAgent was built with."""
    tools: dict[str, list[Any]]
    """Per member: the function tools its ReactAgent was built with (same schemas for the floor)."""


def _recording_agent_class() -> type[Any]:
    from aklab.agent import BaseAgent
    from aklab.tools import ToolFactory

    class RecordingAgent(BaseAgent):
        """Records every pydantic-ai run its ReactAgent makes (used in the untimed pass only)."""

        recording: ClassVar[Recording] = Recording([], {}, {})

        def on_start(self) -> None:
            super().on_start()
            react = self._react_agent
            agent = react.agent
            original = agent.run
            name, role = self.config.name, self.config.role
            recording = RecordingAgent.recording
            recording.system_prompts[name] = react.system_prompt
            recording.tools[name] = ToolFactory(self._assemble_cards(), host=self).get_tools()

            async def run(prompt: Any, **kwargs: Any) -> Any:
                history = list(kwargs.get("message_history") or [])
                result = await original(prompt, **kwargs)
                recording.calls.append(RecordedCall(name, role, prompt, history, result.output))
                return result

            agent.run = run  # type: ignore[method-assign,assignment]

    return RecordingAgent


def run_relay(
    messages: list[str], *, burst: bool = False, agent_class: Any = None, store: Any = False
) -> tuple[float, Any]:
    """Run the relay on a fresh Lab; returns (seconds from first send to quiet, lab stats).

    The framework alone by default (``store=False``); B10 passes a store to price it."""
    from aklab.lab import Lab

    lab = Lab(relay_team(agent_class=agent_class), store=store)
    try:
        cpu_start = time.process_time()
        switches_start = context_switches()
        start = time.perf_counter()
        if burst:
            for text in messages:
                lab.send(text)
            if not lab.wait(ASK_TIMEOUT * 10):
                raise RuntimeError("burst: the team did not go quiet")
        else:
            for text in messages:
                lab.ask(text, timeout=ASK_TIMEOUT)
        elapsed = time.perf_counter() - start
        stats = {
            "cpu_s": time.process_time() - cpu_start,
            "context_switches": context_switches() - switches_start,
            "replies": len(lab.replies()),
            "usage_events": len(lab.recorder.usage),
            "errors": lab.errors(),
            "members": [a.name for a in lab.team()],
        }
    finally:
        lab.close()
    expected = {"replies": len(messages), "usage_events": 3 * len(messages), "errors": []}
    got = {k: stats[k] for k in expected}
    if got != expected:
        raise RuntimeError(f"relay did not do the expected work: {got} != {expected}")
    if stats["members"] != ["@Human", "@Manager", "@Developer"]:
        raise RuntimeError(f"relay team is not Human, Manager, one Developer: {stats['members']}")
    return elapsed, stats


def record(messages: list[str]) -> Recording:
    """The untimed recording pass: every run call aklab makes, in order."""
    cls = _recording_agent_class()
    cls.recording = recording = Recording([], {}, {})
    run_relay(messages, agent_class=cls)
    return recording


def _bare_agents(recording: Recording) -> dict[str, Any]:
    """One bare pydantic-ai Agent per member, built as ReactAgent builds its own, minus aklab's capabilities."""
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    from aklab.llm import RuntimeConfig

    runtime = RuntimeConfig()
    agents = {}
    for name, system_prompt in recording.system_prompts.items():
        role = name.removeprefix("@")
        agents[name] = Agent(
            FunctionModel(relay_brain(role), model_name=f"relay-{role.lower()}"),
            output_type=str,
            system_prompt=system_prompt,
            deps_type=object,
            tools=list(recording.tools[name]),
            retries=runtime.retries,
            end_strategy=runtime.end_strategy,
        )
    return agents


def _replay(loop: asyncio.AbstractEventLoop, agent: Any, call: RecordedCall, limits: Any) -> Any:
    """One floor call: the recorded prompt and history on a bare agent; its output."""
    from aklab.agent import StructuredOutput

    result = loop.run_until_complete(
        agent.run(call.prompt, output_type=StructuredOutput, message_history=call.history, usage_limits=limits)
    )
    return result.output


def run_floor(recording: Recording) -> tuple[float, float, bool]:
    """Replay the recorded calls on bare agents; (seconds, CPU seconds, outputs identical to aklab's)."""
    from aklab.llm import RunUsageLimits

    calls = recording.calls
    agents = _bare_agents(recording)  # built before the clock starts (aklab's Manager is too)
    limits = RunUsageLimits().to_pydantic_ai()
    loop = asyncio.new_event_loop()
    outputs = []
    try:
        cpu_start = time.process_time()
        start = time.perf_counter()
        for call in calls:
            outputs.append(_replay(loop, agents[call.agent], call, limits))
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
    finally:
        loop.close()
    same = outputs == [c.output for c in calls]
    return elapsed, cpu, same


def record_checked(messages: list[str]) -> Recording:
    recording = record(messages)
    if len(recording.calls) != 3 * len(messages):
        raise RuntimeError(f"recorded {len(recording.calls)} run calls, expected {3 * len(messages)}")
    return recording


def run_floor_threaded(recording: Recording) -> tuple[float, bool]:
    """The floor's calls, each member's on its own thread, handed over through queues.

    No aklab code at all: what running every agent on a thread of its own costs by itself
    (aklab's actors each have one). Returns (seconds, outputs identical to aklab's).
    """
    from aklab.llm import RunUsageLimits

    agents = _bare_agents(recording)
    limits = RunUsageLimits().to_pydantic_ai()
    inboxes: dict[str, queue.SimpleQueue[Any]] = {name: queue.SimpleQueue() for name in agents}
    done: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def serve(name: str) -> None:
        loop = asyncio.new_event_loop()
        try:
            while (call := inboxes[name].get()) is not None:
                try:
                    done.put(_replay(loop, agents[name], call, limits))
                except BaseException as exc:  # hand the failure to the waiting side
                    done.put(exc)
        finally:
            loop.close()

    threads = [threading.Thread(target=serve, args=(name,), daemon=True) for name in agents]
    for thread in threads:
        thread.start()
    outputs = []
    try:
        start = time.perf_counter()
        for call in recording.calls:
            inboxes[call.agent].put(call)
            output = done.get()
            if isinstance(output, BaseException):
                raise RuntimeError("threaded floor: a replayed call failed") from output
            outputs.append(output)
        elapsed = time.perf_counter() - start
    finally:
        for inbox in inboxes.values():
            inbox.put(None)
        for thread in threads:
            thread.join()
    return elapsed, outputs == [c.output for c in recording.calls]


def compare(messages: list[str], repeat: int, recording: Recording | None = None) -> dict[str, Any]:
    """Whole runs, floor and aklab interleaved ``repeat`` times; every timing."""
    turns = 3 * len(messages)
    recording = recording or record_checked(messages)
    # Interleaved (floor, aklab, floor, aklab, ...) so drift in the machine hits both alike.
    out: dict[str, Any] = {"messages": len(messages), "turns": turns, "repeat": repeat}
    out.update(floor_s=[], aklab_s=[], floor_cpu_s=[], aklab_cpu_s=[], floor_threaded_s=[])
    same = True
    for _ in range(repeat):
        gc.collect()
        seconds, cpu, identical = run_floor(recording)
        out["floor_s"].append(seconds)
        out["floor_cpu_s"].append(cpu)
        same = same and identical
        gc.collect()
        seconds, identical = run_floor_threaded(recording)
        out["floor_threaded_s"].append(seconds)
        same = same and identical
        gc.collect()
        seconds, stats = run_relay(messages)
        out["aklab_s"].append(seconds)
        out["aklab_cpu_s"].append(stats["cpu_s"])
        out.setdefault("aklab_context_switches", []).append(stats["context_switches"])
    if not same:
        raise RuntimeError("the floor replay did not reproduce aklab's outputs")
    out["floor_outputs_identical"] = same
    return out


def _timed_runs_agent_class() -> type[Any]:
    """A BaseAgent whose pydantic-ai runs add their wall time to a shared total (split round only)."""
    from aklab.agent import BaseAgent

    class TimedRunsAgent(BaseAgent):
        inside_s: ClassVar[list[float]] = [0.0]

        def on_start(self) -> None:
            super().on_start()
            agent = self._react_agent.agent
            original = agent.run
            inside = TimedRunsAgent.inside_s

            async def run(prompt: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return await original(prompt, **kwargs)
                finally:
                    inside[0] += time.perf_counter() - start

            agent.run = run  # type: ignore[method-assign,assignment]

    return TimedRunsAgent


def lockstep(messages: list[str], recording: Recording, rounds: int, *, split: bool = False) -> dict[str, Any]:
    """Floor and aklab in lockstep: per message, the floor replays that message's three
    recorded calls, then aklab handles the message; each side's time is summed.

    Drift in the machine (here 10-30 % between runs a minute apart) then hits both sides
    within milliseconds of each other. With ``split``, one more round on agents that time
    their pydantic-ai runs says how aklab's time divides between inside and outside runs.
    """
    from aklab.lab import Lab
    from aklab.llm import RunUsageLimits

    limits = RunUsageLimits().to_pydantic_ai()
    out: dict[str, Any] = {"messages": len(messages), "rounds": rounds, "floor_s": [], "aklab_s": []}
    timed_class = _timed_runs_agent_class() if split else None
    for round_no in range(rounds + (1 if split else 0)):
        instrumented = round_no == rounds
        agents = _bare_agents(recording)
        loop = asyncio.new_event_loop()
        if instrumented:
            timed_class.inside_s[0] = 0.0  # type: ignore[union-attr]
        lab = Lab(relay_team(agent_class=timed_class if instrumented else None), store=False)
        floor_s = aklab_s = 0.0
        outputs = []
        try:
            gc.collect()
            for i, text in enumerate(messages):
                start = time.perf_counter()
                for call in recording.calls[3 * i : 3 * i + 3]:
                    outputs.append(_replay(loop, agents[call.agent], call, limits))
                middle = time.perf_counter()
                lab.ask(text, timeout=ASK_TIMEOUT)
                floor_s += middle - start
                aklab_s += time.perf_counter() - middle
            replies = len(lab.replies())
        finally:
            lab.close()
            loop.close()
        if replies != len(messages) or outputs != [c.output for c in recording.calls]:
            raise RuntimeError("lockstep: the floor or aklab did not do the recorded work")
        if instrumented:
            out["split"] = {"floor_s": floor_s, "aklab_s": aklab_s, "inside_runs_s": timed_class.inside_s[0]}  # type: ignore[union-attr]
        else:
            out["floor_s"].append(floor_s)
            out["aklab_s"].append(aklab_s)
    return out


def run(*, smoke: bool = False, repeat: int = 3, context: dict[str, Any] | None = None) -> list[Figure]:
    n = 5 if smoke else 200
    short_n = 3 if smoke else SHORT_MESSAGES
    repeat = 1 if smoke else max(repeat, MIN_REPEAT)
    turns = 3 * n
    workload = WORKLOAD.format(n=n, turns=turns)

    messages = relay_messages(n)
    recording = record_checked(messages)
    steps = lockstep(messages, recording, 1 if smoke else LOCKSTEP_ROUNDS, split=True)
    ratios = sorted(a / f for a, f in zip(steps["aklab_s"], steps["floor_s"], strict=True))
    split = steps["split"]
    main = compare(messages, repeat, recording)
    floor_s, aklab_s = min(main["floor_s"]), min(main["aklab_s"])
    paired = sorted(a / f for a, f in zip(main["aklab_s"], main["floor_s"], strict=True))
    switches_per_turn = min(main["aklab_context_switches"]) / turns
    if context is not None:
        context["b1_turns_per_s"] = turns / aklab_s
        context["b1_seconds"] = aklab_s
        context["b1_messages"] = n
    short = compare(relay_messages(short_n), 1 if smoke else SHORT_REPEAT)
    short_ratio = min(short["aklab_s"]) / min(short["floor_s"])
    short_overhead = (min(short["aklab_s"]) - min(short["floor_s"])) / short["turns"] * 1000

    return [
        Figure(ID, workload, "aklab throughput", turns / aklab_s, "turns/s", details=main),
        Figure(ID, workload, "floor throughput (bare pydantic-ai)", turns / floor_s, "turns/s"),
        Figure(
            ID,
            workload,
            "aklab wall / floor wall, lockstep (median of rounds)",
            statistics.median(ratios),
            "x",
            note=(
                "per message, the floor's three calls then aklab's turn, times summed per side; rounds: "
                + ", ".join(f"{r:.3f}" for r in ratios)
            ),
            details=steps,
        ),
        Figure(
            ID,
            workload,
            "aklab inside pydantic-ai runs / floor",
            split["inside_runs_s"] / split["floor_s"],
            "x",
            note="an extra lockstep round whose agents time their runs: capabilities and hooks are inside",
        ),
        Figure(
            ID,
            workload,
            "aklab outside pydantic-ai runs, per turn",
            (split["aklab_s"] - split["inside_runs_s"]) / turns * 1000,
            "ms",
            note="routing, prompts, records, hand-offs between threads",
        ),
        Figure(
            ID,
            workload,
            "aklab wall / floor wall, whole runs interleaved (best of each)",
            aklab_s / floor_s,
            "x",
            budget_max=1.10,
            note=(
                f"aklab {aklab_s:.3f} s vs floor {floor_s:.3f} s, best of {repeat}; pairs: "
                + ", ".join(f"{r:.2f}" for r in paired)
                + " (the budgeted definition; lockstep cancels the machine's drift but also hands the floor "
                "some of aklab's cache misses)"
            ),
        ),
        Figure(
            ID,
            workload,
            "floor on one thread per member (no aklab code) / floor",
            min(main["floor_threaded_s"]) / floor_s,
            "x",
            note=(
                "the same calls, each member's on its own thread, handed over through queues: "
                "what a thread per agent costs by itself on this machine"
            ),
        ),
        Figure(ID, workload, "aklab overhead per turn", (aklab_s - floor_s) / turns * 1000, "ms"),
        Figure(
            ID,
            workload,
            "context switches per turn (all threads)",
            switches_per_turn,
            "",
            note="the floor runs on one thread and has next to none; each is a thread hand-off",
        ),
        Figure(
            ID,
            workload,
            "aklab CPU / floor CPU (all threads)",
            min(main["aklab_cpu_s"]) / min(main["floor_cpu_s"]),
            "x",
            note="process CPU time: less sensitive than wall time to other load on the machine",
        ),
        Figure(
            ID,
            f"relay, short histories: the first {short_n} messages only ({short['turns']} turns)",
            "aklab wall / floor wall",
            short_ratio,
            "x",
            note=(
                f"overhead {short_overhead:.2f} ms/turn; the floor's per-turn cost grows with the history, "
                "aklab's does not, so the ratio is worst for short conversations"
            ),
            details=short,
        ),
    ]
