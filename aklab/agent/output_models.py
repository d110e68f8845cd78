"""What an agent's model produces: a list of outbound requests."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["REPLY_PROTOCOLS", "Intent", "Request", "StructuredOutput"]

Intent = Literal["request", "response", "instruction", "notification", "acknowledgment"]

#: One line per intent, put in front of a delivered message by ``render_for_llm``.
#: Message mechanics only (what arrived, whether a reply is expected): who should do
#: the work is each role's own prompt's business, never this table's.
#: Every line says whether a reply is expected.
REPLY_PROTOCOLS: dict[str, str] = {
    "request": "A reply is expected: send {sender} a response with the result.",
    "response": "It answers something you asked for; no reply is expected: use it and carry on.",
    "instruction": "Carry it out; no reply is expected unless {sender} asked for an acknowledgment.",
    "notification": "For your information; no reply is expected.",
    "acknowledgment": "Your message was received; no reply or action is expected.",
}


def _untitled(schema: dict[str, Any]) -> None:
    """Drop the schema's title: the tool's name says it, and it is sent on every request."""
    schema.pop("title", None)


class Request(BaseModel):
    # One outbound message chosen by the model. (A comment, not a docstring: a docstring
    # would become the schema's description, sent with every request of every agent.)
    # The field descriptions are as short as stays clear (issue 16).
    model_config = ConfigDict(json_schema_extra=_untitled)

    message_type: Intent = Field(
        description=(
            "request: do this and reply; instruction: do this; response: answers a request; "
            "notification: FYI; acknowledgment: confirms receipt"
        )
    )
    message: str = Field(description="What the recipient reads.")
    recipient: str = Field(description='"@Name" of a member, or a role to hire one.')


class StructuredOutput(BaseModel):
    """Everything the agent sends after this turn; empty means send nothing."""

    model_config = ConfigDict(json_schema_extra=_untitled)

    messages: list[Request] = Field(default_factory=list)
