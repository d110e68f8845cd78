"""Output streaming: the outgoing messages' text while the model is still writing them.

A run whose output type is StructuredOutput-like (a top-level ``messages`` list of
objects with ``recipient``, ``message_type`` and ``message``) is run with a pydantic-ai
``event_stream_handler``, which makes every model request of the run a streamed one.
:class:`OutputStreamer` follows the output tool call's arguments as they arrive and
publishes an :class:`OutputStreamEvent` per outgoing message (``messages[i]``):

- while the item is written, each time its ``message`` text grew by at least
  ``min_chars`` characters since the last event (``done=False``);
- once, when the item's JSON object is complete (``done=True``): a message with that
  text is about to be sent if the run succeeds;
- once, when the item will not be sent after all (``done=True, dropped=True``): the run
  failed or was interrupted, or the output was rejected and the model writes a new one
  (which starts a new ``attempt``).

Other output types are not streamed as messages (the run is not streamed at all).

Cost. Feeding a delta scans it once (a regex jumps over string bodies), so the scan is
O(delta) and only the item being written is kept. The open item is re-parsed with
``pydantic_core.from_json(..., allow_partial="trailing-strings")`` only after its raw JSON
grew by ``min_chars`` since the last parse: O(item) per parse, O(item² / min_chars) per
item in all. That is the same order as the events themselves, which carry the text so
far; a ``min_chars`` of 40 keeps it to one parse per ~10 tokens.

Importing this module does not import pydantic-ai (panels import the event).
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import from_json

if TYPE_CHECKING:
    from pydantic_ai import RunContext
    from pydantic_ai.messages import AgentStreamEvent
    from pydantic_ai.models import Model

__all__ = [
    "DEFAULT_MIN_CHARS",
    "OutputStreamEvent",
    "OutputStreamer",
    "StreamSink",
    "messages_item_type",
    "model_can_stream",
    "streams_messages",
]

log = logging.getLogger("aklab.llm")

DEFAULT_MIN_CHARS = 40
"""Publish a growing message again once its text grew by this many characters."""

_ITEM_FIELDS = frozenset({"recipient", "message_type", "message"})


class OutputStreamEvent(BaseModel):
    """An outgoing message of ``agent``'s run ``run_id`` as far as the model has written it."""

    #: Fanned out to subscribers live, never stored by the orchestrator (there are many).
    aklab_transient: ClassVar[bool] = True

    agent: str
    run_id: str
    attempt: int = 0
    """Which output of the run this belongs to: a rejected output is rewritten as the next attempt."""
    index: int
    """The position of the message in the output's ``messages``."""
    recipient: str = ""
    """As the model wrote it (``@Name`` or a role); empty until written in full."""
    message_type: str = ""
    """The intent; empty until written in full."""
    text: str = ""
    """The ``message`` text so far."""
    done: bool = False
    """The item is complete (its text is final), or it was dropped."""
    dropped: bool = False
    """The item will not be sent (run failed or interrupted, output rejected)."""


StreamSink = Callable[[OutputStreamEvent], None]


# -- what streams -------------------------------------------------------------------------
def messages_item_type(output_type: Any) -> type[BaseModel] | None:
    """The item model of a StructuredOutput-like type (``messages: list[Item]`` whose items
    have ``recipient`` and ``message``), else None."""
    if not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
        return None
    field = output_type.model_fields.get("messages")
    if field is None or get_origin(field.annotation) is not list:
        return None
    (item, *_) = get_args(field.annotation) or (None,)
    if isinstance(item, type) and issubclass(item, BaseModel) and {"recipient", "message"} <= set(item.model_fields):
        return item
    return None


@lru_cache(maxsize=64)
def streams_messages(output_type: Any) -> bool:
    """Is ``output_type`` StructuredOutput-like (a ``messages`` list of recipient/type/message objects)?"""
    item = messages_item_type(output_type)
    return item is not None and _ITEM_FIELDS <= set(item.model_fields)


def model_can_stream(model: Model) -> bool:
    """Does ``model`` implement streamed requests? Decided from its type, without a request."""
    from pydantic_ai.models import Model
    from pydantic_ai.models.fallback import FallbackModel
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.wrapper import WrapperModel

    if isinstance(model, FunctionModel):
        return model.stream_function is not None
    if isinstance(model, WrapperModel):
        return model_can_stream(model.wrapped)
    if isinstance(model, FallbackModel):
        return all(model_can_stream(m) for m in model.models)
    return type(model).request_stream is not Model.request_stream


# -- the incremental scanner ------------------------------------------------------------------
_STRUCTURAL = re.compile(r'[{}\[\]",:]')
_STRING_STOP = re.compile(r'["\\]')
_KEY_LIMIT = 32  # keys longer than this are never ours


class _MessagesScanner:
    """Finds the ``messages[i]`` objects of a JSON document fed in pieces.

    Tracks only nesting, strings and keys, looking at every character once. Depths: 1
    inside the top-level object, 2 inside its ``messages`` array, 3 inside an item.
    """

    def __init__(self) -> None:
        self.stack: list[str] = []  # the open containers, "{" or "["
        self.in_string = False
        self.escape = False
        self.string_is_key = False
        self.string_is_value = False
        self.string_depth = 0
        self.captured: list[str] = []
        self.captured_len = 0
        self.value_pending = False  # after ':' or inside an array: a string here is a value
        self.key1 = ""  # the last key of the top-level object
        self.key3 = ""  # the last key of the open item
        self.in_messages = False
        self.item_index = -1
        self.item_open = False
        self.item_parts: list[str] = []
        self.item_len = 0

    def open_value_key(self) -> str | None:
        """The key whose string value is being written in the open item, if any."""
        if self.in_string and self.string_is_value and self.string_depth == 3:
            return self.key3
        return None

    def item_raw(self) -> str:
        """The open item's JSON so far."""
        raw = "".join(self.item_parts)
        self.item_parts = [raw]
        return raw

    def feed(self, chunk: str) -> list[tuple[int, str]]:
        """Scan ``chunk``; returns the items it completed, as (index, raw JSON)."""
        closed: list[tuple[int, str]] = []
        stack = self.stack
        item_from: int | None = 0 if self.item_open else None
        i, n = 0, len(chunk)
        while i < n:
            if self.in_string:
                if self.escape:
                    self.escape = False
                    i += 1
                    continue
                m = _STRING_STOP.search(chunk, i)
                end = n if m is None else m.start()
                if self.string_is_key and self.captured_len <= _KEY_LIMIT:
                    self.captured.append(chunk[i:end])
                    self.captured_len += end - i
                if m is None:
                    break
                i = m.end()
                if m.group() == "\\":
                    self.escape = True
                    self.captured_len = _KEY_LIMIT + 1  # an escaped key is never one of ours
                    continue
                self.in_string = False
                if self.string_is_key:
                    key = "".join(self.captured) if self.captured_len <= _KEY_LIMIT else ""
                    if self.string_depth == 1:
                        self.key1 = key
                    else:
                        self.key3 = key
                continue
            m = _STRUCTURAL.search(chunk, i)
            if m is None:
                break
            c, i = m.group(), m.end()
            depth = len(stack)
            if c == '"':
                self.in_string = True
                self.string_depth = depth
                self.string_is_value = self.value_pending
                self.string_is_key = not self.value_pending and depth in (1, 3)
                self.captured, self.captured_len = [], 0
            elif c == ":":
                self.value_pending = True
            elif c == ",":
                self.value_pending = bool(stack) and stack[-1] == "["
            elif c == "{" or c == "[":
                if depth == 1 and c == "[" and stack[0] == "{" and self.key1 == "messages":
                    self.in_messages = True
                elif depth == 2 and c == "{" and self.in_messages:
                    self.item_index += 1
                    self.item_open = True
                    self.item_parts, self.item_len = [], 0
                    self.key3 = ""
                    item_from = m.start()
                stack.append(c)
                self.value_pending = c == "["
            elif stack:  # '}' or ']'
                stack.pop()
                if depth == 3 and self.item_open and item_from is not None:
                    self.item_parts.append(chunk[item_from:i])
                    closed.append((self.item_index, "".join(self.item_parts)))
                    self.item_open, self.item_parts, self.item_len, item_from = False, [], 0, None
                elif depth == 2:
                    self.in_messages = False
                self.value_pending = True
        if self.item_open and item_from is not None and item_from < n:
            self.item_parts.append(chunk[item_from:])
            self.item_len += n - item_from
        return closed


# -- the streamer ---------------------------------------------------------------------------------
@dataclass
class _Item:
    recipient: str = ""
    message_type: str = ""
    text: str = ""
    emitted: int = -1  # length of the text last published; -1: never published
    done: bool = False


def _parse(raw: str, *, partial: bool) -> dict[str, Any] | None:
    """``raw`` as a JSON object (a partial one if ``partial``), or None if it is not one.
    Keys only go to pydantic-core's process-wide string cache: values are message text,
    each seen once, and filled it with about one entry per turn (the B9 soak's top growth)."""
    try:
        data = from_json(raw, allow_partial="trailing-strings" if partial else False, cache_strings="keys")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


class OutputStreamer:
    """Follows one run's stream events and publishes its outgoing messages as they grow.

    Use :meth:`handle` as the run's ``event_stream_handler``, then call :meth:`finish`
    with the output when the run succeeded or :meth:`abort` when it did not. A sink that
    raises is logged, never raised into the run.
    """

    def __init__(self, *, agent: str, run_id: str, sink: StreamSink, min_chars: int = DEFAULT_MIN_CHARS) -> None:
        self.agent = agent
        self.run_id = run_id
        self.sink = sink
        self.min_chars = max(1, min_chars)
        self.attempt = -1
        self._items: dict[int, _Item] = {}
        self._scanner: _MessagesScanner | None = None
        self._part: int | None = None  # index of the output tool call part in the current response
        self._call_id: str | None = None
        self._dict_args = False
        self._parsed_at = 0
        self._sink_failed = False

    # -- pydantic-ai side -------------------------------------------------------------------
    async def handle(self, ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
        """The ``event_stream_handler``: called once per model request and per tool-call step."""
        from pydantic_ai.messages import (
            OutputToolResultEvent,
            PartDeltaEvent,
            PartEndEvent,
            PartStartEvent,
            ToolCallPart,
            ToolCallPartDelta,
        )

        self._part = None  # part indexes restart with every response
        async for event in events:
            if isinstance(event, PartDeltaEvent):
                if event.index == self._part and isinstance(event.delta, ToolCallPartDelta):
                    self._feed(event.delta.args_delta)
            elif isinstance(event, PartStartEvent):
                part = event.part
                if isinstance(part, ToolCallPart) and _is_output_tool(ctx, part.tool_name):
                    self._start(event.index, part.tool_call_id)
                    self._feed(part.args)
                elif event.index == self._part:
                    self._part = None  # the output part was replaced by something else
            elif isinstance(event, PartEndEvent):
                if event.index == self._part and self._dict_args and isinstance(event.part, ToolCallPart):
                    self._complete_all(event.part.args_as_dict())
            elif isinstance(event, OutputToolResultEvent):
                if event.part.tool_call_id == self._call_id and event.part.outcome != "success":
                    self._drop_all()  # rejected: the model will write another output

    def finish(self, output: Any) -> None:
        """The run succeeded with ``output``: settle what was streamed against it."""
        messages = getattr(output, "messages", None)
        final = messages if isinstance(messages, list) else []
        for index, item in list(self._items.items()):
            if index >= len(final):
                self._drop(index)
                continue
            req = final[index]
            fields = (_str(getattr(req, "recipient", "")), _str(getattr(req, "message_type", "")))
            text = _str(getattr(req, "message", ""))
            if not item.done or (item.recipient, item.message_type, item.text) != (*fields, text):
                item.recipient, item.message_type, item.text, item.done = *fields, text, True
                self._emit(index, item)
        self._items = {}

    def abort(self) -> None:
        """The run failed or was interrupted: nothing streamed will be sent."""
        self._drop_all()

    # -- attempts and items ---------------------------------------------------------------------
    def _start(self, part_index: int, call_id: str | None) -> None:
        self._drop_all()
        self.attempt += 1
        self._part, self._call_id = part_index, call_id
        self._scanner = _MessagesScanner()
        self._dict_args = False
        self._parsed_at = 0

    def _feed(self, args: object) -> None:
        scanner = self._scanner
        if scanner is None or self._dict_args:
            return
        if isinstance(args, dict):
            self._dict_args = True  # a provider sending whole objects: settled at the part's end
            return
        if not isinstance(args, str):
            return
        for index, raw in scanner.feed(args):
            self._complete(index, raw)
            self._parsed_at = 0
        if scanner.item_open and scanner.item_len - self._parsed_at >= self.min_chars:
            self._parsed_at = scanner.item_len
            self._grow(scanner)

    def _grow(self, scanner: _MessagesScanner) -> None:
        data = _parse(scanner.item_raw(), partial=True)
        if data is None:
            return
        item = self._items.setdefault(scanner.item_index, _Item())
        text = _str(data.get("message"))
        if len(text) - max(item.emitted, 0) < self.min_chars:
            return
        writing = scanner.open_value_key()  # a field still being written is not shown half-done
        item.recipient = _str(data.get("recipient")) if writing != "recipient" else ""
        item.message_type = _str(data.get("message_type")) if writing != "message_type" else ""
        item.text = text
        self._emit(scanner.item_index, item)

    def _complete(self, index: int, raw: str) -> None:
        self._complete_item(index, _parse(raw, partial=False) or _parse(raw, partial=True) or {})

    def _complete_all(self, args: dict[str, Any]) -> None:
        messages = args.get("messages")
        for index, data in enumerate(messages if isinstance(messages, list) else []):
            self._complete_item(index, data if isinstance(data, dict) else {})

    def _complete_item(self, index: int, data: dict[str, Any]) -> None:
        item = self._items.setdefault(index, _Item())
        item.recipient = _str(data.get("recipient"))
        item.message_type = _str(data.get("message_type"))
        item.text = _str(data.get("message"))
        item.done = True
        self._emit(index, item)

    def _drop(self, index: int) -> None:
        item = self._items.pop(index, None)
        if item is not None and item.emitted >= 0:
            self._emit(index, item, dropped=True)

    def _drop_all(self) -> None:
        for index in list(self._items):
            self._drop(index)

    def _emit(self, index: int, item: _Item, *, dropped: bool = False) -> None:
        item.emitted = len(item.text)
        event = OutputStreamEvent(
            agent=self.agent,
            run_id=self.run_id,
            attempt=max(self.attempt, 0),
            index=index,
            recipient=item.recipient,
            message_type=item.message_type,
            text=item.text,
            done=item.done or dropped,
            dropped=dropped,
        )
        try:
            self.sink(event)
        except Exception:
            if not self._sink_failed:  # once per run: a broken display must not flood the log
                self._sink_failed = True
                log.exception("%s: output stream sink failed", self.agent)


def _is_output_tool(ctx: RunContext[Any], name: str) -> bool:
    manager = ctx.tool_manager
    if manager is None or manager.tools is None:
        return name.startswith("final_result")
    tool_def = manager.get_tool_def(name)
    return tool_def is not None and tool_def.kind == "output"
