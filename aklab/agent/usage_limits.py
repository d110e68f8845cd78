"""What the agent does with a usage-limit error that reached it: tell the human, stop.

Both tiers take the same path. The guard sits on ``act()`` and ``compact()`` (the two
methods that reach the model), so a subclass inherits it by calling ``act()``. This
module does not import ``agent.py``; what it needs of an agent is ``AgentLike``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from aklab.errors import AklabError
from aklab.llm import UsageLimitError

__all__ = ["AgentLike", "WarningError", "escalate_usage_limit", "guard_usage_limits"]

F = TypeVar("F", bound=Callable[..., Any])


class WarningError(AklabError):
    """A turn ended on a usage limit; the human has been told."""


class AgentLike(Protocol):
    @property
    def name(self) -> str: ...
    def notify_human(self, text: str) -> None: ...


def escalate_usage_limit(agent: AgentLike, error: UsageLimitError) -> WarningError:
    agent.notify_human(f"{agent.name} stopped: {error}")
    return WarningError(str(error))


def guard_usage_limits() -> Callable[[F], F]:
    """Decorator: a ``UsageLimitError`` notifies the human and becomes ``WarningError``."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def guarded(self: AgentLike, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except UsageLimitError as error:
                raise escalate_usage_limit(self, error) from error

        return cast(F, guarded)

    return decorate
