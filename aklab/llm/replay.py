"""Answers a model already gave, given again instead of asking it twice.

When a kernel dies while a member handles a message, the resume has the member handle that
message again. The answers its model had given by then were stored as they arrived
(``ModelResponseEvent``); the handling done again takes them, in order, instead of sending
those requests to the model again: they were paid for once. A request beyond them goes to
the model as usual.

:class:`Replay` is a pydantic-ai capability given to that run only: its
``wrap_model_request`` returns the next stored answer without calling the model (pydantic-ai
then skips the request's inner hooks, so aklab's request tap reports no usage for it: the
usage of those requests is stored already, or the resume records it from the stored answers).

:func:`in_process` tells which models answer from code in this process (the demo model,
``FunctionModel``, ``TestModel``): asking them again costs nothing, so their answers are not
stored for this.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.models.wrapper import WrapperModel

__all__ = ["Replay", "in_process"]


def in_process(model: Model) -> bool:
    """Whether ``model`` answers from code in this process (asking it again costs nothing)."""
    while isinstance(model, WrapperModel):
        model = model.wrapped
    return isinstance(model, FunctionModel | TestModel)


@dataclass
class Replay(AbstractCapability[Any]):
    """Answers the next model requests of a run with ``responses``, in order, then lets the
    rest through. The queue is shared: the runs of one handling (a compaction's summary, the
    turn, a retry) take the answers in the order they first asked for them."""

    responses: deque[ModelResponse] = field(default_factory=deque)

    async def wrap_model_request(self, ctx: RunContext[Any], *, request_context: Any, handler: Any) -> ModelResponse:
        if not self.responses:
            return await handler(request_context)  # type: ignore[no-any-return]
        return self.responses.popleft()
