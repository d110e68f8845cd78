"""A tool call cut off at the model's max_tokens ends the run at once.

pydantic-ai answers a tool call whose arguments do not parse with a retry prompt, and only
once the retries are spent does it say the call was cut (``IncompleteToolCall``). When the
call was cut because the response reached ``max_tokens`` (finish reason "length"), each
retry is sent with the same limit and is likely cut again: up to four requests' tokens for
nothing. So the first such response ends the run with that error (raised by the run's
request tap, ``aklab.llm.react``, right after it records the request), which the human reads as
"raise --max-tokens" (``aklab.llm.failures``). Nothing retries with a bigger limit.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.exceptions import IncompleteToolCall
from pydantic_ai.messages import ModelResponse, ToolCallPart

__all__ = ["cut_tool_call", "incomplete"]


def cut_tool_call(response: ModelResponse) -> ToolCallPart | None:
    """The response's last tool call, if the token limit cut it off before its arguments ended
    (pydantic-ai's own test for ``IncompleteToolCall``)."""
    if response.finish_reason != "length" or not response.parts:
        return None
    last = response.parts[-1]
    if not isinstance(last, ToolCallPart):
        return None
    try:
        last.args_as_dict(raise_if_invalid=True)
    except Exception:
        return last
    return None


def incomplete(call: ToolCallPart, request_context: Any) -> IncompleteToolCall:
    """The error that ends a run whose response cut ``call`` off (``cut_tool_call``), raised by
    the run's request tap once the request is recorded (rather than by a capability of its
    own: one hook fewer on every request)."""
    settings = getattr(request_context, "model_settings", None) or {}
    limit = settings.get("max_tokens") or "provider default"
    return IncompleteToolCall(
        f"Model token limit ({limit}) exceeded while generating a call of {call.tool_name}, "
        "resulting in incomplete arguments"
    )
