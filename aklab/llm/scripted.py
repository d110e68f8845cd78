"""Scripted models: a list of turns played in order, for tests that need exact outputs."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

__all__ = ["Turn", "scripted_model"]

#: A turn is the output's arguments (a dict), a ready ModelResponse, or a function of
#: (messages, info) returning either.
Turn = dict[str, Any] | ModelResponse | Callable[[list[ModelMessage], AgentInfo], Any]


def scripted_model(turns: Sequence[Turn], *, model_name: str = "scripted", repeat_last: bool = False) -> FunctionModel:
    """A FunctionModel answering with ``turns`` in order (thread-safe).

    Running out of turns raises ``IndexError`` unless ``repeat_last`` is set.
    """
    lock = threading.Lock()
    position = [0]

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        with lock:
            i = position[0]
            if i >= len(turns) and not (repeat_last and turns):
                raise IndexError(f"scripted model ran out of turns after {len(turns)}")
            position[0] += 1
            turn = turns[min(i, len(turns) - 1)]
        if callable(turn) and not isinstance(turn, ModelResponse):
            turn = turn(messages, info)
        if isinstance(turn, ModelResponse):
            return turn
        body = json.dumps(turn)
        usage = RequestUsage(input_tokens=100, output_tokens=max(1, len(body) // 4))
        if info.output_tools:
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, body)], usage=usage)
        return ModelResponse(parts=[TextPart(str(turn))], usage=usage)

    return FunctionModel(respond, model_name=model_name)
