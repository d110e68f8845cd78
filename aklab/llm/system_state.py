"""The team state that opens a conversation, sent in the system message (open models).

An agent's first prompt opens with a full snapshot of the team's state (a context-update
block), then the message it received. Small open models served through the OpenAI-compatible
dialect read that block as the start of a document to continue (SmolLM2-135M answered "What
is the capital of France?" in invented French). Measured on SmolLM2: see ``Profile.state_in_system``.

So, for models whose profile asks for it (``Profile.state_in_system``), each request sends
that leading block as a system-prompt part ahead of the user's turn, where the dialect's
single system message takes it in. Only the request on the wire changes: the history keeps
the block where the agent put it (resume, digests and context-update markers read it there).
What counts as the leading block is the agent's to say (``split``): this layer knows no
block format.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelRequest, ModelRequestPart, SystemPromptPart, UserPromptPart

__all__ = ["SplitState", "StateInSystem", "lift_leading_state"]

SplitState = Callable[[str], "tuple[str, str] | None"]
"""A first prompt's leading state block and the rest of the prompt, or None when it opens with none."""


def lift_leading_state(messages: list[Any], split: SplitState) -> list[Any]:
    """``messages`` with the first request's leading state block moved into a system-prompt
    part after its own (a new list; the messages given are not changed)."""
    if not messages or not isinstance(messages[0], ModelRequest):
        return messages
    first = messages[0]
    parts = list(first.parts)
    for i, part in enumerate(parts):
        if isinstance(part, SystemPromptPart):
            continue
        if not isinstance(part, UserPromptPart) or not isinstance(part.content, str):
            return messages
        found = split(part.content)
        if found is None:
            return messages
        state, rest = found
        lifted: list[ModelRequestPart] = [SystemPromptPart(state), dataclasses.replace(part, content=rest)]
        return [dataclasses.replace(first, parts=[*parts[:i], *lifted, *parts[i + 1 :]]), *messages[1:]]
    return messages


@dataclass
class StateInSystem(AbstractCapability[Any]):
    """Sends the leading state block of the conversation in the system message (the wire only)."""

    split: SplitState

    async def prepare_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        messages = lift_leading_state(request_context.messages, self.split)
        if messages is request_context.messages:
            return request_context
        return dataclasses.replace(request_context, messages=messages)
