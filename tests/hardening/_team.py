"""Scripted teams for the hardening tests: FunctionModels that route by who wrote to them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.lab.teams import TeamSpec
from tests.helpers import card

Route = tuple[str, str, str]  # recipient, intent, text

_FROM = re.compile(r"You received an? (\w+) from (@\w+)\.")


def incoming(messages: list[ModelMessage]) -> tuple[str, str]:
    """(sender, whole prompt text) of the turn being answered."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if part.part_kind == "user-prompt":
                    content = part.content
                    text = content if isinstance(content, str) else "\n".join(c for c in content if isinstance(c, str))
                    found = _FROM.findall(text)
                    return (found[-1][1] if found else "?", text)
    return "?", ""


def reply(info: AgentInfo, routes: list[Route]) -> ModelResponse:
    """The output tool call delivering ``routes``."""
    args = {"messages": [{"recipient": r, "message_type": t, "message": m} for r, t, m in routes]}
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(args))])


def scripted(decide: Callable[[str, str, int], list[Route]]) -> FunctionModel:
    """A model answering each turn with ``decide(sender, text, turn_number)``'s routes."""
    turns = [0]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turns[0] += 1
        sender, text = incoming(messages)
        return reply(info, decide(sender, text, turns[0]))

    return FunctionModel(model)


def team(*cards: Any, entry: str) -> TeamSpec:
    return TeamSpec("hardening", list(cards), entry, [c.config.role for c in cards])


def answer_human_else(other: str, text: Callable[[int], str]) -> Callable[[str, str, int], list[Route]]:
    """Answer "hello" from the human at once; anything else goes on to ``other`` (a loop)."""

    def decide(sender: str, prompt: str, turn: int) -> list[Route]:
        if sender == "@Human" and prompt.rstrip().endswith("hello"):
            return [("@Human", "response", "hi there")]
        return [(other, "request", text(turn))]

    return decide


__all__ = ["answer_human_else", "card", "incoming", "reply", "scripted", "team"]
