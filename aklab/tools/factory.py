"""ToolFactory: binds cards to their host once and serves each channel.

Tool functions are wrapped so that a ``ValueError`` or an ``AklabError`` (the way cards
report bad arguments: unknown id, path outside the workspace, ...) reaches the model as a
retry prompt it can act on, instead of failing the whole run. A tool marked with
:func:`aklab.tools.card.offered_when` is offered only on the steps where it can be used.

Every agent's cards hand out fresh closures, but the same code: the JSON schema and
argument validator pydantic-ai builds from a tool's signature are built once per tool
function (its code, name, docstring, annotations and defaults) and shared by every agent
of the process, each getting its own copy of the schema dicts. The cached schema keeps no
agent's function: it would keep that agent, and its whole closed team, alive.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai import ModelRetry, RunContext, Tool
from pydantic_ai._function_schema import FunctionSchema, function_schema
from pydantic_ai.tools import GenerateToolJsonSchema, ToolDefinition

from aklab.errors import AklabError
from aklab.tools._signature import SignatureCache
from aklab.tools.card import ToolCard, ToolHost
from aklab.tools.commands import CommandRegistry
from aklab.tools.context import ContextUpdater, ToolState

__all__ = ["ToolFactory"]


_schemas: SignatureCache[FunctionSchema] = SignatureCache()


def _model_facing(tool: Callable[..., Any]) -> Any:
    if not inspect.isfunction(tool):
        return tool  # a ready pydantic-ai Tool (or another callable): its author decides

    @functools.wraps(tool)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return tool(*args, **kwargs)
        except (ValueError, AklabError) as exc:
            raise ModelRetry(str(exc)) from exc

    check = getattr(tool, "__aklab_offered_when__", None)
    prepare = None
    if check is not None:

        def prepare(ctx: RunContext[Any], tool_def: ToolDefinition) -> ToolDefinition | None:
            return tool_def if check() else None

    sequential = bool(getattr(tool, "__aklab_in_order__", False))
    return Tool(call, prepare=prepare, function_schema=_schema_for(tool, call), sequential=sequential)


def _schema_for(tool: Callable[..., Any], call: Callable[..., Any]) -> FunctionSchema:
    """The schema pydantic-ai would build for ``call`` (Tool's defaults), built once per tool code."""
    cached = _schemas.get(tool, lambda _: _unbound(function_schema(call, GenerateToolJsonSchema)))
    return dataclasses.replace(
        cached,
        function=call,
        json_schema=copy.deepcopy(cached.json_schema),
        return_schema=copy.deepcopy(cached.return_schema),
        positional_fields=list(cached.positional_fields),
    )


def _unbound(schema: FunctionSchema) -> FunctionSchema:
    """``schema`` without its function: a cached schema must not keep the first agent alive."""
    return dataclasses.replace(schema, function=_no_function)


def _no_function(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a cached tool schema is always given its agent's function before use")


class ToolFactory:
    def __init__(self, cards: Sequence[ToolCard], host: ToolHost) -> None:
        self.cards = list(cards)
        self.host = host

    def get_tools(self) -> list[Any]:
        return [_model_facing(tool) for card in self.cards for tool in card.get_tools(self.host)]

    def get_system_prompts(self) -> list[str]:
        return [text for card in self.cards for text in card.get_system_prompts(self.host)]

    def get_context_states(self) -> dict[str, Callable[[], str]]:
        providers: dict[str, Callable[[], str]] = {}
        for card in self.cards:
            providers.update(card.get_context_states(self.host))
        return providers

    def get_context_updater(self, slot: Callable[[], ToolState]) -> ContextUpdater:
        return ContextUpdater(self.get_context_states(), slot)

    def get_command_registry(self, extra_commands: Sequence[Callable[..., Any]] = ()) -> CommandRegistry:
        registry = CommandRegistry()
        for card in self.cards:
            for command in card.get_commands(self.host):
                registry.register(command, card=card.card_name())
        for command in extra_commands:
            registry.register(command, card="builtin")
        return registry
