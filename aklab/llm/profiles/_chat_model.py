"""pydantic-ai's ``OpenAIChatModel``, reading an error a server sent with status 200.

Some OpenAI-compatible servers and gateways answer a failed request with status 200 and an
error object for body (``{"error": {"message": "model overloaded", ...}}``). pydantic-ai
takes that body for a malformed completion ("Invalid response from ... chat completions
endpoint", and for a streamed request, a stream with nothing in it), so the server's message
never reached the human. Here such a body raises ``ModelAPIError`` carrying the error object,
which ``aklab.llm.failures`` reads the message from. An error event inside an SSE stream is
pydantic-ai's own to map (the SDK raises it), and needs nothing here; llama-server's other
shapes of one are rewritten to it by the HTTP client (``_sse_errors``).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.exceptions import ModelAPIError
from pydantic_ai.models.openai import OpenAIChatModel

__all__ = ["ChatModel", "error_at_200"]


def error_at_200(model_name: str, body: Any) -> ModelAPIError | None:
    """The error a 200 body holds instead of a completion (an ``error`` object, no ``choices``)."""
    if not isinstance(body, dict) or body.get("choices") or not body.get("error"):
        return None
    error = body["error"]
    fields = error if isinstance(error, dict) else {"message": error}
    message = fields.get("message")
    code, kind = fields.get("code"), fields.get("type")
    return ModelAPIError(
        model_name,
        message if isinstance(message, str) and message.strip() else json.dumps(error),
        body=fields,
        provider_error_code=str(code) if isinstance(code, str | int) else None,
        provider_error_type=kind if isinstance(kind, str) else None,
    )


class ChatModel(OpenAIChatModel):
    """``OpenAIChatModel`` that raises the error a 200 response holds, with the server's message."""

    def _validate_completion(self, response: Any) -> Any:
        error = error_at_200(self.model_name, {"choices": getattr(response, "choices", None), **_extra(response)})
        if error is not None:
            raise error
        return super()._validate_completion(response)

    async def _process_streamed_response(self, response: Any, *args: Any, **kwargs: Any) -> Any:
        http = getattr(response, "response", None)  # the SDK's stream over an httpx response
        # A JSON body answering a streamed request is no stream: read as SSE, it would be empty.
        if http is not None and http.headers.get("content-type", "").startswith("application/json"):
            try:
                body = json.loads(await http.aread())
            except ValueError:
                body = None
            error = error_at_200(self.model_name, body)
            if error is not None:
                raise error
        return await super()._process_streamed_response(response, *args, **kwargs)


def _extra(response: Any) -> dict[str, Any]:
    extra = getattr(response, "model_extra", None)
    return extra if isinstance(extra, dict) else {}
