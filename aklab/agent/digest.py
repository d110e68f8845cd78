"""The digest line of an agent's old turn: who wrote what, and what the agent sent.

An agent's turn starts from a delivered message (``AgentMessage.render_for_llm``, after
any notes and context-update blocks) and ends in its output: messages to members (the
output tool's arguments, or the same JSON as text in prompted mode), plain text, or
nothing. A folded turn becomes one line, e.g.::

    @Human request: Add a login form ⇒ @Developer request: Build the login form…

Context-update blocks are not quoted: the state they carried is sent again in full
when their markers leave the history (``aklab.tools.context``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, UserPromptPart

from aklab.llm.history import plain_run_line, shorten

__all__ = ["turn_line"]

_RECEIVED = re.compile(r"(?:\A|\n\n)You received an? (\w+) from (\S+?)\. [^\n]*\n\n(.*)\Z", re.S)


def _sent(args: Any, width: int, received: str = "") -> list[str] | None:
    """``messages`` of an output (dict or JSON text) as digest items, or None if it is not one.

    A message that passes on the received text unchanged says so instead of quoting it again.
    """
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict) or not isinstance(args.get("messages"), list):
        return None
    items = []
    for item in args["messages"]:
        if isinstance(item, dict):
            recipient = item.get("recipient", "?")
            kind = item.get("message_type", "message")
            text = str(item.get("message", ""))
            same = bool(received) and text.strip() == received.strip()
            quoted = "(passed on as received)" if same else shorten(text, width)
            items.append(f"{recipient} {kind}: {quoted}")
    return items


def turn_line(run: Sequence[ModelMessage], width: int = 60) -> str | None:
    """One line for a finished turn; falls back to the plain line for anything else."""
    prompt = "\n\n".join(
        p.content for m in run[:1] for p in m.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)
    )
    received = _RECEIVED.search(prompt)
    if received is None:
        return plain_run_line(run, width)
    kind, sender, content = received.groups()
    outputs: list[str] = []
    tools: list[str] = []
    for message in run:
        if not isinstance(message, ModelResponse):
            continue
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                sent = _sent(part.args, width, content)
                if sent is None:
                    tools.append(part.tool_name)
                else:
                    outputs.extend(sent or ["sent nothing"])
            elif isinstance(part, TextPart) and part.content.strip():
                sent = _sent(part.content.strip(), width, content)
                outputs.extend(sent if sent is not None else [shorten(part.content, width)])
    if tools:
        outputs.insert(0, f"used {', '.join(dict.fromkeys(tools))}")
    return f"{sender} {kind}: {shorten(content, width)} ⇒ {'; '.join(outputs) or 'no answer'}"
