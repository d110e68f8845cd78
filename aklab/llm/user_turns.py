"""One user message per turn on the wire.

pydantic-ai's chat-completions mapping sends every ``UserPromptPart`` of a request as a user
message of its own. A request the history shaped from two texts (the digest of old turns
and the message received, a kept prompt and the note about its failure) then goes out as two
user messages in a row, and the chat templates that insist on alternating roles (Gemma's and
Mistral's among those llama.cpp and vLLM serve) refuse the whole request. So, for every model
but the demo, adjacent plain-text user parts of a request are joined into one, on the wire
only: the history keeps its parts as they were (the digest is found by its part).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelRequest, UserPromptPart

from aklab.llm.system_state import SplitState, lift_state

__all__ = ["WireShape", "join_user_parts"]

SEPARATOR = "\n\n"


def _plain(part: Any) -> bool:
    return isinstance(part, UserPromptPart) and isinstance(part.content, str)


def _joined(parts: list[Any]) -> list[Any]:
    out: list[Any] = []
    for part in parts:
        if out and _plain(part) and _plain(out[-1]):
            out[-1] = dataclasses.replace(out[-1], content=f"{out[-1].content}{SEPARATOR}{part.content}")
        else:
            out.append(part)
    return out


def _carried(before: ModelRequest, request: ModelRequest) -> tuple[ModelRequest | None, ModelRequest]:
    """Two requests in a row whose user texts meet (the earlier one's last part, the later one's
    first): the earlier text moves into the later part (the earlier request is None if that
    left it empty)."""
    last: Any = before.parts[-1]
    first: Any = request.parts[0]
    joined = dataclasses.replace(first, content=f"{last.content}{SEPARATOR}{first.content}")
    rest = list(before.parts[:-1])
    kept = dataclasses.replace(before, parts=rest) if rest else None
    return kept, dataclasses.replace(request, parts=[joined, *request.parts[1:]])


def _meets(before: Any, request: ModelRequest) -> bool:
    return (
        isinstance(before, ModelRequest)
        and bool(before.parts)
        and bool(request.parts)
        and _plain(before.parts[-1])
        and _plain(request.parts[0])
    )


def join_user_parts(messages: list[Any]) -> list[Any]:
    """``messages`` with the user texts that would go out as user messages in a row joined
    into one: adjacent plain-text parts of a request, and those where two requests follow each
    other (a new list where anything changed; the messages given are not changed)."""
    out: list[Any] = []
    changed = False
    for message in messages:
        if isinstance(message, ModelRequest):
            parts = message.parts
            if any(_plain(a) and _plain(b) for a, b in itertools.pairwise(parts)):
                message = dataclasses.replace(message, parts=_joined(list(parts)))
                changed = True
            if out and _meets(out[-1], message):
                before, message = _carried(out.pop(), message)
                if before is not None:
                    out.append(before)
                changed = True
        out.append(message)
    return out if changed else messages


@dataclass
class WireShape(AbstractCapability[Any]):
    """Shapes the request on the wire, in this order: the team's latest full state block into
    the system message (``split``, see ``aklab.llm.system_state``), then one user message per
    turn (``join``). The order matters: the state block is found at the head of a user part,
    before a digest is joined in front of it."""

    split: SplitState | None = None
    join: bool = True

    async def prepare_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        messages = request_context.messages
        if self.split is not None:
            messages = lift_state(messages, self.split)
        if self.join:
            messages = join_user_parts(messages)
        if messages is request_context.messages:
            return request_context
        return dataclasses.replace(request_context, messages=messages)
