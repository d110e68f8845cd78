"""RecipientCheckCapability: tell the model which recipients it named cannot be reached.

While the run can still retry, an output naming an unknown ``@member`` or a role the
agent may not hire is rejected with ``ModelRetry`` saying which and why, so the model
can fix it, in every output mode. Once retries are spent, the output goes through:
routing delivers a response to whoever asked, and skips (and reports) anything else it
cannot deliver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.capabilities import AbstractCapability

from aklab.agent.utils import TeamResolver, why_unresolvable

__all__ = ["RecipientCheckCapability"]


@dataclass
class RecipientCheckCapability(AbstractCapability[Any]):
    team: TeamResolver

    async def after_output_process(self, ctx: RunContext[Any], *, output_context: Any, output: Any) -> Any:
        """After processing, not validation: pydantic-ai fires validate hooks only for output
        it parses, and a prompted-mode reply is text read by an output function."""
        requests = getattr(output, "messages", None)
        if not isinstance(requests, list) or ctx.retry >= ctx.max_retries or ctx.partial_output:
            return output
        problems = []
        for request in requests:
            recipient = getattr(request, "recipient", None)
            if isinstance(recipient, str):
                reason = why_unresolvable(self.team, recipient)
                if reason is not None:
                    problems.append(f"- {recipient}: {reason}")
        if problems:
            raise ModelRetry("Some recipients cannot be reached:\n" + "\n".join(problems))
        return output
