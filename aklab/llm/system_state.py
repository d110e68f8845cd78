"""The team's full state, sent in the system message (open models).

An agent's first prompt opens with a full snapshot of the team's state (a context-update
block), then the message it received; later prompts carry only what changed, until old turns
are folded into a digest and the whole state is sent again at the head of a later turn.
Small open models served through the OpenAI-compatible dialect read such a block at the head
of a turn as the start of a document to continue (SmolLM2-135M answered "What is the capital
of France?" in invented French). Measured on SmolLM2: see ``Profile.state_in_system``.

So, for models whose profile asks for it (``Profile.state_in_system``), each request sends
the latest full block as a system-prompt part after the first request's own, where the
dialect's single system message takes it in. Only the request on the wire changes: the
history keeps every block where the agent put it (resume, digests and context-update markers
read it there). What counts as a full block is the agent's to say (``split``): this layer
knows no block format. ``aklab.llm.user_turns.WireShape`` applies it on each request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from pydantic_ai.messages import ModelRequest, ModelRequestPart, SystemPromptPart, UserPromptPart

__all__ = ["SplitState", "lift_state"]

SplitState = Callable[[str], "tuple[str, str] | None"]
"""A prompt's leading full state block and the rest of the prompt, or None when it opens with none."""


def lift_state(messages: list[Any], split: SplitState) -> list[Any]:
    """``messages`` with the latest full state block (at the head of a user prompt) moved into a
    system-prompt part after the first request's own (a new list; the messages given are not
    changed). The latest: once old turns are folded into a digest, the block that opened the
    conversation is gone, and the team sends the whole state again at the head of a later turn."""
    if not messages or not isinstance(messages[0], ModelRequest):
        return messages
    for at in range(len(messages) - 1, -1, -1):
        request = messages[at]
        if not isinstance(request, ModelRequest):
            continue
        for i, part in enumerate(request.parts):
            if not isinstance(part, UserPromptPart) or not isinstance(part.content, str):
                continue
            found = split(part.content)
            if found is None:
                continue
            state, rest = found
            out = list(messages)
            parts = list(request.parts)
            parts[i] = dataclasses.replace(part, content=rest)
            out[at] = dataclasses.replace(request, parts=parts)
            head: list[ModelRequestPart] = list(out[0].parts)
            leading = next((j for j, p in enumerate(head) if not isinstance(p, SystemPromptPart)), len(head))
            head.insert(leading, SystemPromptPart(state))
            out[0] = dataclasses.replace(out[0], parts=head)
            return out
    return messages
