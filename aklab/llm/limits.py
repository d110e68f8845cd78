"""Usage limits in two tiers, and the errors they raise.

::

    AklabError
    └── UsageLimitError              any usage limit was hit
        ├── RunUsageLimitError       one run() went over its RunUsageLimits
        └── AgentUsageLimitError     the agent's lifetime AgentUsageLimits are spent

The run tier is enforced by pydantic-ai inside each run; the agent tier is checked by
:class:`AgentBudget` before each run, from counters that are rebuilt from usage events
(so they survive a restore).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from aklab._text import counted
from aklab.errors import AklabError
from aklab.llm.usage import AgentUsageSummary, UsageTotals

if TYPE_CHECKING:
    from pydantic_ai import usage as pai_usage

    from aklab.llm.usage import LlmUsageEvent

__all__ = [
    "AgentBudget",
    "AgentUsageLimitError",
    "AgentUsageLimits",
    "RunUsageLimitError",
    "RunUsageLimits",
    "UsageLimitError",
    "UsageLimits",
]


class UsageLimitError(AklabError):
    """A usage limit was hit (either tier). Catch this to handle both."""


class RunUsageLimitError(UsageLimitError):
    """One run went over its ``RunUsageLimits``."""


class AgentUsageLimitError(UsageLimitError):
    """The agent's lifetime ``AgentUsageLimits`` are spent; no new run may start."""


class RunUsageLimits(BaseModel):
    """Budget for one run; counts reset every run. ``None`` means no cap."""

    model_config = ConfigDict(extra="forbid")  # a misspelt limit is an error, not a cap silently unset

    run_request_limit: int | None = 50
    tool_calls_limit: int | None = None
    input_tokens_limit: int | None = None
    output_tokens_limit: int | None = None
    total_tokens_limit: int | None = None

    def to_pydantic_ai(self) -> pai_usage.UsageLimits:
        from pydantic_ai.usage import UsageLimits as PaiUsageLimits

        return PaiUsageLimits(
            request_limit=self.run_request_limit,
            tool_calls_limit=self.tool_calls_limit,
            input_tokens_limit=self.input_tokens_limit,
            output_tokens_limit=self.output_tokens_limit,
            total_tokens_limit=self.total_tokens_limit,
        )


class UsageLimits(RunUsageLimits):
    """Deprecated: the pre-split name of the run tier. Use ``RunUsageLimits``.

    Accepts the old field name ``request_limit`` for ``run_request_limit``.
    """

    def __init__(self, **data: Any) -> None:
        warnings.warn(
            "UsageLimits is deprecated: use RunUsageLimits (request_limit is now run_request_limit)",
            DeprecationWarning,
            stacklevel=2,
        )
        if "request_limit" in data:
            data["run_request_limit"] = data.pop("request_limit")
        super().__init__(**data)


class AgentUsageLimits(BaseModel):
    """Budget for the agent's whole life. All ``None`` (the default) never blocks."""

    model_config = ConfigDict(extra="forbid")

    agent_request_limit: int | None = None
    """How many runs the agent may start."""
    input_tokens_limit: int | None = None
    output_tokens_limit: int | None = None
    total_tokens_limit: int | None = None


#: How many recent run ids an ``AgentBudget`` remembers to count each run once. A run's
#: usage events arrive while it runs, so only the latest few matter.
RECENT_RUN_IDS = 256


class AgentBudget:
    """Lifetime counters of one agent, checked before each run.

    Token limits bound where a run may *start*: the run that crosses the line finishes,
    and the next one is refused. A run counts against ``agent_request_limit`` before
    it executes, so a run that fails partway still counts.
    """

    def __init__(self, limits: AgentUsageLimits) -> None:
        self.limits = limits
        self.runs = 0
        self.input_tokens = 0
        self.output_tokens = 0
        # The runs counted lately (their usage events follow the start), newest last:
        # bounded, so a long-lived agent does not keep every run id it ever made.
        self._seen_runs: dict[str, None] = {}
        self._summary = AgentUsageSummary(agent="")

    def rebuild(self, events: Iterable[LlmUsageEvent]) -> None:
        """Recompute the counters from usage events (e.g. after a restore)."""
        self.runs = self.input_tokens = self.output_tokens = 0
        self._seen_runs.clear()
        self._summary = AgentUsageSummary(agent="")
        for event in events:
            self.record(event)

    def record(self, event: LlmUsageEvent) -> None:
        if event.run_id not in self._seen_runs:
            self._see(event.run_id)
            self.runs += 1
        self.input_tokens += event.input_tokens or 0
        self.output_tokens += event.output_tokens or 0
        self._summary.total.add(event)
        self._summary.by_model.setdefault(event.model, UsageTotals()).add(event)

    def summary(self, agent: str) -> AgentUsageSummary:
        """Everything this agent used, in total and by model, since it started (or was
        restored): kept as running sums, so it costs the same after a million requests."""
        return self._summary.model_copy(update={"agent": agent}, deep=True)

    def start_run(self, run_id: str) -> None:
        """Check every limit, then count the run. Raises ``AgentUsageLimitError``."""
        lim = self.limits
        checks = [
            (lim.agent_request_limit, self.runs, "run"),
            (lim.input_tokens_limit, self.input_tokens, "input tokens"),
            (lim.output_tokens_limit, self.output_tokens, "output tokens"),
            (lim.total_tokens_limit, self.input_tokens + self.output_tokens, "total tokens"),
        ]
        for limit, used, what in checks:
            if limit is not None and used >= limit:
                spent = f"{counted(used, 'run')} (agent_request_limit)" if what == "run" else f"{used:,} {what}"
                raise AgentUsageLimitError(
                    f"agent lifetime limit reached: {spent} used of {limit:,}; "
                    "raise AgentUsageLimits to let this agent run again"
                )
        self._see(run_id)
        self.runs += 1

    def _see(self, run_id: str) -> None:
        self._seen_runs[run_id] = None
        if len(self._seen_runs) > RECENT_RUN_IDS:
            del self._seen_runs[next(iter(self._seen_runs))]
