"""A worked example of a second agent class: its own message, its own output, its own routing.

``CustomAgent`` triages incoming tickets. It declares nothing for usage limits or
cancellation: both come with ``act()``. A breached turn still concludes in
``TriageOutput``; a cancelled turn returns ``TriageOutput()`` (no handoffs). Its
``AuditCapability`` shows the ``extra_capabilities()`` hook: it runs around every model
request, after the framework's own mailbox capability.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability

from aklab.agent.agent import BaseAgent
from aklab.agent.messages import AgentMessage
from aklab.agent.utils import resolve_recipient
from aklab.core import ActorAddress, Message

__all__ = ["AuditCapability", "CustomAgent", "Handoff", "TriageMessage", "TriageOutput"]


class TriageMessage(Message):
    """A support ticket to triage."""

    ticket: str
    severity: str = "normal"

    def render_for_llm(self) -> str:
        return (
            f"Triage this {self.severity}-severity ticket: hand it off to the members or roles "
            f"who should handle it, with a task for each.\n\n{self.ticket}"
        )


class Handoff(BaseModel):
    recipient: str = Field(description='"@Name" of a member, or a role to hire')
    task: str


class TriageOutput(BaseModel):
    handoffs: list[Handoff] = Field(default_factory=list)


@dataclass
class AuditCapability(AbstractCapability[Any]):
    """Counts the model requests an agent makes (an observability example)."""

    agent_name: str
    requests: list[int] = field(default_factory=list)

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        self.requests.append(ctx.run_step)
        return request_context


class CustomAgent(BaseAgent):
    def extra_capabilities(self) -> list[Any]:
        self.audit = AuditCapability(self.config.name)
        return [self.audit]

    def _route_triage(self, output: TriageOutput) -> bool:
        """Deliver each handoff; report whether anything actually went out."""
        delivered = False
        for handoff in output.handoffs:
            member = resolve_recipient(self, handoff.recipient)
            if member is None:
                continue
            self.send(member, AgentMessage(content=handoff.task, type="request"))
            delivered = True
        return delivered

    def receiveMsg_TriageMessage(self, message: TriageMessage, sender: ActorAddress | None) -> None:
        output = self.act(message, TriageOutput)
        self._route_triage(output)

    def audited_requests(self) -> int:
        return len(self.audit.requests)
