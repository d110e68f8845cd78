"""Shared pieces of the benchmarks: figures, timing, memory, and the relay team.

The relay team is two roles, Manager and Developer, each on a zero-latency pydantic-ai
``FunctionModel`` whose function reads only the newest user prompt (O(1) in the history),
so the model itself costs next to nothing and what is measured is aklab and pydantic-ai.
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

__all__ = [
    "REPO",
    "Figure",
    "best_of",
    "child_env",
    "context_switches",
    "relay_brain",
    "relay_messages",
    "relay_team",
    "rss_mb",
    "run_module_json",
    "timed",
]

REPO = Path(__file__).resolve().parent.parent

# -- figures ------------------------------------------------------------------------------


@dataclass
class Figure:
    """One measured figure of one benchmark: a row of the report."""

    id: str
    workload: str
    figure: str
    value: float | None
    unit: str
    budget_max: float | None = None
    budget_min: float | None = None
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    status: str = ""
    """Set to a sentence (e.g. "not yet measurable (needs cancellation)") when there is no value."""

    @property
    def budget(self) -> str:
        if self.budget_max is not None:
            return f"<= {_num(self.budget_max)} {self.unit}".strip()
        if self.budget_min is not None:
            return f">= {_num(self.budget_min)} {self.unit}".strip()
        return "—"

    @property
    def measured(self) -> str:
        if self.value is None:
            return self.status or "—"
        return f"{_num(self.value)} {self.unit}".strip()

    @property
    def verdict(self) -> str:
        if self.value is None:
            return self.status or "not measured"
        if self.budget_max is not None:
            return "met" if self.value <= self.budget_max else "missed"
        if self.budget_min is not None:
            return "met" if self.value >= self.budget_min else "missed"
        return "no budget"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "workload": self.workload,
            "figure": self.figure,
            "value": self.value,
            "unit": self.unit,
            "budget": self.budget,
            "budget_max": self.budget_max,
            "budget_min": self.budget_min,
            "measured": self.measured,
            "verdict": self.verdict,
            "note": self.note,
            "details": self.details,
        }


def _num(x: float) -> str:
    if x == 0 or abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 0.1:
        return f"{x:.2f}"
    return f"{x:.3g}"


# -- timing and memory -------------------------------------------------------------------


def best_of(repeat: int, fn: Callable[[], float]) -> tuple[float, list[float]]:
    """Run ``fn`` (which returns the seconds it measured) ``repeat`` times; best and all."""
    times = []
    for _ in range(max(1, repeat)):
        gc.collect()
        times.append(fn())
    return min(times), times


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def rss_mb() -> float:
    """Resident set size of this process in MB (VmRSS of /proc/self/status)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def context_switches() -> int:
    """Voluntary + involuntary context switches of every thread of this process so far (Linux).

    A thread that has ended is no longer counted, so take both readings while the threads
    being measured are alive. 0 where /proc is missing.
    """
    total = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except OSError:
            continue
    return total


def child_env() -> dict[str, str]:
    """This process's environment, with the repository first on ``PYTHONPATH``: a child
    ``python -m bench...`` imports this checkout's ``bench`` and ``aklab``."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def run_module_json(module: str, *args: str, timeout: float = 300.0) -> Any:
    """Run ``python -m module args`` in a fresh interpreter; parse the last stdout line as JSON."""
    env = child_env()
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{module} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the relay model ---------------------------------------------------------------------

_RECEIVED = re.compile(r"You received an? (\w+) from (\S+?)\.(?:\s|$)")
_USAGE = RequestUsage(input_tokens=100, output_tokens=20)


def _newest_received(messages: list[ModelMessage]) -> re.Match[str] | None:
    """The "You received ..." line of the newest run's prompt (O(1) in the history).

    Looks at the requests after the last response only, newest text first: aklab may add
    other texts after the rendered message (e.g. a notice of mail that arrived mid-run).
    """
    for message in reversed(messages):
        if not isinstance(message, ModelRequest):
            return None
        for part in reversed(message.parts):
            if isinstance(part, UserPromptPart):
                texts = [part.content] if isinstance(part.content, str) else part.content
                for text in reversed(texts):
                    if isinstance(text, str) and (match := _RECEIVED.search(text)) is not None:
                        return match
    return None


def relay_brain(role: str, worker: str = "Developer") -> Callable[[list[ModelMessage], AgentInfo], Any]:
    """The model function of ``role`` in the relay: O(1) in the history, deterministic.

    Manager: a request from the human goes to ``worker`` (a bare role the first time, so
    aklab hires one; ``@worker`` after), a response from the worker goes back to the human.
    Anyone else: answer a request to its sender. The only state is "hired yet?", so replaying
    the same calls in the same order on a fresh brain gives the same outputs.
    """
    state = {"hired": False}

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        match = _newest_received(messages)
        out: list[dict[str, str]] = []
        if match is not None:
            intent, sender = match.group(1), match.group(2)
            if role == "Manager" and intent == "request":
                recipient = f"@{worker}" if state["hired"] else worker
                state["hired"] = True
                out.append({"recipient": recipient, "message_type": "request", "message": "Please do the task."})
            elif role == "Manager" and intent == "response":
                out.append({"recipient": "@Human", "message_type": "response", "message": "Done, see above."})
            elif intent == "request":
                out.append({"recipient": sender, "message_type": "response", "message": "Task done."})
        if not info.output_tools:
            return ModelResponse(parts=[TextPart(json.dumps(out))], usage=_USAGE)
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"messages": out})], usage=_USAGE)

    return respond


def relay_team(
    brains: dict[str, Callable[..., Any]] | None = None,
    agent_class: Any = None,
    extra_roles: Iterable[str] = (),
) -> Any:
    """A ``TeamSpec``: Manager (entry, may hire Developer) and Developer, on relay brains."""
    from aklab.agent import AgentConfig, BaseAgent
    from aklab.core import AgentCard
    from aklab.lab.teams import TeamSpec
    from aklab.llm import ModelConfig, PromptTemplate

    brains = brains or {}

    def card(role: str, routes_to: list[str]) -> AgentCard:
        fn = brains.get(role) or relay_brain(role)
        return AgentCard(
            description=f"The {role} of the benchmark team",
            agent_class=agent_class or BaseAgent,
            config=AgentConfig(
                name=f"@{role}",
                role=role,
                prompt=PromptTemplate(template=f"You are the {role}."),
                model_cfg=ModelConfig(model=FunctionModel(fn, model_name=f"relay-{role.lower()}")),
            ),
            routes_to=routes_to,
        )

    cards = [card("Manager", ["Developer"]), card("Developer", [])]
    cards += [card(r, []) for r in extra_roles]
    return TeamSpec(name="bench-relay", cards=cards, entry="Manager")


def relay_messages(n: int) -> list[str]:
    return [f"Task {i}: add field {i} to the login form." for i in range(n)]
