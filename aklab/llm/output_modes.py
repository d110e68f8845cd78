"""How a run asks the model for its output, per the model's profile.

Four modes (``Profile.output_mode``):

- ``tool``: the output is an output-tool call, as pydantic-ai does by default. When the
  run has a text fallback, plain text is allowed too (so ``tool_choice`` stays ``auto``):
  a model that answers in prose is heard instead of being rejected.
- ``native``: the provider's JSON-schema response format.
- ``prompted``: the JSON shape is described in the run's instructions and, where the
  server can constrain decoding (llama.cpp's ``json_object`` + ``schema``), enforced by
  a grammar; the ``recipient`` field is limited to the names the agent can reach. Text
  that is not that JSON falls back to plain text. JSON that is right but for a recipient
  off that list is read as addressed, as a tool call would be: the recipient check then
  asks the model to fix the name. ``{"messages": []}`` sends nothing, as an empty
  output-tool call does (a notification or an acknowledgment needs no reply); the schema
  a grammar enforces still asks for one message, so a constrained small model never
  falls into answering nothing.
- ``text``: no JSON at all; the text is the reply.

The text fallback is the run's ``fallback(text)``: the agent makes it deliver the text to
the sender of the message being answered. Empty text is never a reply: it is rejected
with a retry prompt while retries last.

Plans are cached: the same output type, mode and recipients give the same pydantic-ai
output spec object, so the schema pydantic-ai builds from it can be reused
(``aklab.llm.react``). The per-run fallback reaches the readers through ``RUN_FALLBACK``,
a context variable the run sets before its task starts.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import pydantic_core
from pydantic import BaseModel, Field, ValidationError, create_model
from pydantic_ai import ModelRetry, TextOutput, ToolOutput
from pydantic_ai.output import NativeOutput

from aklab.llm.streaming import messages_item_type

__all__ = ["RUN_FALLBACK", "RUN_TIDIED", "OutputMode", "OutputPlan", "messages_item_type", "plan_output"]

OutputMode = Literal["tool", "native", "prompted", "text"]

#: The prompted reply that sends nothing.
NOTHING: dict[str, list[Any]] = {"messages": []}

#: Items per output in prompted mode: a grammar-constrained small model otherwise loops.
PROMPTED_MAX_ITEMS = 4

_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)
#: A fenced code block in another language than JSON (```python ... ```): an answer's content,
#: never the reply's JSON, whatever braces it holds.
_CODE_BLOCK = re.compile(r"```[ \t]*(?!json\b)[\w+#.-]+[^\n]*\n.*?(?:```|\Z)", re.IGNORECASE | re.DOTALL)
#: Keys only the prompted reply's JSON has: a JSON object in the text without any of them, and
#: without a text ``message``, is not a try at the format (a dict in an answer's example, say).
_PROTOCOL_KEYS = frozenset({"messages", "recipient", "message_type"})


def _tries_format(data: dict[str, Any]) -> bool:
    """Whether a JSON object is a try at the reply's format, not content of an answer. SmolLM2
    wrote "The capital of France is Paris." and then a made-up ``{"message": {...}, "results":
    [...]}`` block: taken for a broken reply, it was asked again until its retries ran out."""
    return bool(_PROTOCOL_KEYS.intersection(data)) or isinstance(data.get("message"), str)


@dataclass
class OutputPlan:
    """What one run passes to pydantic-ai for its output."""

    output_type: Any
    instructions: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    streams: bool = False
    """Whether the output arrives as an output-tool call that ``OutputStreamer`` can follow."""
    fallback: Callable[[str], Any] | None = None
    """This run's text fallback: set ``RUN_FALLBACK`` to it while the run goes."""


#: The running run's text fallback (read by the text and JSON readers).
RUN_FALLBACK: ContextVar[Callable[[str], Any] | None] = ContextVar("aklab_run_fallback", default=None)


#: The running run's tidied answers, (as written, as delivered): the run's history keeps them
#: as delivered, since a small model copies its own earlier answers, debris and all.
RUN_TIDIED: ContextVar[list[tuple[str, str]] | None] = ContextVar("aklab_run_tidied", default=None)


def _tidied(written: str, delivered: str) -> str:
    tidied = RUN_TIDIED.get()
    if tidied is not None:
        tidied.append((written, delivered))
    return delivered


def _fallback(text: str) -> Any:
    fallback = RUN_FALLBACK.get()
    if fallback is None:  # a plan made with a fallback, run without one: a programming error
        raise RuntimeError("the run's text fallback is not set (set RUN_FALLBACK to OutputPlan.fallback)")
    return fallback(text)


def plan_output(
    output_type: Any,
    mode: OutputMode,
    *,
    fallback: Callable[[str], Any] | None = None,
    recipients: Sequence[str] = (),
    constrain_json: bool = False,
) -> OutputPlan:
    """The pydantic-ai output spec (and per-run instructions/settings) for ``mode``."""
    try:
        plan = _plan(output_type, mode, fallback is not None, tuple(recipients), constrain_json)
    except TypeError:  # an unhashable output type: nothing to share
        plan = _plan.__wrapped__(output_type, mode, fallback is not None, tuple(recipients), constrain_json)
    return dataclasses.replace(plan, fallback=fallback) if fallback is not None else plan


@lru_cache(maxsize=256)
def _plan(
    output_type: Any, mode: OutputMode, has_fallback: bool, recipients: tuple[str, ...], constrain_json: bool
) -> OutputPlan:
    fallback = _fallback if has_fallback else None
    if output_type is str:
        return OutputPlan(output_type=str)
    item = messages_item_type(output_type)
    if mode == "text" and (fallback is not None or item is None):
        if fallback is None:
            return _prompted(output_type, None, recipients, constrain_json=False)
        return OutputPlan(output_type=TextOutput(_text_reader(None, fallback)), instructions=_TEXT_INSTRUCTIONS)
    if mode == "prompted" or mode == "text":
        return _prompted(output_type, fallback, recipients, constrain_json=constrain_json)
    if mode == "native":
        return OutputPlan(output_type=NativeOutput(output_type))
    tool = ToolOutput(output_type, name="final_result")
    if fallback is None:
        return OutputPlan(output_type=tool, streams=True)
    return OutputPlan(output_type=[tool, TextOutput(_text_reader(None, fallback))], streams=True)


_TEXT_INSTRUCTIONS = "Answer in plain text; your answer is delivered to whoever sent you the message."


def _prompted(
    output_type: Any, fallback: Callable[[str], Any] | None, recipients: Sequence[str], *, constrain_json: bool
) -> OutputPlan:
    item = messages_item_type(output_type)
    if item is not None:
        wire = _wire_model(tuple(recipients))
        schema = wire.model_json_schema()
        first = (recipients or ["@Name"])[0]
        example = {"messages": [{"recipient": first, "message_type": "response", "message": "..."}]}
        names = ", ".join(recipients) if recipients else "a team member's @Name or a role"
        instructions = (
            "Reply with one JSON object and nothing else, like this:\n"
            f"{json.dumps(example)}\n"
            f"recipient is one of: {names}. message_type is one of: request, response, instruction, "
            "notification, acknowledgment. To answer whoever asked you, send them a response. "
            f"When no reply is expected and you have nothing to send: {json.dumps(NOTHING)}"
        )
    else:
        wire = output_type
        schema = output_type.model_json_schema() if hasattr(output_type, "model_json_schema") else {}
        instructions = f"Reply with one JSON object and nothing else, matching this JSON schema:\n{json.dumps(schema)}"
    settings: dict[str, Any] = {}
    if constrain_json:
        settings["extra_body"] = {"response_format": {"type": "json_object", "schema": schema}}
    reader = _json_reader(output_type, wire if item is not None else None, fallback)
    return OutputPlan(output_type=TextOutput(reader), instructions=instructions, settings=settings)


@lru_cache(maxsize=128)
def _wire_model(recipients: tuple[str, ...]) -> type[BaseModel]:
    """The prompted-mode JSON shape: recipient first (so a grammar writes who before what)."""
    recipient: Any = Literal[recipients] if recipients else str  # type: ignore[valid-type]
    intent = Literal["request", "response", "instruction", "notification", "acknowledgment"]
    wire_item = create_model(
        "OutgoingMessage",
        recipient=(recipient, ...),
        message_type=(intent, ...),
        message=(str, Field(..., min_length=1)),
    )
    return create_model(
        "Reply",
        messages=(list[wire_item], Field(..., min_length=1, max_length=PROMPTED_MAX_ITEMS)),  # type: ignore[valid-type]
    )


def _strip(text: str) -> str:
    return _FENCE.sub("", text).strip()


def _extract_json(text: str) -> Any:
    """The first JSON object in ``text`` (a JSON code fence and chatter around it allowed), or
    None. Braces inside a code block in another language (```python) do not count."""
    body = _strip(_CODE_BLOCK.sub("", text))
    start = body.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(body[start:])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _cut_json(text: str) -> Any:
    """The reply's JSON object as far as it was written, when the text stops inside it (the
    model's ``max_tokens`` ran out): a string cut mid-way keeps what it had. None when the text
    is not a reply's JSON cut short (a syntax error, or prose with a brace in it)."""
    body = _strip(_CODE_BLOCK.sub("", text))
    start = body.find("{")
    if start < 0:
        return None
    try:
        value = pydantic_core.from_json(body[start:], allow_partial="trailing-strings")
    except ValueError:
        return None
    return value if isinstance(value, dict) and ("messages" in value or "message" in value) else None


#: The fence a JSON object sat in: its opening line just before it, its close just after.
_FENCE_OPEN = re.compile(r"```[ \t]*(?:json)?[ \t]*\s*\Z", re.IGNORECASE)
_FENCE_CLOSE = re.compile(r"\A\s*```")


def _answers_only(data: dict[str, Any]) -> bool:
    """Whether the reply's JSON only answers (``response``, or no intent given): the prose
    around it can then go back to the sender as the fallback sends it. An empty request to
    someone else is asked for again, so that a model can still fix it and delegate."""
    messages = data.get("messages")
    items = messages if isinstance(messages, list) else [data]
    return all(not isinstance(m, dict) or m.get("message_type") in (None, "response") for m in items)


def _prose_around(text: str, data: dict[str, Any]) -> str:
    """The text before the JSON object ``data`` in ``text`` (else the text after it), without the
    fence it sat in or the line that led into it ("... in JSON:"): what a reply whose JSON holds
    no message says. SmolLM2 answered "The capital of France is Paris." and then wrote the
    reply's JSON without its ``message``; asked again, it wrote the empty JSON alone until its
    retries ran out."""
    code = [m.span() for m in _CODE_BLOCK.finditer(text)]
    # where _extract_json found it: the first brace outside code in another language
    brace = next((m.start() for m in re.finditer(r"\{", text) if not any(a <= m.start() < b for a, b in code)), -1)
    try:
        value, end = json.JSONDecoder().raw_decode(text, brace) if brace >= 0 else (None, 0)
    except ValueError:
        return ""
    if value != data:
        return ""
    before, after = text[:brace], text[end:]
    if _FENCE_OPEN.search(before) and _FENCE_CLOSE.search(after):
        before, after = _FENCE_OPEN.sub("", before), _FENCE_CLOSE.sub("", after)
    lines = before.rstrip().split("\n")
    while lines and (not lines[-1].strip() or lines[-1].rstrip().endswith(":")):
        sentences = re.split(r"(?<=[.!?])\s+", lines.pop().strip())
        if len(sentences) > 1:  # "Paris. As JSON:": the sentences before the lead-in stay
            lines.append(" ".join(sentences[:-1]))
            break
    # what follows the JSON only when nothing came before it: after an answer it talks about
    # the JSON ("This response contains a JSON object ..."), and the model copied that onwards
    return "\n".join(lines).strip() or _strip(after)


def _text_reader(_: Any, fallback: Callable[[str], Any]) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        body = text.strip()
        if not body:
            raise ModelRetry("Your answer was empty. Answer in plain text.")
        return fallback(body)

    return read


def _json_reader(
    output_type: Any, wire: type[BaseModel] | None, fallback: Callable[[str], Any] | None
) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        if not text.strip():
            raise ModelRetry("Your answer was empty. Reply with the JSON object described in your instructions.")
        data = _extract_json(text)
        if data is None:
            data = _cut_json(text)  # cut off mid-way: deliver what was written (the run notes the cut)
        if wire is not None and data == NOTHING:
            return output_type.model_validate(data)
        if data is not None:
            try:
                if wire is not None:
                    data = wire.model_validate(data).model_dump()
                return output_type.model_validate(data)
            except ValidationError as exc:
                if wire is not None:
                    addressed = _as_addressed(output_type, data)
                    if addressed is not None:
                        return addressed
                if fallback is None:
                    raise ModelRetry(f"Your JSON did not match the schema: {_first_error(exc)}") from exc
                prose = _prose_of(data)
                if prose:
                    return fallback(prose)
                if not _tries_format(data) and not _strip(text).startswith("{"):
                    return fallback(text.strip())  # prose quoting a JSON object: the answer, as written
                around = _prose_around(text, data) if _answers_only(data) else ""
                if around:  # the answer in prose, then the reply's envelope with nothing in it
                    return fallback(_tidied(text, around))
                # JSON without any text to deliver: protocol debris, never a reply.
                raise ModelRetry(f"Your JSON did not match the format: {_first_error(exc)}") from exc
        if fallback is None:
            raise ModelRetry("Reply with one JSON object only, as described in your instructions.")
        # the text as the model wrote it: its code fences (```python) are part of the answer
        return fallback(text.strip())

    return read


def _as_addressed(output_type: Any, data: dict[str, Any]) -> Any:
    """The output as the model addressed it, when naming someone off the recipient list is
    all that is wrong with it (None otherwise). It then goes on like a tool call naming
    them: the recipient check asks the model to fix the names while retries last (an
    "@Role" naming a role it may hire is that role, as routing reads it), and routing
    reports what it still cannot deliver. Falling back to prose instead sent the
    text to the sender as an answer: a request to "@Nobody" became the reply, unreported."""
    try:
        return output_type.model_validate(_wire_model(()).model_validate(data).model_dump())
    except ValidationError:
        return None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    return f"{where}: {err.get('msg', '')}" if where else str(err.get("msg", ""))


def _prose_of(data: dict[str, Any]) -> str:
    """The text of a near-miss JSON reply (a ``message`` somewhere in it), for the fallback."""
    messages = data.get("messages")
    if isinstance(messages, list):
        texts = [m.get("message") for m in messages if isinstance(m, dict)]
        return "\n\n".join(t for t in texts if isinstance(t, str) and t.strip())
    for key in ("message", "answer", "response", "content", "text"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""
