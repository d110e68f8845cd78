"""Keeping an agent's LLM history lean: what a run leaves behind, and how big it is.

- A successful run keeps what it did, less its **rejected attempts**: a response the
  output validation (or a tool's argument validation) refused, and the retry prompt that
  answered it, carry nothing the model needs later and cost tokens on every request.
- A failed run (provider error, cancelled, out of retries) collapses to its prompt and
  one line saying what happened, so that the agent still knows what it was asked without
  carrying the debris of the failure.
- Sizes are estimated from characters (about four per token) when a server reports no
  token counts; every estimate is marked as one where it is shown.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "collapse_failed_run",
    "estimate_tokens",
    "message_chars",
    "prune_rejected",
    "shrink_parts",
]

CHARS_PER_TOKEN = 4


def estimate_tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN) if chars > 0 else 0


def _part_chars(part: Any) -> int:
    content = getattr(part, "content", None)
    if isinstance(content, str):
        size = len(content)
    elif isinstance(content, Sequence) and not isinstance(content, str | bytes):
        size = sum(len(c) if isinstance(c, str) else 256 for c in content)  # media: a flat guess
    elif content is not None:
        try:
            size = len(json.dumps(content, default=str))
        except (TypeError, ValueError):
            size = len(str(content))
    else:
        size = 0
    if isinstance(part, ToolCallPart):
        size += len(part.tool_name) + len(part.args_as_json_str())
    return size + 8  # role/part framing


def message_chars(messages: Iterable[ModelMessage]) -> int:
    """Characters the messages put on the wire (text, tool calls and returns), roughly."""
    return sum(_part_chars(p) for m in messages for p in m.parts)


def _is_retry(part: Any) -> bool:
    """A part that answers a rejected response: feedback, a retried tool call, or the old retry prompt."""
    if isinstance(part, RetryFeedbackPart | RetryPromptPart):
        return True
    return isinstance(part, ToolReturnPart) and part.outcome == "retried"


def prune_rejected(messages: list[ModelMessage], start: int = 0) -> list[ModelMessage]:
    """``messages`` without the rejected attempts made at or after index ``start``.

    A response answered by retry parts keeps only the tool calls that were answered
    normally; its request keeps only its non-retry parts; whichever ends up empty goes.
    """
    out = list(messages[:start])
    tail = messages[start:]
    i = 0
    while i < len(tail):
        msg = tail[i]
        nxt = tail[i + 1] if i + 1 < len(tail) else None
        if isinstance(msg, ModelResponse) and isinstance(nxt, ModelRequest) and any(map(_is_retry, nxt.parts)):
            kept_req = [p for p in nxt.parts if not _is_retry(p)]
            answered = {p.tool_call_id for p in kept_req if isinstance(p, ToolReturnPart)}
            kept_resp = [p for p in msg.parts if isinstance(p, ToolCallPart) and p.tool_call_id in answered]
            if kept_resp:
                out.append(dataclasses.replace(msg, parts=kept_resp))
            if kept_req:
                out.append(dataclasses.replace(nxt, parts=kept_req))
            i += 2
            continue
        out.append(msg)
        i += 1
    return out


def collapse_failed_run(history: list[ModelMessage], run: list[ModelMessage], line: str) -> list[ModelMessage]:
    """``history`` plus the failed ``run`` reduced to its prompt and ``line``.

    ``run`` is what the run appended (its first request holds the prompt, and the system
    prompt when the history was empty); when it is empty, the prompt never went out.
    """
    first = next((m for m in run if isinstance(m, ModelRequest)), None)
    if first is None:
        return list(history)
    parts = [p for p in first.parts if not (_is_retry(p) or isinstance(p, ToolReturnPart))]
    if not any(isinstance(p, UserPromptPart) for p in parts):
        return list(history)
    return [*history, dataclasses.replace(first, parts=parts), ModelResponse(parts=[TextPart(line)])]


def shrink_parts(messages: list[ModelMessage], budget_chars: int) -> tuple[list[ModelMessage], int]:
    """Cut the longest text contents until the messages fit ``budget_chars``; returns (messages, cut).

    For one run too big to fit even alone: compaction by runs cannot help it.
    """
    total = message_chars(messages)
    if total <= budget_chars:
        return messages, 0
    out = list(messages)
    cut = 0
    sizes = sorted(
        (
            (len(content), mi, pi)
            for mi, m in enumerate(out)
            for pi, p in enumerate(m.parts)
            if isinstance(content := getattr(p, "content", None), str) and len(content) > 400
        ),
        reverse=True,
    )
    for size, mi, pi in sizes:
        if total - cut <= budget_chars:
            break
        keep = max(200, size - (total - cut - budget_chars))
        msg: Any = out[mi]
        part: Any = msg.parts[pi]
        text: str = part.content
        note = f"\n[... {size - keep} characters cut to fit the context ...]\n"
        new = text[: keep // 2] + note + text[-keep // 2 :]
        parts: list[Any] = list(msg.parts)
        parts[pi] = dataclasses.replace(part, content=new)
        out[mi] = dataclasses.replace(msg, parts=parts)
        cut += size - len(new)
    return out, cut
