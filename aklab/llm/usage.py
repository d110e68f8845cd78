"""Usage records and their aggregation.

Every model request produces one :class:`LlmUsageEvent` (a failed one too: it was sent);
every tool call one :class:`ToolCallEvent`.

- Tokens are what the provider reported. When it reported none (a streaming
  llama.cpp server never does), aklab estimates them from the characters sent and
  received and sets ``estimated``; when nothing can be known (a request cut off before
  any answer), they are ``None``, never a made-up 0.
- ``cost_usd`` comes from genai-prices (through pydantic-ai) for cloud models
  (``cost_source="genai-prices"``), is 0 for a server on this machine
  (``cost_source="local"``), and is ``None`` when the model cannot be priced.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from aklab._text import totals_text

__all__ = ["AgentUsageSummary", "LlmUsageEvent", "ToolCallEvent", "UsageTotals", "aggregate_usage", "headline"]


def _now() -> datetime:
    return datetime.now(UTC)


class LlmUsageEvent(BaseModel):
    """Tokens and cost of one model request."""

    agent: str
    role: str = ""
    run_id: str
    model: str
    ask_id: str | None = None
    """The human message this request served (see ``aklab.core._asks``)."""
    requests: int = 1
    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    cost_source: str | None = None
    """``genai-prices``, ``local`` (a server on this machine: free), or None (unpriced)."""
    estimated: bool = False
    """The token counts are aklab's estimate (the provider reported none)."""
    ok: bool = True
    """False for a request that failed or was cut off (it was still sent, and counts)."""
    started_at: datetime = Field(default_factory=_now)
    duration_s: float = 0.0

    @property
    def total_tokens(self) -> int:
        return (self.input_tokens or 0) + (self.output_tokens or 0)


class ToolCallEvent(BaseModel):
    """One tool call made by an agent's model."""

    agent: str
    run_id: str
    tool_name: str
    args: str = ""
    ok: bool = True


class UsageTotals(BaseModel):
    """Summed usage. ``cost_usd`` is None if any request could not be priced."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = 0.0
    unpriced_requests: int = 0
    estimated_requests: int = 0
    """Requests whose tokens are aklab's estimate."""
    unknown_token_requests: int = 0
    """Requests whose tokens are unknown (counted as 0 in the sums)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, event: LlmUsageEvent) -> None:
        self.requests += event.requests
        if event.input_tokens is None and event.output_tokens is None:
            self.unknown_token_requests += event.requests
        self.estimated_requests += event.requests if event.estimated else 0
        self.input_tokens += event.input_tokens or 0
        self.output_tokens += event.output_tokens or 0
        self.cache_read_tokens += event.cache_read_tokens
        self.cache_write_tokens += event.cache_write_tokens
        if event.cost_usd is None:
            self.unpriced_requests += event.requests
            self.cost_usd = None
        elif self.cost_usd is not None:
            self.cost_usd += event.cost_usd


class AgentUsageSummary(BaseModel):
    """Usage of one agent (or a whole team): total, by model, and by run."""

    agent: str
    total: UsageTotals = Field(default_factory=UsageTotals)
    by_model: dict[str, UsageTotals] = Field(default_factory=dict)
    by_run: dict[str, UsageTotals] | None = None


def aggregate_usage(events: Iterable[LlmUsageEvent], *, agent: str = "*", by_run: bool = False) -> AgentUsageSummary:
    """Fold usage events into a summary (``agent`` filters unless it is ``"*"``)."""
    summary = AgentUsageSummary(agent=agent, by_run={} if by_run else None)
    for event in events:
        if agent != "*" and event.agent != agent:
            continue
        summary.total.add(event)
        summary.by_model.setdefault(event.model, UsageTotals()).add(event)
        if summary.by_run is not None:
            summary.by_run.setdefault(event.run_id, UsageTotals()).add(event)
    return summary


def headline(events: Iterable[LlmUsageEvent]) -> dict[str, Any]:
    """Requests, tokens and cost of some requests, honestly: tokens are None when any count is
    unknown, cost is None when any request is unpriced. No request at all (an ask a slash
    command answered) costs 0."""
    events = list(events)
    unknown = any(e.input_tokens is None or e.output_tokens is None for e in events)
    unpriced = any(e.cost_usd is None for e in events)
    return {
        "requests": sum(e.requests for e in events),
        "tokens": None if unknown else sum(e.total_tokens for e in events),
        "cost_usd": None if unpriced else sum(e.cost_usd or 0.0 for e in events),
    }


def totals_line(events: Iterable[LlmUsageEvent]) -> str:
    """Requests, tokens and cost in words, as the usage panel and ``%aklab`` show them
    (:func:`totals_text`)."""
    events = list(events)
    return totals_text(
        requests=sum(e.requests for e in events),
        tokens=sum(e.total_tokens for e in events),
        unreported=sum(e.requests for e in events if e.input_tokens is None or e.output_tokens is None),
        cost_usd=sum(e.cost_usd or 0.0 for e in events),
        unpriced=sum(e.requests for e in events if e.cost_usd is None),
    )
