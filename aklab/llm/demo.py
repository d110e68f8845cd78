"""The offline demo model: deterministic, instant, no key, no network.

It reads what an agent's model would read (the rendered message and the context-update
blocks in the history) and plays the collaboration protocol plausibly:

- a *coordinator* (an agent that can hire roles) delegates a request to the role the
  request names, or to its first role, and relays the specialist's response to whoever
  asked it;
- a *specialist* answers a request to its sender with a short, role-flavoured result;
- notifications, acknowledgments, instructions and operator actions get no reply.

Token counts are estimated from the text (about four characters a token), so usage
tables look like real ones. Cost is ``None``: the demo model has no price.

The demo reads plain text only, so a demo run exercises the real rendering: if a
framing line changes, the demo's behaviour shows it.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RequestUsage

from aklab.llm.config import DEMO_MODEL_NAME

__all__ = ["DemoBrain", "DemoModel", "demo_model"]

_RECEIVED = re.compile(
    r"You received an? (request|response|instruction|notification|acknowledgment) from (\S+?)\.(?:\s|$)"
)
_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)
_MEMBER = re.compile(r"^- (@\S+) \(([^)]*)\)", re.MULTILINE)
_ROLE = re.compile(r"^- ([^:\n]+):", re.MULTILINE)

ROSTER_SECTION = "Team"
CONCLUSION_MARK = "reached the usage limit"
ROLES_SECTION = "Roles you can hire"

_CHARS_PER_TOKEN = 4
_STREAM_CHUNK = 24


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / _CHARS_PER_TOKEN))


def _user_texts(messages: list[ModelMessage]) -> list[str]:
    texts: list[str] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    if isinstance(part.content, str):
                        texts.append(part.content)
                    else:
                        texts.extend(c for c in part.content if isinstance(c, str))
    return texts


def _latest_sections(texts: list[str]) -> dict[str, str]:
    """The latest body of every ``## Section`` seen in the history."""
    sections: dict[str, str] = {}
    for text in texts:
        matches = list(_SECTION.finditer(text))
        for i, match in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            sections[match.group(1).strip()] = text[match.end() : end]
    return sections


def _split_received(text: str) -> tuple[str, str, str] | None:
    """(intent, sender, content) of a rendered message, or None."""
    matches = list(_RECEIVED.finditer(text))
    if not matches:
        return None
    match = matches[-1]
    rest = text[match.end() :]
    _, _, content = rest.partition("\n\n")
    return match.group(1), match.group(2), content.strip()


def _short(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


_ANSWERS: dict[str, list[str]] = {
    "develop": [
        "Split the work into three small changes, each with its own tests.",
        "Implement the core path first, behind a flag, and ship it to staging.",
        "Pair on the riskiest part and keep the build green throughout.",
    ],
    "qa": [
        "Write acceptance checks for each user-facing change first.",
        "Cover the edge cases: empty input, large input, and concurrent use.",
        "Run the full regression suite before sign-off.",
    ],
    "research": [
        "Collect the three most relevant sources and summarise each in a line.",
        "Compare their claims and note where they disagree.",
        "Recommend the option with the strongest evidence.",
    ],
    "design": [
        "Sketch the main screen and the two most common flows.",
        "Check the sketches with one user before building.",
        "Keep the visual language consistent with what exists.",
    ],
}
_GENERIC = [
    "Clarify the goal and the definition of done.",
    "Do the smallest useful piece first and check it.",
    "Report progress and open questions at the end of the day.",
]


def _answer(role: str, task: str) -> str:
    steps = next((v for k, v in _ANSWERS.items() if k in role.lower()), _GENERIC)
    pick = zlib.crc32(task.encode()) % len(steps)
    ordered = steps[pick:] + steps[:pick]
    body = "\n".join(f"{i}. {s}" for i, s in enumerate(ordered, 1))
    return f'{role} result for "{_short(task)}":\n{body}'


def _own_role(info: AgentInfo, messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    match = re.search(
                        r"\byou are (?:a |an |the )?([A-Za-z][\w ]*?)(?:[.,;\n]|$)", str(part.content), re.I
                    )
                    if match:
                        role = match.group(1).strip()
                        return role[0].upper() + role[1:]
    return "Specialist"


class DemoBrain:
    """Decides a demo turn. Separate from the model plumbing so it is easy to test."""

    def decide(self, messages: list[ModelMessage], info: AgentInfo) -> list[dict[str, str]]:
        texts = _user_texts(messages)
        concluding = bool(texts) and CONCLUSION_MARK in texts[-1]
        if concluding:
            # Out of budget for this turn: answer the message being handled, and say so.
            framed = [i for i, t in enumerate(texts) if _split_received(t) is not None]
            texts = texts[: framed[-1] + 1] if framed else texts
        received = _split_received(texts[-1]) if texts else None
        if received is None:
            return []
        turn = self._decide(texts, received, info, messages)
        if concluding:
            for item in turn:
                if item["message_type"] == "response":
                    item["message"] += "\n\n(I hit my usage limit for this turn, so this may be incomplete.)"
        return turn

    def _decide(
        self, texts: list[str], received: tuple[str, str, str], info: AgentInfo, messages: list[ModelMessage]
    ) -> list[dict[str, str]]:
        intent, sender, content = received
        sections = _latest_sections(texts)
        roles = [r.strip() for r in _ROLE.findall(sections.get(ROLES_SECTION, ""))]
        members = _MEMBER.findall(sections.get(ROSTER_SECTION, ""))

        if intent == "request" and roles:
            role = next((r for r in roles if r.lower() in content.lower()), roles[0])
            existing = next((name for name, r in members if r == role), None)
            return [{"message_type": "request", "recipient": existing or role, "message": content}]

        if intent == "response" and roles:
            asker = self._original_asker(texts, responder=sender)
            if asker is None:
                return []
            asker_name, task = asker
            message = f'Here is what {sender} came back with on "{_short(task)}":\n\n{content}'
            return [{"message_type": "response", "recipient": asker_name, "message": message}]

        if intent == "request":
            role = _own_role(info, messages)
            return [{"message_type": "response", "recipient": sender, "message": _answer(role, content)}]
        return []

    @staticmethod
    def _original_asker(texts: list[str], *, responder: str) -> tuple[str, str] | None:
        for text in reversed(texts[:-1]):
            received = _split_received(text)
            if received and received[0] == "request" and received[1] != responder:
                return received[1], received[2]
        return None


def _default_for_schema(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if "default" in schema:
        return schema["default"]
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _default_for_schema(v) for k, v in props.items() if k in schema.get("required", [])}
    return {"array": [], "string": "", "integer": 0, "number": 0, "boolean": False}.get(str(kind))


def _prompt_size(messages: list[ModelMessage], info: AgentInfo) -> int:
    size = len(info.instructions or "")
    for message in messages:
        for part in message.parts:
            content = getattr(part, "content", None) or getattr(part, "args", None) or ""
            size += len(content if isinstance(content, str) else json.dumps(content, default=str))
    for tool in info.function_tools + info.output_tools:
        size += len(json.dumps(tool.parameters_json_schema))
    return size


def _starts_run(messages: list[ModelMessage]) -> bool:
    """Is this the first model request of a run (the last request carries a user prompt)?"""
    last = messages[-1] if messages else None
    return isinstance(last, ModelRequest) and any(isinstance(p, UserPromptPart) for p in last.parts)


def _tool_step(messages: list[ModelMessage], info: AgentInfo) -> tuple[str, str] | None:
    """A coordinator with a planning board records the task before delegating."""
    names = {t.name for t in info.function_tools}
    if "planning_create" not in names or not _starts_run(messages):
        return None
    texts = _user_texts(messages)
    received = _split_received(texts[-1]) if texts else None
    if received is None or received[0] != "request":
        return None
    if not _ROLE.findall(_latest_sections(texts).get(ROLES_SECTION, "")):
        return None
    return "planning_create", json.dumps({"title": _short(received[2], 50)})


def _output(messages: list[ModelMessage], info: AgentInfo, brain: DemoBrain) -> tuple[str | None, str]:
    """(tool name, or None for text; JSON or text body)."""
    step = _tool_step(messages, info)
    if step is not None:
        return step
    if not info.output_tools:
        turn = brain.decide(messages, info)
        return None, turn[0]["message"] if turn else "OK."
    tool = info.output_tools[0]
    schema = tool.parameters_json_schema
    if "messages" in schema.get("properties", {}):
        return tool.name, json.dumps({"messages": brain.decide(messages, info)})
    return tool.name, json.dumps(_default_for_schema(schema))


class _ExactUsage(RequestUsage):
    """Usage known up front: pydantic-ai's per-chunk estimates (``+=``) leave it as is."""

    def __iadd__(self, other: RequestUsage) -> _ExactUsage:
        return self


def _usage_for(messages: list[ModelMessage], info: AgentInfo, body: str) -> RequestUsage:
    return RequestUsage(input_tokens=_tokens("x" * _prompt_size(messages, info)), output_tokens=_tokens(body))


class DemoModel(FunctionModel):
    """The demo as a FunctionModel whose streamed requests report the same token counts
    as its plain ones (FunctionModel would otherwise estimate streamed usage)."""

    def __init__(self, brain: DemoBrain, respond: Any, stream: Any, model_name: str) -> None:
        super().__init__(respond, stream_function=stream, model_name=model_name)
        self._brain = brain

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        async with super().request_stream(messages, model_settings, model_request_parameters, run_context) as response:
            info = AgentInfo(
                function_tools=model_request_parameters.declared_function_tools,
                allow_text_output=model_request_parameters.allow_text_output,
                output_tools=model_request_parameters.output_tools,
                model_settings=model_settings,
                model_request_parameters=model_request_parameters,
                instructions=None,
            )
            _tool, body = _output(messages, info, self._brain)
            exact = _usage_for(messages, info, body)
            response._usage = _ExactUsage(input_tokens=exact.input_tokens, output_tokens=exact.output_tokens)
            yield response


def demo_model(model_name: str = DEMO_MODEL_NAME, *, latency: float = 0.0) -> FunctionModel:
    """Build the offline demo model (a pydantic-ai ``FunctionModel``).

    ``latency`` simulates a model's thinking time per request (seconds), so that runs
    can be watched and stopped in a demo; the default answers at once.
    """
    brain = DemoBrain()

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if latency > 0:
            await asyncio.sleep(latency)  # simulated model latency, not a wait for an event
        tool_name, body = _output(messages, info, brain)
        part: ToolCallPart | TextPart = ToolCallPart(tool_name, body) if tool_name else TextPart(body)
        return ModelResponse(parts=[part], usage=_usage_for(messages, info, body), model_name=model_name)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        if latency > 0:
            await asyncio.sleep(latency)  # simulated model latency, not a wait for an event
        tool_name, body = _output(messages, info, brain)
        chunks = [body[i : i + _STREAM_CHUNK] for i in range(0, len(body), _STREAM_CHUNK)] or [""]
        if tool_name is None:
            for chunk in chunks:
                yield chunk
            return
        yield {0: DeltaToolCall(name=tool_name, json_args=chunks[0])}
        for chunk in chunks[1:]:
            yield {0: DeltaToolCall(json_args=chunk)}

    return DemoModel(brain, respond, stream, model_name)
